"""Tests for ``mssr_hf/cl_metrics.py``: the accuracy-matrix metrics (``eq:forgetting``, BWT, final average, average
normalised score; DESIGN.md section 7).

Expected numbers are computed by hand; the arithmetic is written next to each one.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mssr_hf.cl_metrics import (
    average_forgetting,
    backward_transfer,
    final_average,
    final_average_standard_error,
    lower_triangle,
    normalized_score,
    score_standard_error,
    summarize,
)

NAN = float("nan")
PROP = settings(max_examples=60, deadline=None)

M3 = [[0.8], [0.6, 0.9], [0.5, 0.7, 0.95]]
M4 = [[0.90], [0.70, 0.80], [0.75, 0.60, 0.85], [0.50, 0.65, 0.80, 0.70]]


def full(lower, fill=NAN):
    """The lower-triangular ``lower`` as a square matrix with ``fill`` above the diagonal."""
    return [row + [fill] * (len(lower) - len(row)) for row in lower]


def variants(lower):
    """The same matrix written five ways: lower-triangular, NaN-full, None-full, numpy, junk above the diagonal."""
    return [lower, full(lower), full(lower, None), np.array(full(lower)), full(lower, 123.0)]


@pytest.mark.parametrize("matrix", variants(M3))
def test_matrix_metrics_3x3(matrix):
    # forgetting: task 0: max(0.8 - 0.6, 0.8 - 0.5) = 0.3; task 1: 0.9 - 0.7 = 0.2; mean = 0.25
    assert average_forgetting(matrix) == pytest.approx(0.25)
    # BWT: ((0.5 - 0.8) + (0.7 - 0.9)) / 2 = -0.25 (each task is at its lowest at the end: F = -BWT)
    assert backward_transfer(matrix) == pytest.approx(-0.25)
    # final average: (0.5 + 0.7 + 0.95) / 3 = 2.15 / 3 = 0.716667
    assert final_average(matrix) == pytest.approx(2.15 / 3)
    # normalised: (0.5/0.8 + 0.7/0.9 + 0.95/0.95) / 3 = (0.625 + 0.777778 + 1) / 3 = 0.800926
    assert normalized_score(matrix) == pytest.approx((0.625 + 0.7 / 0.9 + 1.0) / 3)


@pytest.mark.parametrize("matrix", variants(M4))
def test_matrix_metrics_4x4(matrix):
    # forgetting: task 0: R00 = 0.90, drops 0.90 - (0.70, 0.75, 0.50) = (0.20, 0.15, 0.40) -> 0.40
    #             task 1: R11 = 0.80, drops 0.80 - (0.60, 0.65) = (0.20, 0.15) -> 0.20 (at stage 2, not the end)
    #             task 2: R22 = 0.85, drop 0.85 - 0.80 = 0.05
    #             F = (0.40 + 0.20 + 0.05) / 3 = 0.65 / 3 = 0.216667
    assert average_forgetting(matrix) == pytest.approx(0.65 / 3)
    # BWT: ((0.50 - 0.90) + (0.65 - 0.80) + (0.80 - 0.85)) / 3 = (-0.40 - 0.15 - 0.05) / 3 = -0.20; F > -BWT here
    assert backward_transfer(matrix) == pytest.approx(-0.20)
    # final average: (0.50 + 0.65 + 0.80 + 0.70) / 4 = 2.65 / 4 = 0.6625
    assert final_average(matrix) == pytest.approx(0.6625)
    # normalised: task 0: 0.50 / max(0.90, 0.70, 0.75, 0.50) = 0.50 / 0.90 = 0.555556
    #             task 1: 0.65 / max(0.80, 0.60, 0.65) = 0.8125; task 2: 0.80 / max(0.85, 0.80) = 0.941176;
    #             task 3: 0.70 / 0.70 = 1
    #             mean = (0.555556 + 0.8125 + 0.941176 + 1) / 4 = 0.827308
    assert normalized_score(matrix) == pytest.approx((0.5 / 0.9 + 0.8125 + 0.8 / 0.85 + 1.0) / 4)
    assert summarize(matrix) == pytest.approx(
        {"final_average": 0.6625, "average_forgetting": 0.65 / 3, "backward_transfer": -0.20,
         "normalized_score": (0.5 / 0.9 + 0.8125 + 0.8 / 0.85 + 1.0) / 4}
    )  # fmt: skip


def test_forgetting_is_measured_from_the_score_right_after_learning():
    # task 0: 0.5 after stage 0, rises to 0.9, ends at 0.4: drops 0.5 - (0.9, 0.6, 0.4) = (-0.4, -0.1, 0.1) -> 0.1
    # (from its best score it would be 0.9 - 0.4 = 0.5); tasks 1 and 2 keep their scores: 0.0, 0.0
    # F = (0.1 + 0 + 0) / 3
    m = [[0.5], [0.9, 0.8], [0.6, 0.8, 0.3], [0.4, 0.8, 0.3, 0.9]]
    assert average_forgetting(m) == pytest.approx(0.1 / 3)
    # the normalised score does use the best: (0.4/0.9 + 0.8/0.8 + 0.3/0.3 + 0.9/0.9) / 4
    assert normalized_score(m) == pytest.approx((0.4 / 0.9 + 3.0) / 4)
    # a task that only improves has negative forgetting: 0.5 - max... drops (0.5 - 0.7) = -0.2
    assert average_forgetting([[0.5], [0.7, 0.9]]) == pytest.approx(-0.2)


def test_single_stage_and_zero_scores():
    assert average_forgetting([[0.7]]) == 0.0 and backward_transfer([[0.7]]) == 0.0
    assert final_average([[0.7]]) == pytest.approx(0.7) and normalized_score([[0.7]]) == pytest.approx(1.0)
    # a task never above 0: 0 / max(0, eps) = 0; the other: 0.5 / 0.5 = 1; mean = 0.5
    assert normalized_score([[0.0], [0.0, 0.5]]) == pytest.approx(0.5)


def test_missing_scores_on_or_below_the_diagonal_are_skipped():
    # R[2][0] missing: task 0 drops only 0.8 - 0.6 = 0.2; task 1: 0.9 - 0.7 = 0.2; F = 0.2
    m = [[0.8], [0.6, 0.9], [None, 0.7, 0.95]]
    assert average_forgetting(m) == pytest.approx(0.2)
    # BWT over task 1 only: 0.7 - 0.9 = -0.2; final average over (0.7, 0.95): 0.825
    assert backward_transfer(m) == pytest.approx(-0.2)
    assert final_average(m) == pytest.approx(0.825)
    # normalised over tasks 1, 2: (0.7/0.9 + 1) / 2
    assert normalized_score(m) == pytest.approx((0.7 / 0.9 + 1) / 2)
    assert math.isnan(average_forgetting([[NAN], [0.5, 0.6]]))  # no task with a drop


@pytest.mark.parametrize(
    "matrix, message",
    [
        ([], "matrix is empty"),
        ([[0.5], [0.4]], "matrix row 1 has 1 entries"),  # lower-triangular rows need t+1 entries
        ([[0.5, NAN], [0.4, 0.3, 0.2]], "matrix row 1 has 3 entries"),
        ([[0.5, NAN, NAN], [0.4, 0.3, NAN]], "matrix row 0 has 3 entries"),  # 2 rows, 3 columns: not square
        (np.zeros((2, 3)), "matrix row 0 has 3 entries"),
        ([0.5, 0.6], "matrix must be a sequence of rows"),
        ([["high"]], "matrix row 0 holds a value"),
    ],
)
def test_bad_matrices_raise(matrix, message):
    for function in (average_forgetting, backward_transfer, final_average, normalized_score, summarize):
        with pytest.raises(ValueError, match=message):
            function(matrix)


def square_matrices(min_size=1):
    return st.integers(min_size, 6).flatmap(
        lambda t: st.lists(st.lists(st.floats(0, 1), min_size=t, max_size=t), min_size=t, max_size=t)
    )


@PROP
@given(square_matrices())
def test_matrix_metric_properties(matrix):
    f, bwt = average_forgetting(matrix), backward_transfer(matrix)
    lower = lower_triangle(matrix)
    values = [v for row in lower for v in row]
    spread = max(values) - min(values)
    assert abs(f) <= spread + 1e-12 and abs(bwt) <= spread + 1e-12
    assert f >= -bwt - 1e-12  # the largest drop is at least the final drop
    assert min(values) - 1e-12 <= final_average(matrix) <= max(values) + 1e-12
    assert 0.0 <= normalized_score(matrix) <= 1.0 + 1e-12
    # only the lower triangle counts: lower-triangular rows give the same numbers
    assert summarize(lower) == summarize(matrix)


@PROP
@given(square_matrices(min_size=2))
def test_forgetting_is_minus_bwt_when_every_task_ends_at_its_lowest(matrix):
    T = len(matrix)
    for i in range(T - 1):
        matrix[-1][i] = min(matrix[t][i] for t in range(i, T))
    assert average_forgetting(matrix) == pytest.approx(-backward_transfer(matrix))


def test_standard_errors_of_a_score_and_of_the_final_average():
    assert score_standard_error(0.5, 100) == pytest.approx(0.05)  # sqrt(0.5 * 0.5 / 100)
    assert score_standard_error(0.9, 25) == pytest.approx(0.06)  # sqrt(0.9 * 0.1 / 25) = 0.3 / 5
    assert score_standard_error(0.0, 50) == 0.0 and score_standard_error(1.0, 50) == 0.0
    assert math.isnan(score_standard_error(NAN, 50)) and math.isnan(score_standard_error(0.5, 0))
    # Last row of M3 (0.5, 0.7, 0.95) on 100, 100, 400 examples: variances 0.0025, 0.0021, 0.00011875;
    # sqrt(0.00471875) / 3 = 0.022898
    assert final_average_standard_error(M3, [100, 100, 400]) == pytest.approx(0.022898, abs=1e-6)
    # A missing score is left out, as final_average leaves it out: sqrt(0.0025 + 0.0021) / 2
    assert final_average_standard_error([[0.8], [0.5, 0.7], [0.5, NAN, 0.7]], [100, 100, 100]) == pytest.approx(
        math.sqrt(0.0025 + 0.0021) / 2
    )
    assert math.isnan(final_average_standard_error(M3, [100, 100]))  # a size per task is needed
