"""Scores of generated answers (paper App. D, ``app:eval_metric``; arXiv 2603.09892).

:func:`exact_match` with the paper's answer normalisation (:func:`normalize_answer`), :func:`squad_f1` /
:func:`squad_exact_match` (the official SQuAD scores), :func:`bleu` (sacreBLEU corpus BLEU-4, 0-100), :func:`rouge_l`
(LCS F-measure with the paper's beta = 1.2), :func:`choice_accuracy` (multiple choice by generation) and
:func:`loglikelihood_choice` (multiple choice by log-likelihood; the log-probabilities themselves come from
``evaluation.py``). Corpus-level scores of an empty input are NaN. The metrics of the accuracy matrix these scores
fill are in :mod:`mssr_hf.cl_metrics`.

Pure Python (sacreBLEU is imported by :func:`bleu` only); equations are cited by their ``\\label{}`` in
``paper/mssr-paper.tex``.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

__all__ = [
    "bleu",
    "canonical_number",
    "choice_accuracy",
    "exact_match",
    "extract_choice",
    "last_boxed",
    "loglikelihood_choice",
    "longest_common_subsequence",
    "normalize_answer",
    "normalize_squad_answer",
    "rouge_l",
    "rouge_l_score",
    "rouge_tokens",
    "squad_exact_match",
    "squad_f1",
]

# ----------------------------------------------------------------------------------------------------------------
# LaTeX helpers
# ----------------------------------------------------------------------------------------------------------------


def _closing_brace(text: str, start: int) -> int | None:
    """Index of the ``}`` closing the ``{`` at ``text[start]`` (escaped ``\\{``/``\\}`` do not count); else None."""
    depth, j = 0, start
    while j < len(text):
        char = text[j]
        if char == "\\":
            j += 2
            continue
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == 0:
            return j
        j += 1
    return None


_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) to open in ``text`` whose braces close (nested braces
    included); None if there is none."""
    for match in reversed(list(_BOXED.finditer(text))):
        end = _closing_brace(text, match.end() - 1)
        if end is not None:
            return text[match.end() : end]
    return None


_WRAPPER = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mathit|mbox)\s*\{")


def _unwrap_text(text: str) -> str:
    """``\\text{X}`` (and ``\\textbf``, ``\\mathrm``, ``\\mbox``, ...) -> ``X``, nested braces included."""
    start = 0
    while match := _WRAPPER.search(text, start):
        end = _closing_brace(text, match.end() - 1)
        if end is None:
            start = match.end()
            continue
        text = text[: match.start()] + text[match.end() : end] + text[end + 1 :]
        start = match.start()
    return text


_FRAC = re.compile(r"\\[dt]?frac(?![a-z])")
_COMMAND = re.compile(r"\\(?:[a-z]+|.)")


def _latex_argument(text: str, j: int) -> tuple[str | None, int]:
    """The argument of a command starting at ``text[j]``: a ``{...}`` group, a ``\\command`` or one character."""
    while j < len(text) and text[j] == " ":
        j += 1
    if j >= len(text) or text[j] == "}":
        return None, j
    if text[j] == "{":
        end = _closing_brace(text, j)
        return (None, j) if end is None else (text[j + 1 : end], end + 1)
    if match := _COMMAND.match(text, j):
        return match.group(), match.end()
    return text[j], j + 1


def _fraction_part(arg: str, numerator: bool) -> str:
    """``arg`` as it stands in ``a/b``: bare if it is one term (the numerator may carry a sign), else parenthesised,
    so that ``\\frac{x+1}{2}`` -> ``(x+1)/2`` never reads as ``x + 1/2``."""
    arg = arg.strip()
    body = arg[1:] if numerator and arg[:1] in "+-" else arg
    return arg if body and not re.search(r"[+\-*/=,\s]", body) else f"({arg})"


def _replace_fracs(text: str) -> str:
    """``\\frac{a}{b}``, ``\\dfrac{a}{b}``, ``\\tfrac{a}{b}`` and ``\\frac12`` -> ``a/b`` (nested fractions too)."""
    out, i = [], 0
    while match := _FRAC.search(text, i):
        num, j = _latex_argument(text, match.end())
        den, j = _latex_argument(text, j) if num is not None else (None, j)
        if num is None or den is None:
            out.append(text[i : match.end()])
            i = match.end()
            continue
        num, den = _replace_fracs(num), _replace_fracs(den)
        out.append(text[i : match.start()] + f"{_fraction_part(num, True)}/{_fraction_part(den, False)}")
        i = j
    return "".join(out) + text[i:]


# ----------------------------------------------------------------------------------------------------------------
# Answer normalisation and exact match
# ----------------------------------------------------------------------------------------------------------------

# Dropped outright: math delimiters, sizing/spacing commands, degree marks (not when a letter follows: \leftarrow).
_DROP = re.compile(
    r"\\(?:left|right|displaystyle|big|bigg)(?![a-z])|\\[!,;: ]|\\[()\[\]]|\^\s*\{?\\circ\}?|\\degree(?![a-z])"
)
_LOOSE_SPACE = re.compile(r"(?<!\w) | (?!\w)")  # a space not between two word characters
_THOUSANDS = re.compile(r"(?<![0-9.,])([0-9]{1,3})((?:,[0-9]{3})+)(?![0-9]|,[0-9])")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_RATIO = re.compile(r"([+-]?[0-9]+)/([0-9]+)")
_EDGE_PUNCTUATION = " .,;:!?'\"`*%"  # stripped from both ends; brackets and signs are kept: (0,1] != [0,1)


def canonical_number(text: str) -> str | None:
    """``text`` written canonically if the whole of it is a number, else None.

    Numbers are integers, decimals (``3.0``, ``.5``, ``5.``) and ratios of integers (``-2/6``), with an optional
    sign; no thousands separators, no exponent. The value is exact (``fractions.Fraction``): an integer is written
    without a point (``3.0`` -> ``3``, ``-0`` -> ``0``, ``+5`` -> ``5``); a terminating decimal in plain decimal
    notation without trailing zeros (``0.50`` -> ``0.5``, ``1/2`` -> ``0.5``, ``1/1024`` -> ``0.0009765625``);
    any other ratio in lowest terms (``2/6`` -> ``1/3``). So ``1/3`` and ``0.33`` stay different.
    """
    try:
        if _DECIMAL.fullmatch(text):
            value = Fraction(text)
        elif match := _RATIO.fullmatch(text):
            if int(match.group(2)) == 0:
                return None
            value = Fraction(int(match.group(1)), int(match.group(2)))
        else:
            return None
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
        return None
    sign, num, den = "-" if value < 0 else "", abs(value.numerator), value.denominator
    if den == 1:
        return f"{sign}{num}"
    twos, fives, rest = 0, 0, den
    while rest % 2 == 0:
        twos, rest = twos + 1, rest // 2
    while rest % 5 == 0:
        fives, rest = fives + 1, rest // 5
    if rest != 1:
        return f"{sign}{num}/{den}"
    places = max(twos, fives)  # num / den = num * 10^places / den / 10^places, exactly
    digits = str(num * 10**places // den).rjust(places + 1, "0")
    return f"{sign}{digits[:-places]}.{digits[-places:].rstrip('0')}"


def _normalize_once(text: str) -> str:
    s = text.lower().replace("\u2212", "-")  # Unicode minus
    boxed = last_boxed(s)
    s = boxed if boxed is not None else s
    s = s.replace("\\$", "").replace("$", "").replace("\\%", "%").replace("{,}", ",")
    s = _replace_fracs(_DROP.sub("", _unwrap_text(s)))
    s = _THOUSANDS.sub(lambda m: m.group(1) + m.group(2).replace(",", ""), " ".join(s.split()))
    s = _LOOSE_SPACE.sub("", s).replace(",", ", ")
    number = canonical_number(s)  # before stripping: ".5" keeps its point
    if number is None:
        s = s.strip(_EDGE_PUNCTUATION)
        number = canonical_number(s)
    return s if number is None else number


def normalize_answer(text: str) -> str:
    r"""The paper's answer normalisation $\mathrm{Norm}(\cdot)$ of exact match (App. D, ``app:eval_metric``).

    In order:

    1. lowercase (so ``\Text``, ``\BOXED`` are caught too), and a Unicode minus becomes ``-``;
    2. keep only the content of the last ``\boxed{...}``/``\fbox{...}`` if there is one (nested braces handled);
    3. drop ``\$`` and ``$``; ``\%`` -> ``%``; ``{,}`` -> ``,``;
    4. unwrap ``\text{X}``, ``\textbf``, ``\textit``, ``\textrm``, ``\mathrm``, ``\mathbf``, ``\mathit``, ``\mbox``
       -> ``X``;
    5. drop ``\left``/``\right`` (not ``\leftarrow``), ``\displaystyle``, ``\big``-style sizes, the spacing commands
       ``\! \, \; \: \ ``, the math delimiters ``\( \) \[ \]`` and degree marks (``^\circ``, ``^{\circ}``,
       ``\degree``);
    6. ``\frac{a}{b}``, ``\dfrac{a}{b}``, ``\tfrac{a}{b}``, ``\frac12`` -> ``a/b``, with a part that is not a single
       term in parentheses (``\frac{x+1}{2}`` -> ``(x+1)/2``);
    7. collapse whitespace runs to one space; remove thousands separators from digit groups (``1,000,000`` ->
       ``1000000``; ``1,2``, ``1,0000`` and ``3, 500`` stay);
    8. drop each space that does not stand between two word characters (letters, digits, ``_``), then write every
       comma as ``", "``: ``( 1 , 2 )``, ``(1,2)`` -> ``(1, 2)``; ``x + 1`` -> ``x+1``; ``new york`` stays;
    9. if the whole string is a number, write it as :func:`canonical_number` does; otherwise strip the surrounding
       characters `` .,;:!?'"`*%`` and try that again. Brackets and signs are never stripped (intervals such as
       ``(0,1]`` stay apart from ``[0,1)``).

    The steps are repeated until nothing changes, so ``normalize_answer`` is idempotent. It compares final answers:
    it does not look for an answer inside a sentence (that is the task's ``extract_answer``), and it does not parse
    expressions (``x+1`` and ``1+x`` differ).

    Args:
        text (`str`): a final answer, as generated or as the reference.

    Returns:
        `str`: the normalised answer.
    """
    for _ in range(len(text) + 2):  # every pass that changes something shortens the text or ends on a number
        normalized = _normalize_once(text)
        if normalized == text:
            break
        text = normalized
    return text


def exact_match(prediction: str, reference: str) -> float:
    r"""Exact match of one answer (App. D, ``app:eval_metric``):
    $\mathbf{1}[\mathrm{Norm}(\hat y) = \mathrm{Norm}(y)]$ with $\mathrm{Norm}$ = :func:`normalize_answer`.

    Returns:
        `float`: 1.0 or 0.0. EM of a dataset is the mean over its examples.
    """
    return float(normalize_answer(prediction) == normalize_answer(reference))


# ----------------------------------------------------------------------------------------------------------------
# SQuAD
# ----------------------------------------------------------------------------------------------------------------

_PUNCTUATION = frozenset(string.punctuation)


def normalize_squad_answer(text: str) -> str:
    """The official SQuAD v1.1 ``normalize_answer``: lowercase, delete ASCII punctuation (``U.S.`` -> ``us``,
    ``well-known`` -> ``wellknown``, ``3.5`` -> ``35``), delete the words a/an/the, collapse whitespace."""
    text = "".join(char for char in text.lower() if char not in _PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _references(references: str | Sequence[str], name: str = "references") -> list[str]:
    refs = [references] if isinstance(references, str) else list(references)
    if not refs:
        raise ValueError(f"{name} must hold at least one reference")
    return refs


def _squad_f1_one(prediction: str, reference: str) -> float:
    pred, ref = normalize_squad_answer(prediction).split(), normalize_squad_answer(reference).split()
    if not pred or not ref:
        return float(pred == ref)  # SQuAD v2 ``compute_f1``: both empty -> 1, one empty -> 0
    common = sum((Counter(pred) & Counter(ref)).values())  # tokens shared, with multiplicity
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def squad_f1(prediction: str, references: str | Sequence[str]) -> float:
    r"""The official SQuAD token F1, the maximum over the gold answers.

    Tokens are the words of :func:`normalize_squad_answer`; with $c$ the tokens shared (counted with multiplicity),
    $P = c/|\hat y|$, $R = c/|y|$ and $F_1 = 2PR/(P+R)$ (0 when $c = 0$). An answer that normalises to nothing
    follows SQuAD v2: F1 = 1 if the other one is empty too, else 0 (v1.1 would give 0 for both empty).

    Args:
        prediction (`str`): the generated answer.
        references (`str` or `Sequence[str]`): one gold answer or several.

    Returns:
        `float`: in [0, 1].

    Raises:
        `ValueError`: ``references`` is empty.
    """
    return max(_squad_f1_one(prediction, r) for r in _references(references))


def squad_exact_match(prediction: str, references: str | Sequence[str]) -> float:
    """The official SQuAD exact match: 1.0 if :func:`normalize_squad_answer` of ``prediction`` equals that of any
    gold answer, else 0.0. Raises `ValueError` if ``references`` is empty."""
    pred = normalize_squad_answer(prediction)
    return float(any(pred == normalize_squad_answer(r) for r in _references(references)))


# ----------------------------------------------------------------------------------------------------------------
# BLEU, ROUGE-L
# ----------------------------------------------------------------------------------------------------------------


def _check_lengths(first: Sequence, second: Sequence, names: str) -> None:
    if len(first) != len(second):
        raise ValueError(f"{names} must have the same length, got {len(first)} and {len(second)}")


def bleu(predictions: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]]) -> float:
    r"""Corpus BLEU-4 (App. D, ``app:eval_metric``), computed by sacreBLEU's ``corpus_bleu`` with its defaults:
    13a tokenisation, case-sensitive, exponential smoothing (``smooth_method="exp"``: the k-th n-gram order with no
    match counts as $1 / (2^k \cdot \text{total}_n)$), uniform weights $w_n = 1/4$ and the corpus brevity penalty.

    Args:
        predictions (`Sequence[str]`): generated texts.
        references (`Sequence[str]` or `Sequence[Sequence[str]]`): for each prediction, one reference or several.

    Returns:
        `float`: BLEU on sacreBLEU's **0-100** scale (100 = identical corpus); NaN for an empty corpus.

    Raises:
        `ValueError`: the lengths differ, or a prediction has no reference.
    """
    import sacrebleu

    _check_lengths(predictions, references, "predictions and references")
    if not predictions:
        return math.nan
    refs = [_references(r, f"references[{i}]") for i, r in enumerate(references)]
    # sacreBLEU takes reference streams of equal length; a short list is padded with its own first reference, which
    # changes neither the clipped n-gram counts nor the closest reference length.
    width = max(len(r) for r in refs)
    streams = [[r[k] if k < len(r) else r[0] for r in refs] for k in range(width)]
    return float(sacrebleu.corpus_bleu(list(predictions), streams).score)


def rouge_tokens(text: str) -> list[str]:
    """rouge_score's default tokenisation (no stemming): lowercase, then the runs of ``[a-z0-9]``; everything else
    (punctuation, non-ASCII letters) separates tokens and is dropped."""
    return re.findall(r"[a-z0-9]+", text.lower())


def longest_common_subsequence(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists (dynamic programming, O(|a| |b|))."""
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def rouge_l_score(prediction: str, reference: str, beta: float = 1.2) -> float:
    r"""ROUGE-L of one pair (App. D, ``app:eval_metric``): with $L = \mathrm{LCS}(G, R)$ over :func:`rouge_tokens`,
    $P = L/|G|$, $R = L/|R|$ and

    $$F = \frac{(1+\beta^2) P R}{R + \beta^2 P}.$$

    0.0 if either side has no token or $L = 0$. With ``beta=1`` this is rouge_score's ``rougeL`` F-measure.

    Args:
        prediction (`str`): generated text $G$.
        reference (`str`): reference $R$.
        beta (`float`, *optional*, defaults to `1.2`): $\beta$ (the paper's value); > 1 weighs recall more.
    """
    pred, ref = rouge_tokens(prediction), rouge_tokens(reference)
    lcs = longest_common_subsequence(pred, ref) if pred and ref else 0
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(pred), lcs / len(ref)
    return (1 + beta**2) * precision * recall / (recall + beta**2 * precision)


def rouge_l(
    predictions: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], beta: float = 1.2
) -> float:
    """Mean :func:`rouge_l_score` over prediction/reference pairs, on a 0-1 scale; with several references for a
    prediction, the best one counts. NaN for empty input.

    Raises:
        `ValueError`: the lengths differ, or a prediction has no reference.
    """
    _check_lengths(predictions, references, "predictions and references")
    if not predictions:
        return math.nan
    scores = [
        max(rouge_l_score(p, r, beta) for r in _references(refs, f"references[{i}]"))
        for i, (p, refs) in enumerate(zip(predictions, references))
    ]
    return sum(scores) / len(scores)


# ----------------------------------------------------------------------------------------------------------------
# Multiple choice
# ----------------------------------------------------------------------------------------------------------------

_OPTION_LETTERS = string.ascii_uppercase
_ANSWER_CUE = re.compile(r"(?i:answer)(?:\s+(?i:is))?\s*[:=]?\s*(?:\(([A-Za-z])\)|([A-Z])(?![A-Za-z0-9]))")
_LEADING_LETTER = re.compile(r"\(([A-Za-z])\)|([A-Z])(?![A-Za-z0-9])|([a-z])[.)]")
_PAREN_LETTER = re.compile(r"\(([A-Za-z])\)")
_CUE_PREFIX = re.compile(r"^(?:the\s+)?(?:correct\s+)?answer\s*(?:is)?\s*:?\s*")


def _letters(choices: Sequence[str] | None) -> str:
    if choices is None:
        return "ABCDE"
    if len(choices) > len(_OPTION_LETTERS):
        raise ValueError(f"choices has {len(choices)} options; at most {len(_OPTION_LETTERS)} can be lettered")
    return _OPTION_LETTERS[: len(choices)]


def _option_text(text: str) -> str:
    return " ".join(text.lower().split()).strip(_EDGE_PUNCTUATION)


def extract_choice(text: str, choices: Sequence[str] | None = None) -> str:
    """The option letter a generated ``text`` picks, or ``""`` if it picks none.

    Valid letters are A-E, or the first ``len(choices)`` letters given ``choices``. The first rule that applies:

    1. (with ``choices``) the text is an option's text (case, spacing and surrounding punctuation aside);
    2. the text is just a letter: ``B``, ``b``, ``(B)``, ``B.``, ``B)``;
    3. the last answer cue: ``Answer: B``, ``the answer is (c)``, ``answer is B.`` (a lower-case letter only in
       parentheses, so "the answer is a cat" is not A);
    4. (with ``choices``) the text, after an "answer is"/"answer:" prefix, begins with an option's text followed by a
       word boundary; the longest such option wins (``red, clearly`` -> the option ``red``);
    5. a leading letter: ``B. Paris``, ``(B) because``, ``B\\nQuestion``, ``b. the second`` (an upper-case letter
       followed by a non-alphanumeric character or the end, or a lower-case one followed by ``.``/``)``). A text
       that begins with the word "A" (and no option's text) therefore reads as option A; the prompts of ``tasks``
       ask for a letter;
    6. the first parenthesised valid letter anywhere: ``I pick (B)``.

    Args:
        text (`str`): generated text.
        choices (`Sequence[str]`, *optional*): the option texts, in letter order.

    Returns:
        `str`: an upper-case letter, or ``""``.
    """
    letters = _letters(choices)
    options = [_option_text(c) for c in choices] if choices is not None else []
    stripped = text.strip()
    flat = _option_text(stripped)
    if flat and flat in options:
        return letters[options.index(flat)]
    if re.fullmatch(r"\(?[A-Za-z]\)?[.:)]?", stripped):
        letter = next(c for c in stripped if c.isalpha()).upper()
        if letter in letters:
            return letter
    cues = list(_ANSWER_CUE.finditer(stripped))
    if cues and (letter := (cues[-1].group(1) or cues[-1].group(2)).upper()) in letters:
        return letter
    body = _CUE_PREFIX.sub("", flat)
    prefixes = [k for k, o in enumerate(options) if o and re.match(re.escape(o) + r"(?!\w)", body)]
    if prefixes:
        return letters[max(prefixes, key=lambda k: len(options[k]))]
    if match := _LEADING_LETTER.match(stripped):
        letter = next(g for g in match.groups() if g).upper()
        if letter in letters:
            return letter
    for match in _PAREN_LETTER.finditer(stripped):
        if match.group(1).upper() in letters:
            return match.group(1).upper()
    return ""


def _reference_letter(reference: str, choices: Sequence[str] | None, i: int) -> str:
    letters = _letters(choices)
    stripped = reference.strip().strip("().:")
    if len(stripped) == 1 and stripped.upper() in letters:
        return stripped.upper()
    letter = extract_choice(reference, choices)
    if not letter:
        kind = "an option letter or option text" if choices is not None else f"an option letter ({letters})"
        raise ValueError(f"references[{i}] = {reference!r} is not {kind}")
    return letter


def choice_accuracy(
    predictions: Sequence[str], references: Sequence[str], choices: Sequence[Sequence[str]] | None = None
) -> float:
    """Multiple-choice accuracy by generation: the fraction of predictions whose :func:`extract_choice` letter is
    the reference's.

    Args:
        predictions (`Sequence[str]`): generated texts.
        references (`Sequence[str]`): the right option of each, as a letter (``"B"``, ``"(B)"``) or, given
            ``choices``, as the option's text.
        choices (`Sequence[Sequence[str]]`, *optional*): the option texts of each question, in letter order.

    Returns:
        `float`: in [0, 1]; a prediction from which no option can be read counts as wrong. NaN for empty input.

    Raises:
        `ValueError`: the lengths differ, or a reference names no option.
    """
    _check_lengths(predictions, references, "predictions and references")
    if choices is not None:
        _check_lengths(predictions, choices, "predictions and choices")
    if not predictions:
        return math.nan
    correct = 0
    for i, (prediction, reference) in enumerate(zip(predictions, references)):
        options = choices[i] if choices is not None else None
        correct += extract_choice(prediction, options) == _reference_letter(reference, options, i)
    return correct / len(predictions)


def loglikelihood_choice(option_logprobs: Sequence[Sequence[float]], answers: Sequence[int]) -> float:
    """Multiple-choice accuracy by log-likelihood: the model picks the option with the highest log-probability
    (summed or length-normalised, as the caller computed it); a tie goes to the first such option.

    NaN counts as -inf; a question whose options are all -inf/NaN counts as wrong.

    Args:
        option_logprobs (`Sequence[Sequence[float]]`): per question, one log-likelihood per option.
        answers (`Sequence[int]`): per question, the index of the right option.

    Returns:
        `float`: in [0, 1]; NaN for empty input.

    Raises:
        `ValueError`: the lengths differ, a question has no option, or an answer is not an option index.
    """
    _check_lengths(option_logprobs, answers, "option_logprobs and answers")
    if not answers:
        return math.nan
    correct = 0
    for i, (logprobs, answer) in enumerate(zip(option_logprobs, answers)):
        values = [-math.inf if math.isnan(v) else float(v) for v in logprobs]
        if not values:
            raise ValueError(f"option_logprobs[{i}] is empty")
        if not 0 <= answer < len(values):
            raise ValueError(f"answers[{i}] = {answer} is not an option index for {len(values)} options")
        best = max(values)
        correct += best > -math.inf and values.index(best) == answer
    return correct / len(answers)
