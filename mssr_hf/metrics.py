"""Scores of generated answers (paper App. D) and the continual-learning metrics of the accuracy matrix.

Answer metrics: :func:`exact_match` with the paper's normalisation (:func:`normalize_answer`), :func:`squad_f1`
(the official SQuAD token F1), :func:`bleu` (sacreBLEU), :func:`rouge_l` (LCS F-measure with the paper's beta = 1.2),
:func:`choice_accuracy` (multiple choice by generation) and :func:`loglikelihood_choice`.

Matrix metrics, for ``R[t][i]`` = score on task i after stage t (rows may be lower-triangular lists, or full rows
with NaN/None for tasks not yet seen): :func:`average_forgetting` (``eq:forgetting``), :func:`backward_transfer`,
:func:`final_average`, :func:`normalized_score` (App. D) and :func:`summarize`.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

# ----------------------------------------------------------------------------------------------------------------
# Answer normalisation and exact match
# ----------------------------------------------------------------------------------------------------------------


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, nested braces included; else None."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth = 1
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j]
    return None


_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)$")
_FRACTION = re.compile(r"^([+-]?\d+)/(\d+)$")


def _canonical_number(text: str) -> str | None:
    """``text`` as a canonical decimal if it is a number (int, decimal, ``a/b``); else None."""
    compact = text.replace(",", "") if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?", text) else text
    if _NUMBER.match(compact):
        value = Fraction(compact)
    elif m := _FRACTION.match(compact):
        if int(m.group(2)) == 0:
            return None
        value = Fraction(int(m.group(1)), int(m.group(2)))
    else:
        return None
    if value.denominator == 1:
        return str(value.numerator)
    if 10**12 % value.denominator == 0 or all(p in (2, 5) for p in _prime_factors(value.denominator)):
        return format(value.numerator / value.denominator, ".12g")
    return f"{value.numerator}/{value.denominator}"


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + ([n] if n > 1 else [])


_STRIP = string.punctuation.replace("-", "").replace("+", "").replace("/", "") + " "


def normalize_answer(text: str) -> str:
    r"""The paper's ``Norm()`` (App. D, exact match): unwrap the last ``\boxed{}``, drop ``$``, ``\left``/``\right``,
    ``\text{...}``/``\mathrm{...}`` wrappers (keeping their content) and ``\!``/``\,`` spacing; turn
    ``\frac{a}{b}``/``\dfrac{a}{b}`` into ``a/b``; strip surrounding whitespace and punctuation; lowercase; collapse
    whitespace; and if what is left is a number (``1,000``, ``3.0``, ``+5``, ``1/2``, ``.5``) write it canonically
    (``1000``, ``3``, ``5``, ``0.5``, ``0.5``)."""
    boxed = last_boxed(text)
    s = boxed if boxed is not None else text
    s = s.replace("$", "").replace("\\left", "").replace("\\right", "").replace("\\!", "").replace("\\,", "")
    s = re.sub(r"\\(?:text|mathrm|textbf|mbox)\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\d?frac\{([^{}]*)\}\{([^{}]*)\}", r"\1/\2", s)
    s = " ".join(s.lower().split())
    for candidate in (s, s.strip(_STRIP).strip()):  # a number first (".5" keeps its point), then stripped text
        number = _canonical_number(candidate.replace(" ", ""))
        if number is not None:
            return "0" if number in ("-0", "+0") else number
    return s.strip(_STRIP).strip()


def exact_match(prediction: str, reference: str) -> float:
    """1.0 if the normalised answers are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(reference))


# ----------------------------------------------------------------------------------------------------------------
# SQuAD
# ----------------------------------------------------------------------------------------------------------------


def _squad_normalize(text: str) -> str:
    """The official SQuAD v1.1 normalisation: lowercase, drop punctuation and the articles a/an/the, fix spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _squad_f1_single(prediction: str, reference: str) -> float:
    pred, ref = _squad_normalize(prediction).split(), _squad_normalize(reference).split()
    if not pred or not ref:
        return float(pred == ref)  # SQuAD v2 semantics: both empty -> 1, one empty -> 0
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def squad_f1(prediction: str, references: str | Sequence[str]) -> float:
    """The official SQuAD token F1, the maximum over ``references``."""
    refs = [references] if isinstance(references, str) else list(references)
    if not refs:
        raise ValueError("references must hold at least one answer")
    return max(_squad_f1_single(prediction, r) for r in refs)


def squad_exact_match(prediction: str, references: str | Sequence[str]) -> float:
    refs = [references] if isinstance(references, str) else list(references)
    return float(any(_squad_normalize(prediction) == _squad_normalize(r) for r in refs))


# ----------------------------------------------------------------------------------------------------------------
# BLEU, ROUGE-L
# ----------------------------------------------------------------------------------------------------------------


def _check_lengths(predictions: Sequence, references: Sequence) -> None:
    if len(predictions) != len(references):
        raise ValueError(f"predictions and references differ in length: {len(predictions)} vs {len(references)}")


def bleu(predictions: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]]) -> float:
    """Corpus BLEU-4 from sacreBLEU (13a tokenisation, its default exponential smoothing), on sacreBLEU's 0-100
    scale. ``references[i]`` is one reference string or a list of them."""
    import sacrebleu

    _check_lengths(predictions, references)
    refs = [[r] if isinstance(r, str) else list(r) for r in references]
    width = max((len(r) for r in refs), default=1)
    streams = [[r[k] if k < len(r) else r[0] for r in refs] for k in range(width)]
    return float(sacrebleu.corpus_bleu(list(predictions), streams).score)


def _tokens(text: str) -> list[str]:
    """rouge_score's default tokenisation: lowercase, runs of ASCII letters and digits."""
    return re.findall(r"[a-z0-9]+", text.lower())


def _lcs(a: list[str], b: list[str]) -> int:
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def rouge_l_single(prediction: str, reference: str, beta: float = 1.2) -> float:
    r"""ROUGE-L of App. D: $P = LCS/|G|$, $R = LCS/|R|$, $F = (1+\beta^2) P R / (R + \beta^2 P)$."""
    pred, ref = _tokens(prediction), _tokens(reference)
    lcs = _lcs(pred, ref) if pred and ref else 0
    if lcs == 0:
        return 0.0
    p, r = lcs / len(pred), lcs / len(ref)
    return (1 + beta**2) * p * r / (r + beta**2 * p)


def rouge_l(predictions: Sequence[str], references: Sequence[str], beta: float = 1.2) -> float:
    """Mean ROUGE-L F over prediction/reference pairs (beta = 1.2 as in the paper; beta = 1 is rouge_score's F1)."""
    _check_lengths(predictions, references)
    if not predictions:
        return float("nan")
    return sum(rouge_l_single(p, r, beta) for p, r in zip(predictions, references)) / len(predictions)


# ----------------------------------------------------------------------------------------------------------------
# Multiple choice
# ----------------------------------------------------------------------------------------------------------------

_LETTER = re.compile(r"(?:^|answer\s*(?:is)?\s*[:\-]?\s*|\()\s*\(?([A-Ea-e])\)?(?:[.):\s]|$)")


def extract_choice(text: str, choices: Sequence[str] | None = None) -> str:
    """The option a generated ``text`` picks: a letter A-E (``B``, ``(B)``, ``B.``, ``Answer: B``), or, with
    ``choices``, the letter of the option whose text it starts with. Returns "" if none is found."""
    stripped = text.strip()
    match = _LETTER.search(stripped)
    if match:
        return match.group(1).upper()
    if choices:
        lowered = stripped.lower()
        for k, option in enumerate(choices):
            if option and lowered.startswith(option.strip().lower()):
                return "ABCDE"[k]
    return ""


def choice_accuracy(
    predictions: Sequence[str], references: Sequence[str], choices: Sequence[Sequence[str]] | None = None
) -> float:
    """Multiple-choice accuracy by generation: the extracted option letter equals the reference letter (or the
    reference option text, given ``choices``)."""
    _check_lengths(predictions, references)
    if not predictions:
        return float("nan")
    correct = 0
    for i, (prediction, reference) in enumerate(zip(predictions, references)):
        options = choices[i] if choices is not None else None
        picked = extract_choice(prediction, options)
        want = reference.strip().upper() if len(reference.strip()) == 1 else extract_choice(reference, options)
        correct += bool(picked) and picked == want
    return correct / len(predictions)


def loglikelihood_choice(option_logprobs: Sequence[Sequence[float]], answers: Sequence[int]) -> float:
    """Multiple-choice accuracy by log-likelihood: the option with the highest log-probability (summed or length-
    normalised by the caller) is the model's pick."""
    _check_lengths(option_logprobs, answers)
    if not answers:
        return float("nan")
    picks = [max(range(len(lp)), key=lambda k, lp=lp: lp[k]) for lp in option_logprobs]
    return sum(p == a for p, a in zip(picks, answers)) / len(answers)


# ----------------------------------------------------------------------------------------------------------------
# The accuracy matrix
# ----------------------------------------------------------------------------------------------------------------


def _lower_triangle(matrix) -> list[list[float]]:
    """Rows ``R[t][0..t]`` as floats from a lower-triangular list or a full matrix (entries above the diagonal are
    ignored); NaN/None on or below the diagonal are kept as NaN."""
    rows = [list(map(lambda v: math.nan if v is None else float(v), row)) for row in (list(r) for r in matrix)]
    for t, row in enumerate(rows):
        if len(row) < t + 1:
            raise ValueError(f"matrix row {t} has {len(row)} entries; a row after stage t needs at least t+1")
    return [row[: t + 1] for t, row in enumerate(rows)]


def _mean(values: list[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return sum(values) / len(values) if values else math.nan


def average_forgetting(matrix) -> float:
    r"""Average forgetting, ``eq:forgetting``:
    $\mathcal F = \frac{1}{T-1}\sum_{i=1}^{T-1}\max_{t>i}[R_{i,i} - R_{t,i}]$: the largest drop of each earlier
    task from its score right after it was learned (not from its best score). 0.0 for a single stage."""
    rows = _lower_triangle(matrix)
    T = len(rows)
    if T < 2:
        return 0.0
    return _mean([max(rows[i][i] - rows[t][i] for t in range(i + 1, T)) for i in range(T - 1)])


def backward_transfer(matrix) -> float:
    r"""BWT $= \frac{1}{T-1}\sum_{i<T-1}(R_{T-1,i} - R_{i,i})$; negative when earlier tasks were forgotten."""
    rows = _lower_triangle(matrix)
    T = len(rows)
    if T < 2:
        return 0.0
    return _mean([rows[-1][i] - rows[i][i] for i in range(T - 1)])


def final_average(matrix) -> float:
    """Mean score over all tasks after the last stage."""
    rows = _lower_triangle(matrix)
    return _mean(rows[-1]) if rows else math.nan


def normalized_score(matrix, eps: float = 1e-8) -> float:
    r"""Average normalised score (App. D): $\frac1D\sum_d s_d / \max(s_d^{max}, \epsilon)$ with $s_d$ the final score
    on task d and $s_d^{max}$ its best score over the stages where it was evaluated."""
    rows = _lower_triangle(matrix)
    if not rows:
        return math.nan
    T = len(rows)
    return _mean([rows[-1][d] / max(max(rows[t][d] for t in range(d, T)), eps) for d in range(T)])


def summarize(matrix) -> dict[str, float]:
    """final_average, average_forgetting, backward_transfer and normalized_score of ``matrix``."""
    return {
        "final_average": final_average(matrix),
        "average_forgetting": average_forgetting(matrix),
        "backward_transfer": backward_transfer(matrix),
        "normalized_score": normalized_score(matrix),
    }
