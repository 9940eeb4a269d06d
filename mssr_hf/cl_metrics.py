"""The continual-learning metrics of the accuracy matrix (paper Sec. 4 and App. D; arXiv 2603.09892).

``R[t][i]`` is the score on task i after training stage t (the scores come from :mod:`mssr_hf.scoring`). A matrix
is a sequence of rows (nested lists or a 2-D numpy array), either lower-triangular (row t holds t+1 scores) or full
T x T, whose entries above the diagonal (tasks not yet seen, usually NaN/None) are ignored. A NaN/None on or below
the diagonal is a missing score: it is left out of the means. :func:`average_forgetting` (``eq:forgetting``),
:func:`backward_transfer`, :func:`final_average`, :func:`normalized_score` (App. D) and :func:`summarize`, which
computes the four of them under the names in :data:`CL_METRIC_NAMES`. :func:`score_standard_error` and
:func:`final_average_standard_error` give the evaluation noise of a score and of the final average. A general probe
such as MMLU is not a task of the matrix; ``continual.py`` records it on its own.

Pure Python; equations are cited by their ``\\label{}`` in ``paper/mssr-paper.tex``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "CL_METRIC_NAMES",
    "SUMMARY_METRICS",
    "Matrix",
    "average_forgetting",
    "backward_transfer",
    "final_average",
    "final_average_standard_error",
    "lower_triangle",
    "normalized_score",
    "score_standard_error",
    "summarize",
]

Matrix = Sequence[Sequence[float | None]]  # or a 2-D numpy array


def lower_triangle(matrix: Matrix) -> list[list[float]]:
    """The rows ``R[t][0..t]`` of an accuracy matrix, as floats with NaN for missing scores.

    Args:
        matrix (`Sequence[Sequence[float | None]]` or 2-D numpy array): row t = scores after stage t. Each row t has
            either t+1 entries (lower-triangular) or T entries (full, T = number of rows); entries above the
            diagonal are ignored whatever they hold. None counts as NaN.

    Raises:
        `ValueError`: ``matrix`` is empty, is not a sequence of rows, has a row of another length, or holds an
            entry that is not a number.
    """
    try:
        rows = [list(row) for row in matrix]
    except TypeError as error:
        raise ValueError(f"matrix must be a sequence of rows (row t = scores after stage t): {error}") from None
    T = len(rows)
    if T == 0:
        raise ValueError("matrix is empty: it needs a row per training stage")
    lower = []
    for t, row in enumerate(rows):
        if len(row) not in (t + 1, T):
            raise ValueError(
                f"matrix row {t} has {len(row)} entries: expected {t + 1} (lower-triangular) or {T} (full, with "
                "NaN/None for tasks not yet seen)"
            )
        try:
            lower.append([math.nan if v is None else float(v) for v in row[: t + 1]])
        except (TypeError, ValueError):
            raise ValueError(f"matrix row {t} holds a value that is not a number or None: {row[: t + 1]!r}") from None
    return lower


def _nanmean(values: list[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return sum(values) / len(values) if values else math.nan


def _nanmax(values: list[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return max(values) if values else math.nan


def average_forgetting(matrix: Matrix) -> float:
    r"""Average forgetting, ``eq:forgetting``:

    $$\mathcal F = \frac{1}{T-1} \sum_{i=1}^{T-1} \max_{t > i} [F_i(D_i) - F_t(D_i)],$$

    i.e. with 0-based ``R``: the mean over tasks i = 0..T-2 of ``max(R[i][i] - R[t][i] for t in i+1..T-1)``. As in
    the paper, the drop is measured from the score **right after learning task i**, not from its best score: a task
    that improves later and then falls back to where it started has forgotten nothing. Negative when every later
    score of a task is above its first one. Missing scores are skipped, and so is a task left with no drop.

    Returns:
        `float`: $\mathcal F$ (larger = more forgetting); 0.0 for a single stage; NaN if no task has a drop.
    """
    rows = lower_triangle(matrix)
    T = len(rows)
    if T == 1:
        return 0.0
    drops = [_nanmax([rows[i][i] - rows[t][i] for t in range(i + 1, T)]) for i in range(T - 1)]
    return _nanmean(drops)


def backward_transfer(matrix: Matrix) -> float:
    r"""Backward transfer: $\mathrm{BWT} = \frac{1}{T-1} \sum_{i=0}^{T-2} (R_{T-1,i} - R_{i,i})$, the mean change of
    the earlier tasks from right after learning them to the end; negative when they were forgotten. Since the
    final drop is one of the drops :func:`average_forgetting` maximises over, $\mathcal F \ge -\mathrm{BWT}$, with
    equality when every task is at its lowest at the end.

    Returns:
        `float`: BWT; 0.0 for a single stage; missing scores are skipped.
    """
    rows = lower_triangle(matrix)
    T = len(rows)
    if T == 1:
        return 0.0
    return _nanmean([rows[-1][i] - rows[i][i] for i in range(T - 1)])


def final_average(matrix: Matrix) -> float:
    """Mean of the last row: the average score over all T tasks after the final stage (missing scores skipped)."""
    return _nanmean(lower_triangle(matrix)[-1])


def normalized_score(matrix: Matrix, eps: float = 1e-8) -> float:
    r"""Average normalised score (App. D, ``app:eval_metric``):

    $$\mathrm{Score}_{avg} = \frac{1}{D} \sum_{d} \frac{s_d}{\max(s_d^{max}, \epsilon)},$$

    with $s_d$ = ``R[T-1][d]`` the final score on task d and $s_d^{max}$ = ``max(R[t][d] for t >= d)`` its best
    score over the stages at which it was evaluated (the final one included, so each term is <= 1 for
    non-negative scores). All T tasks count, the last one too (its term is 1).

    Args:
        matrix: the accuracy matrix.
        eps (`float`, *optional*, defaults to `1e-8`): $\epsilon$; a task never above 0 contributes 0.
    """
    rows = lower_triangle(matrix)
    T = len(rows)
    return _nanmean([rows[-1][d] / max(_nanmax([rows[t][d] for t in range(d, T)]), eps) for d in range(T)])


# A run's summary metrics, under the names its results.json and model cards use, in that order.
SUMMARY_METRICS = {
    "final_average": final_average,
    "average_forgetting": average_forgetting,
    "backward_transfer": backward_transfer,
    "normalized_score": normalized_score,
}
CL_METRIC_NAMES: tuple[str, ...] = tuple(SUMMARY_METRICS)


def summarize(matrix: Matrix) -> dict[str, float]:
    """The four matrix metrics, keyed by :data:`CL_METRIC_NAMES`: ``final_average``, ``average_forgetting``,
    ``backward_transfer``, ``normalized_score``."""
    return {name: metric(matrix) for name, metric in SUMMARY_METRICS.items()}


def score_standard_error(score: float, n: int) -> float:
    r"""Standard error of a score that is the mean of ``n`` examples each scored 0 or 1 (exact match, choice): the
    binomial $\sqrt{p(1-p)/n}$ with $p$ = ``score``. It is the noise of evaluating on ``n`` examples (another draw of
    evaluation examples would move the score by about this much), not the noise of training (another seed).

    Returns:
        `float`: the standard error; NaN for a missing score or ``n < 1``.
    """
    if score is None or not math.isfinite(score) or n < 1:
        return math.nan
    return math.sqrt(max(0.0, score * (1.0 - score)) / n)


def final_average_standard_error(matrix: Matrix, eval_sizes: Sequence[int]) -> float:
    r"""Standard error of :func:`final_average` from the evaluation sets' sizes, the tasks' evaluations independent:
    $\frac{1}{T'}\sqrt{\sum_i \mathrm{SE}_i^2}$ over the $T'$ scores of the last row that are not missing, with
    $\mathrm{SE}_i$ = :func:`score_standard_error` of task i on its ``eval_sizes[i]`` examples.

    >>> round(final_average_standard_error([[0.5], [0.5, 0.5]], [100, 100]), 4)  # sqrt(2 * 0.0025) / 2
    0.0354
    """
    last = lower_triangle(matrix)[-1]
    errors = [score_standard_error(p, n) for p, n in zip(last, eval_sizes) if not math.isnan(p)]
    if not errors or len(eval_sizes) < len(last):
        return math.nan
    return math.sqrt(sum(e * e for e in errors)) / len(errors)
