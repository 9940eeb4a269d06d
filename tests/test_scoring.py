"""Tests for ``mssr_hf/scoring.py``: the answer scores (paper App. D, ``app:eval_metric``): exact match and its
normalisation, SQuAD F1 and exact match, BLEU, ROUGE-L, multiple-choice accuracy.

Expected numbers are computed by hand; the arithmetic is written next to each one. sacreBLEU and rouge_score are
used only as cross-checks.
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mssr_hf.scoring import (
    bleu,
    canonical_number,
    choice_accuracy,
    exact_match,
    extract_choice,
    last_boxed,
    loglikelihood_choice,
    longest_common_subsequence,
    normalize_answer,
    normalize_squad_answer,
    rouge_l,
    rouge_l_score,
    rouge_tokens,
    squad_exact_match,
    squad_f1,
)

NAN = float("nan")
PROP = settings(max_examples=60, deadline=None)

# ----------------------------------------------------------------------------------------------------------------
# Exact match: normalize_answer
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prediction, reference",
    [
        ("\\boxed{\\frac{1}{2}}", "0.5"),  # nested braces; \frac{1}{2} -> 1/2 -> 0.5
        ("The final answer is $\\boxed{42}$.", "42"),
        ("\\boxed{1} first, then \\boxed{\\dfrac{3}{4}}", "0.75"),  # the last \boxed wins
        ("1,000", "1000"),
        ("1,234,567.50", "1234567.5"),
        ("1{,}000", "1000"),  # LaTeX thousands separator
        ("3.0", "3"),
        ("$5$", "5"),
        ("\\$5.00", "5"),
        ("0.5", "1/2"),
        ("\\frac12", "0.5"),
        ("-\\frac{1}{2}", "-0.5"),
        ("2/6", "\\frac{1}{3}"),  # non-terminating: both 1/3 in lowest terms
        ("+5", "5"),
        ("-0", "0"),
        (".5", "0.50"),
        ("5.", "5"),
        (" Paris. ", "paris"),
        ("\\text{Yes}", "yes"),
        ("\\mathrm{\\text{km}}", "km"),
        ("\\left( 1, 2 \\right)", "(1,2)"),  # both (1, 2)
        ("(1,2)", "( 1 , 2 )"),
        ("x + 1", "x+1"),
        ("\\frac{x+1}{2}", "(x+1)/2"),
        ("30^\\circ", "30"),
        ("50\\%", "50"),
        ("\\(7\\)", "7"),
        ("**42**", "42"),
        ("\u22123", "-3"),  # Unicode minus
    ],
)
def test_exact_match_normalises(prediction, reference):
    assert exact_match(prediction, reference) == 1.0
    assert exact_match(reference, prediction) == 1.0


@pytest.mark.parametrize(
    "prediction, reference",
    [
        ("12", "1.2"),
        ("x+1", "x-1"),
        ("1/3", "0.33"),
        ("-5", "5"),
        ("10", "100"),
        ("1,0000", "10000"),  # not a thousands separator
        ("1, 2", "12"),
        ("3, 500", "3500"),  # a list, not a thousands separator
        ("3 ,500", "3500"),
        ("3 4", "34"),
        ("(0,1]", "[0,1)"),  # brackets are never stripped
        ("\\frac{x+1}{2}", "x+1/2"),  # the fraction keeps its parentheses
        ("\\boxed{2}", "\\boxed{3}"),
        ("new york", "newyork"),
        ("1/0", "0"),
    ],
)
def test_exact_match_keeps_different_answers_apart(prediction, reference):
    assert exact_match(prediction, reference) == 0.0


def test_normalize_answer_outputs():
    assert normalize_answer("\\frac{\\frac{1}{2}}{3}") == "(1/2)/3"  # nested fractions, inner first
    assert normalize_answer("\\frac{\\sqrt{3}}{2}") == "\\sqrt{3}/2"  # one term: no parentheses
    assert normalize_answer("\\leftarrow") == "\\leftarrow"  # \left is dropped only as a whole command
    assert normalize_answer("  New   York ") == "new york"
    assert normalize_answer("\\left[ 1,2 \\right)") == "[1, 2)"
    assert normalize_answer("Paris,France.") == "paris, france"
    assert normalize_answer("") == ""


def test_last_boxed():
    assert last_boxed("a \\boxed{1} then \\boxed{\\frac{1}{2}} end") == "\\frac{1}{2}"
    assert last_boxed("\\fbox{x}") == "x"
    assert last_boxed("\\boxed{\\{1,2\\}}") == "\\{1,2\\}"  # escaped braces do not count
    assert last_boxed("\\boxed{3} and a cut-off \\boxed{4") == "3"  # the last one whose braces close
    assert last_boxed("\\boxed{}") == ""
    assert last_boxed("no box") is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("3.0", "3"),
        ("-0.0", "0"),
        ("+5", "5"),
        ("007", "7"),
        ("0.50", "0.5"),
        ("-.25", "-0.25"),
        ("1/2", "0.5"),
        ("-3/4", "-0.75"),
        ("1/1024", "0.0009765625"),  # 1/2^10: exact, no exponent notation
        ("2/6", "1/3"),  # 6 = 2 * 3 does not terminate: lowest terms
        ("10/5", "2"),
        ("0.1234567890123456789", "0.1234567890123456789"),  # exact, no float rounding
        ("1/0", None),
        ("1e3", None),
        ("1,000", None),  # separators are removed by normalize_answer, not here
        ("x", None),
    ],
)
def test_canonical_number(text, expected):
    assert canonical_number(text) == expected


LATEX_PIECES = st.sampled_from(
    ["\\boxed{", "\\fbox{", "\\frac", "\\dfrac", "{", "}", "\\text{", "\\left", "\\right", "$", "\\$", "\\%", "%",
     "1", "0", "5", ",", ".", "-", "+", "/", " ", "x", "A", "\\", "(", ")", "^\\circ", "{,}", "\\!", "\\(", "le", "ft"]
)  # fmt: skip


@PROP
@given(st.one_of(st.text(max_size=30), st.lists(LATEX_PIECES, max_size=12).map("".join)))
def test_normalize_answer_is_idempotent(text):
    once = normalize_answer(text)
    assert normalize_answer(once) == once


@PROP
@given(st.lists(LATEX_PIECES, max_size=8).map("".join), st.lists(LATEX_PIECES, max_size=8).map("".join))
def test_exact_match_is_symmetric_and_reflexive(a, b):
    assert exact_match(a, b) == exact_match(b, a)
    assert exact_match(a, a) == 1.0
    assert exact_match(a, normalize_answer(a)) == 1.0


# ----------------------------------------------------------------------------------------------------------------
# SQuAD
# ----------------------------------------------------------------------------------------------------------------


def test_squad_f1_hand_computed():
    # "the cat sat" -> [cat, sat]; "a cat sat down" -> [cat, sat, down]; common 2: P = 2/2, R = 2/3,
    # F1 = 2 * 1 * (2/3) / (1 + 2/3) = (4/3) / (5/3) = 0.8
    assert squad_f1("the cat sat", "a cat sat down") == pytest.approx(0.8)
    # [in, 1990, war] vs [1990]: P = 1/3, R = 1, F1 = 2 * (1/3) / (4/3) = 0.5
    assert squad_f1("in 1990 the war", "1990") == pytest.approx(0.5)
    # multiplicity: [b, b, c] vs [b, c, c]: common = min(2,1) + min(1,2) = 2; P = R = 2/3, F1 = 2/3
    assert squad_f1("b b c", "b c c") == pytest.approx(2 / 3)
    # the maximum over references: 0 against the first, 1 against the second
    assert squad_f1("Denver Broncos!", ["Carolina Panthers", "denver broncos"]) == 1.0
    # max(F1 vs "cat" = 2 * (1/2) * 1 / (3/2) = 2/3, F1 vs "black cat" = 1) = 1
    assert squad_f1("black cat", ("cat", "the black cat")) == 1.0
    assert squad_f1("x", "y") == 0.0


@pytest.mark.parametrize(
    "prediction, reference, f1",
    [
        ("The Eiffel Tower", "Eiffel Tower", 1.0),  # articles dropped
        ("an apple", "Apple", 1.0),
        ("theater", "the ater", 0.0),  # "the" inside a word stays: [theater] vs [ater]
        ("U.S.", "US", 1.0),  # punctuation deleted, not replaced by a space
        ("well-known", "well known", 0.0),  # [wellknown] vs [well, known]
        ("1,000", "1000", 1.0),
        ("3.5", "35", 1.0),  # the official normalisation deletes the point too
        ("", "", 1.0),  # SQuAD v2: both empty -> 1
        ("the", "a", 1.0),  # both normalise to nothing
        ("x", "", 0.0),  # one empty -> 0
        ("", "x", 0.0),
    ],
)
def test_squad_f1_official_edge_cases(prediction, reference, f1):
    assert squad_f1(prediction, reference) == f1
    assert squad_exact_match(prediction, reference) == f1  # each case is all or nothing


def test_squad_normalisation_and_exact_match():
    assert normalize_squad_answer("  The  U.S.  Army's  ") == "us armys"
    assert squad_exact_match("The Eiffel Tower", ["Louvre", "eiffel tower"]) == 1.0
    assert squad_exact_match("the cat sat", "a cat sat down") == 0.0
    for function in (squad_f1, squad_exact_match):
        with pytest.raises(ValueError, match="references"):
            function("x", [])


@PROP
@given(st.text(max_size=25), st.lists(st.text(max_size=25), min_size=1, max_size=3))
def test_squad_f1_bounds(prediction, references):
    assert 0.0 <= squad_f1(prediction, references) <= 1.0
    assert squad_exact_match(prediction, references) <= squad_f1(prediction, references)
    if normalize_squad_answer(prediction):
        assert squad_f1(prediction, prediction) == 1.0


# ----------------------------------------------------------------------------------------------------------------
# BLEU
# ----------------------------------------------------------------------------------------------------------------


def test_bleu_hand_computed():
    assert bleu(["the cat sat on the mat"], ["the cat sat on the mat"]) == pytest.approx(100.0)
    # [the cat sat on the mat] vs [the cat sat on a mat], same length so BP = 1. Clipped matches:
    # 1-grams 5/6 ("the" twice, once in the reference); 2-grams 3/5 (the cat, cat sat, sat on);
    # 3-grams 2/4 (the cat sat, cat sat on); 4-grams 1/3 (the cat sat on).
    # BLEU = (5/6 * 3/5 * 2/4 * 1/3)^(1/4) = (1/12)^(1/4) = 0.537285
    assert bleu(["the cat sat on the mat"], ["the cat sat on a mat"]) == pytest.approx(100 * (1 / 12) ** 0.25)
    # [a b c d e f] vs [a b c x e f]: 1-grams 5/6, 2-grams 3/5 (ab bc ef), 3-grams 1/4 (abc), 4-grams 0/3.
    # Exponential smoothing: the 1st order with no match counts 1 / (2^1 * 3) = 1/6.
    # BLEU = (5/6 * 3/5 * 1/4 * 1/6)^(1/4) = (1/48)^(1/4) = 0.379918
    assert bleu(["a b c d e f"], ["a b c x e f"]) == pytest.approx(100 * (1 / 48) ** 0.25)
    # brevity penalty: all precisions 1, c = 6, r = 7: BP = exp(1 - 7/6) = exp(-1/6) = 0.846482
    assert bleu(["the cat sat on the mat"], ["the cat sat on the mat today"]) == pytest.approx(100 * math.exp(-1 / 6))


def test_bleu_matches_sacrebleu():
    import sacrebleu

    preds = ["the cat is on the mat", "a dog barks at night", "It rains."]
    refs = ["there is a cat on the mat", "the dog barks loudly at night", "It is raining."]
    assert bleu(preds, refs) == pytest.approx(sacrebleu.corpus_bleu(preds, [refs]).score)
    # several references; the second prediction's single reference pads the second stream
    multi = [["there is a cat on the mat", "the cat is on a mat"], ["the dog barks loudly at night"], refs[2:]]
    streams = [[m[0] for m in multi], [multi[0][1], multi[1][0], multi[2][0]]]
    assert bleu(preds, multi) == pytest.approx(sacrebleu.corpus_bleu(preds, streams).score)
    assert bleu(preds, multi) > bleu(preds, refs)  # the extra reference "the cat is on a mat" matches more


def test_bleu_errors_and_empty():
    with pytest.raises(ValueError, match="predictions and references"):
        bleu(["a"], [])
    with pytest.raises(ValueError, match=r"references\[0\]"):
        bleu(["a"], [[]])
    assert math.isnan(bleu([], []))


# ----------------------------------------------------------------------------------------------------------------
# ROUGE-L
# ----------------------------------------------------------------------------------------------------------------


def test_rouge_l_hand_computed():
    assert longest_common_subsequence(list("abcd"), list("acde")) == 3  # a c d
    assert rouge_tokens("The cat's hat, 2 ways!") == ["the", "cat", "s", "hat", "2", "ways"]
    # [a b c d] vs [a c d e e]: LCS = 3 (a c d); P = 3/4, R = 3/5;
    # F = (1 + 1.44) * 0.75 * 0.6 / (0.6 + 1.44 * 0.75) = 1.098 / 1.68 = 0.653571
    assert rouge_l(["a b c d"], ["a c d e e"]) == pytest.approx(1.098 / 1.68)
    # beta = 1: 2 * 0.75 * 0.6 / (0.75 + 0.6) = 0.9 / 1.35 = 2/3
    assert rouge_l(["a b c d"], ["a c d e e"], beta=1.0) == pytest.approx(2 / 3)
    # mean over pairs: identical (1.0) and disjoint (0.0) -> 0.5
    assert rouge_l(["x y", "p"], ["x y", "q"]) == pytest.approx(0.5)
    # several references: the best one counts
    assert rouge_l(["a b c d"], [["z", "a b c d"]]) == pytest.approx(1.0)
    assert rouge_l_score("", "a") == 0.0 and rouge_l_score("!!", "!!") == 0.0  # no tokens
    assert math.isnan(rouge_l([], []))
    with pytest.raises(ValueError, match="predictions and references"):
        rouge_l(["a"], ["a", "b"])


def test_rouge_l_beta_one_is_rouge_score():
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"])
    pairs = [("a b c d", "a c d e"), ("the cat sat on the mat", "the cat lay on a mat"), ("x", "y z"),
             ("Hello, World! It's me.", "hello world it is me")]  # fmt: skip
    for pred, ref in pairs:
        assert rouge_l([pred], [ref], beta=1.0) == pytest.approx(scorer.score(ref, pred)["rougeL"].fmeasure)


WORDS = st.lists(st.sampled_from(["a", "b", "c", "The", "cat,", "sat!", "x1", "é"]), max_size=10).map(" ".join)


@PROP
@given(WORDS, WORDS)
def test_rouge_l_matches_rouge_score_and_is_bounded(prediction, reference):
    from rouge_score import rouge_scorer, tokenize

    assert rouge_tokens(prediction) == tokenize.tokenize(prediction, None)
    expected = rouge_scorer.RougeScorer(["rougeL"]).score(reference, prediction)["rougeL"].fmeasure
    assert rouge_l_score(prediction, reference, beta=1.0) == pytest.approx(expected)
    assert 0.0 <= rouge_l_score(prediction, reference) <= 1.0
    if rouge_tokens(prediction):
        assert rouge_l_score(prediction, prediction) == pytest.approx(1.0)


# ----------------------------------------------------------------------------------------------------------------
# Multiple choice
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, letter",
    [
        ("B", "B"),
        ("b", "B"),
        ("(B)", "B"),
        ("B.", "B"),
        (" B\nQuestion: next", "B"),  # generation that runs on
        ("B. Paris", "B"),
        ("(C) because it is", "C"),
        ("b. the second", "B"),
        ("Answer: D", "D"),
        ("The answer is (c).", "C"),
        ("First I thought A, but the answer is E", "E"),  # the last cue
        ("I pick (B)", "B"),
        ("the answer is a cat", ""),  # a lower-case letter needs parentheses after a cue
        ("a cat", ""),
        ("F", ""),  # only A-E without choices
        ("no idea", ""),
    ],
)
def test_extract_choice_letters(text, letter):
    assert extract_choice(text) == letter


def test_extract_choice_with_option_texts():
    options = ["a cat", "a dog", "red", "reddish brown"]
    assert extract_choice("A dog", options) == "B"  # an option's text beats the leading-letter reading
    assert extract_choice("A dog", None) == "A"
    assert extract_choice("red, clearly", options) == "C"
    assert extract_choice("Reddish brown.", options) == "D"  # the longest option that matches
    assert extract_choice("The answer is red", options) == "C"
    assert extract_choice("redder", options) == ""  # an option must end at a word boundary
    assert extract_choice("(E)", options) == ""  # four options: A-D only
    assert extract_choice("E", [str(k) for k in range(6)]) == "E"
    with pytest.raises(ValueError, match="choices"):
        extract_choice("A", [str(k) for k in range(27)])


def test_choice_accuracy_hand_computed():
    choices = [["x", "y", "z"], ["a", "b", "c"], ["a", "b", "c"], ["red", "blue", "green"], ["p", "q"]]
    predictions = ["B", "(C) because", "Answer: A", "red, clearly", "no idea"]
    references = ["B", "C", "B", "A", "A"]
    # right, right, wrong (A vs B), right (the text "red" is option A), nothing extracted (wrong) -> 3/5
    assert choice_accuracy(predictions, references, choices) == pytest.approx(0.6)
    # references given as option text or "(B)"; "green" is C, so "C." is right and "B" is wrong -> 1/2
    assert choice_accuracy(["C.", "B"], ["green", "(A)"], [["red", "blue", "green"]] * 2) == pytest.approx(0.5)
    assert choice_accuracy(["A", "B", "b. x", "(D)"], ["A", "A", "B", "D"]) == pytest.approx(3 / 4)  # no choices
    assert math.isnan(choice_accuracy([], []))


def test_choice_accuracy_errors():
    with pytest.raises(ValueError, match="predictions and references"):
        choice_accuracy(["A"], ["A", "B"])
    with pytest.raises(ValueError, match="predictions and choices"):
        choice_accuracy(["A"], ["A"], [["x"], ["y"]])
    with pytest.raises(ValueError, match=r"references\[0\]"):
        choice_accuracy(["A"], ["Paris"])  # a text reference needs choices


def test_loglikelihood_choice():
    # argmax per row: 1 (right), 0 (right), 1 (wrong, answer 0) -> 2/3
    assert loglikelihood_choice([[-1.0, -0.5], [-3.0, -4.0], [-2.0, -1.0]], [1, 0, 0]) == pytest.approx(2 / 3)
    # a tie goes to the first option; NaN counts as -inf; all -inf/NaN is wrong
    assert loglikelihood_choice([[-1.0, -1.0], [NAN, -2.0], [NAN, -math.inf]], [0, 1, 0]) == pytest.approx(2 / 3)
    assert math.isnan(loglikelihood_choice([], []))
    with pytest.raises(ValueError, match="option_logprobs and answers"):
        loglikelihood_choice([[0.0]], [0, 0])
    with pytest.raises(ValueError, match=r"answers\[0\]"):
        loglikelihood_choice([[0.0, -1.0]], [2])
    with pytest.raises(ValueError, match=r"option_logprobs\[0\]"):
        loglikelihood_choice([[]], [0])
