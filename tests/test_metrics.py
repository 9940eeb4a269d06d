"""Answer metrics and accuracy-matrix metrics on hand-computed cases."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mssr_hf import metrics

# ---------------------------------------------------------------------------------------------- exact match


@pytest.mark.parametrize(
    "prediction, reference",
    [("\\boxed{\\frac{1}{2}}", "0.5"), ("1,000", "1000"), ("3.0", "3"), ("$5$", "5"), ("0.5", "1/2"),
     ("The final answer is \\boxed{42}.", "42"), ("\\boxed{\\dfrac{3}{4}}", "\\frac{3}{4}"), ("+5", "5"),
     ("-0", "0"), (" Paris. ", "paris"), ("\\text{yes}", "Yes"), ("2/6", "1/3"), (".5", "0.50")],
)  # fmt: skip
def test_exact_match_normalises(prediction, reference):
    assert metrics.exact_match(prediction, reference) == 1.0


@pytest.mark.parametrize(
    "prediction, reference",
    [("12", "1.2"), ("x+1", "x-1"), ("1/3", "0.33"), ("-5", "5"), ("10", "100"), ("\\boxed{2}", "\\boxed{3}")],
)
def test_exact_match_keeps_different_answers_apart(prediction, reference):
    assert metrics.exact_match(prediction, reference) == 0.0


def test_last_boxed_handles_nesting_and_takes_the_last():
    assert metrics.last_boxed("a \\boxed{1} then \\boxed{\\frac{1}{2}} end") == "\\frac{1}{2}"
    assert metrics.last_boxed("no box") is None


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=30))
def test_normalisation_is_idempotent(text):
    once = metrics.normalize_answer(text)
    assert metrics.normalize_answer(once) == once


# ---------------------------------------------------------------------------------------------- SQuAD


def test_squad_f1_hand_computed():
    # "the cat sat" -> [cat, sat]; "a cat sat down" -> [cat, sat, down]; common 2: P = 2/2, R = 2/3, F1 = 0.8
    assert metrics.squad_f1("the cat sat", "a cat sat down") == pytest.approx(0.8)
    # punctuation and case ignored; max over references
    assert metrics.squad_f1("Denver Broncos!", ["Carolina Panthers", "denver broncos"]) == 1.0
    # "in 1990 the war" vs "1990": [in, 1990, war] vs [1990]: P = 1/3, R = 1, F1 = 2 * (1/3) / (4/3) = 0.5
    assert metrics.squad_f1("in 1990 the war", "1990") == pytest.approx(0.5)
    assert metrics.squad_f1("", "") == 1.0 and metrics.squad_f1("x", "") == 0.0 and metrics.squad_f1("x", "y") == 0.0
    # repeated tokens count by multiplicity: [a..] is removed as an article, so use "b b c" vs "b c c":
    # common = min(2,1) + min(1,2) = 2: P = 2/3, R = 2/3, F1 = 2/3
    assert metrics.squad_f1("b b c", "b c c") == pytest.approx(2 / 3)
    assert metrics.squad_exact_match("The Eiffel Tower", ["eiffel tower"]) == 1.0
    with pytest.raises(ValueError, match="references"):
        metrics.squad_f1("x", [])


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=20), st.text(max_size=20))
def test_squad_f1_bounds(a, b):
    assert 0.0 <= metrics.squad_f1(a, b) <= 1.0
    if metrics._squad_normalize(a):
        assert metrics.squad_f1(a, a) == 1.0


# ---------------------------------------------------------------------------------------------- BLEU / ROUGE-L


def test_bleu_matches_sacrebleu():
    import sacrebleu

    assert metrics.bleu(["the cat sat on the mat"], ["the cat sat on the mat"]) == pytest.approx(100.0)
    preds, refs = ["the cat is on the mat", "a dog barks"], ["there is a cat on the mat", "the dog barks loudly"]
    assert metrics.bleu(preds, refs) == pytest.approx(sacrebleu.corpus_bleu(preds, [refs]).score)
    with pytest.raises(ValueError, match="predictions and references"):
        metrics.bleu(["a"], [])


def test_rouge_l_beta_one_is_rouge_score_f1_and_beta_1_2_by_hand():
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"])
    for pred, ref in [("a b c d", "a c d e"), ("the cat sat on the mat", "the cat lay on a mat"), ("x", "y z")]:
        assert metrics.rouge_l([pred], [ref], beta=1.0) == pytest.approx(scorer.score(ref, pred)["rougeL"].fmeasure)
    # "a b c d" vs "a c d e e": LCS = 3 (a c d); P = 3/4, R = 3/5;
    # F = (1 + 1.44) * 0.75 * 0.6 / (0.6 + 1.44 * 0.75) = 1.098 / 1.68 = 0.6535714
    assert metrics.rouge_l(["a b c d"], ["a c d e e"]) == pytest.approx(1.098 / 1.68)


# ---------------------------------------------------------------------------------------------- multiple choice


def test_choice_accuracy_extracts_letters_and_option_text():
    choices = [["x", "y", "z"], ["a", "b", "c"], ["a", "b", "c"], ["red", "blue", "green"], ["p", "q"]]
    predictions = ["B", "(C) because", "Answer: A", "red, clearly", "no idea"]
    references = ["B", "C", "B", "A", "A"]
    # right, right, wrong (A vs B), right (the text "red" is option A), nothing extracted -> 3/5
    assert metrics.choice_accuracy(predictions, references, choices) == pytest.approx(0.6)
    assert metrics.extract_choice("b. the second") == "B"


def test_loglikelihood_choice():
    assert metrics.loglikelihood_choice([[-1.0, -0.5], [-3.0, -4.0], [-2.0, -1.0]], [1, 0, 0]) == pytest.approx(2 / 3)


# ---------------------------------------------------------------------------------------------- matrix metrics

M3 = [[0.8], [0.6, 0.9], [0.5, 0.7, 0.95]]
M3_FULL = [[0.8, math.nan, None], [0.6, 0.9, math.nan], [0.5, 0.7, 0.95]]


@pytest.mark.parametrize("matrix", [M3, M3_FULL])
def test_matrix_metrics_hand_computed(matrix):
    # forgetting: task 0: max(0.8-0.6, 0.8-0.5) = 0.3; task 1: 0.9-0.7 = 0.2; mean = 0.25
    assert metrics.average_forgetting(matrix) == pytest.approx(0.25)
    # BWT: ((0.5-0.8) + (0.7-0.9)) / 2 = -0.25
    assert metrics.backward_transfer(matrix) == pytest.approx(-0.25)
    # final average: (0.5 + 0.7 + 0.95) / 3 = 0.716667
    assert metrics.final_average(matrix) == pytest.approx(2.15 / 3)
    # normalised: (0.5/0.8 + 0.7/0.9 + 0.95/0.95) / 3 = (0.625 + 0.777778 + 1) / 3 = 0.800926
    assert metrics.normalized_score(matrix) == pytest.approx((0.625 + 0.7 / 0.9 + 1.0) / 3)
    assert metrics.summarize(matrix)["average_forgetting"] == pytest.approx(0.25)


def test_forgetting_uses_the_score_right_after_learning_not_the_best():
    # task 0: 0.5 after stage 0, rises to 0.9, ends at 0.4: drop from R[0][0] is max(0.5-0.9, 0.5-0.4) = 0.1
    # task 1: 0.8 -> 0.8: 0.0; mean over tasks 0, 1 = 0.05. (From the best score it would be (0.5 + 0) / 2.)
    m = [[0.5], [0.9, 0.8], [0.6, 0.8, 0.3], [0.4, 0.8, 0.3, 0.9]]
    # task 2: 0.3 -> 0.3: 0.0  => (0.1 + 0.0 + 0.0) / 3
    assert metrics.average_forgetting(m) == pytest.approx(0.1 / 3)
    # normalised uses the best: task 0: 0.4/0.9, task 1: 0.8/0.8, task 2: 0.3/0.3, task 3: 1
    assert metrics.normalized_score(m) == pytest.approx((0.4 / 0.9 + 1 + 1 + 1) / 4)


def test_single_stage_and_bad_matrices():
    assert metrics.average_forgetting([[0.7]]) == 0.0 and metrics.backward_transfer([[0.7]]) == 0.0
    assert metrics.final_average([[0.7]]) == pytest.approx(0.7)
    with pytest.raises(ValueError, match="matrix row 1"):
        metrics.average_forgetting([[0.5], [0.4]])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6).flatmap(lambda t: st.lists(st.lists(st.floats(0, 1), min_size=t, max_size=t),
                                                     min_size=t, max_size=t)))  # fmt: skip
def test_matrix_metric_properties(matrix):
    f, bwt = metrics.average_forgetting(matrix), metrics.backward_transfer(matrix)
    assert -1.0 <= bwt <= 1.0 and -1.0 <= f <= 1.0
    assert f >= -bwt - 1e-12  # the largest drop is at least the final drop
    assert 0.0 <= metrics.final_average(matrix) <= 1.0
