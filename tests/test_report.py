"""The plain-text comparison of runs (``mssr_hf/report.py``) that the demo and the notebook print: narrow matrices side
by side with the evaluation's standard error, and sentences written from the numbers."""

from mssr_hf.cl_metrics import summarize
from mssr_hf.report import compare_runs, describe_comparison, matrix_block, write_report

TASKS = ["copy", "add", "count"]


def run(matrix, eval_sizes=(100, 100, 100)):
    return {"tasks": TASKS, "matrix": matrix, "metrics": summarize(matrix), "eval_sizes": list(eval_sizes)}


NONE = run([[0.96], [0.64, 0.52], [0.00, 0.32, 0.48]])
ER = run([[0.96], [0.96, 0.56], [0.90, 0.50, 0.48]])
REC = run([[0.96], [0.94, 0.54], [0.92, 0.52, 0.46]])


def test_matrix_block_is_narrow_and_shows_the_final_averages_standard_error():
    block = matrix_block("none", NONE)
    # final average (0 + 0.32 + 0.48) / 3 = 0.2667; SE sqrt(0 + 0.2176 / 100 + 0.2496 / 100) / 3 = 0.0228
    assert block.splitlines() == [
        "none",
        "after     1     2     3",
        "    1  0.96     –     –",
        "    2  0.64  0.52     –",
        "    3  0.00  0.32  0.48",
        "final average 0.27 ± 0.02",
        "forgetting    0.58",  # (0.96 - 0.00 + 0.52 - 0.32) / 2
    ]
    assert "±" not in matrix_block("old", {**NONE, "eval_sizes": []})  # results.json without eval sizes
    assert matrix_block("unfinished", {**NONE, "matrix": [], "metrics": {}}).splitlines()[2:] == []


def test_the_sentence_names_the_most_forgotten_task_and_the_differences_beyond_noise():
    text = describe_comparison({"none": NONE, "er": ER, "recommended": REC})
    assert text.startswith("Without replay (none), copy fell from 0.96 to 0.00; with er it ended at 0.90, with "
                           "recommended at 0.92.")  # fmt: skip
    # er - none = 0.36, twice the SE of the difference about 0.06: above; recommended - er = 0.0067: level
    assert "Final averages: none 0.27, er 0.63, recommended 0.63" in text
    assert "er and recommended end above none and recommended is level with er" in text


def test_the_sentence_says_so_when_nothing_was_forgotten_beyond_noise():
    kept = run([[0.96], [0.95, 0.52], [0.93, 0.50, 0.48]])
    text = describe_comparison({"none": kept, "er": ER})
    # copy: 0.96 -> 0.93, twice the SE of the difference 2 * sqrt(0.0384 + 0.0651) / 10 = 0.064
    assert text.startswith("Without replay (none), no earlier task fell by more than twice its standard error")
    assert "er ends level with none" in text
    # With 4 examples per task the same drop of copy (0.96 -> 0.00) is still beyond noise; a small one is not.
    assert "copy fell from 0.96 to 0.00" in describe_comparison({"none": run(NONE["matrix"], (4, 4, 4)), "er": ER})
    assert describe_comparison({"none": run([[0.5]]), "er": run([[0.5]])}) == ""  # one task: nothing to forget
    # Without the evaluation sizes (an older results.json) there is no noise to judge by: the numbers only.
    text = describe_comparison({"none": run(NONE["matrix"], ()), "er": run(ER["matrix"], ())})
    assert "copy fell from 0.96 to 0.00" in text and text.endswith("Final averages: none 0.27, er 0.63.")


def test_compare_runs_and_the_report(tmp_path):
    runs = {"none": NONE, "er": ER, "recommended": REC}
    text = compare_runs(runs)
    assert "1 copy, 2 add, 3 count" in text and "scored on 100 held-out examples" in text
    assert max(len(line) for line in text.splitlines()) <= 100  # fits a terminal
    table = [line for line in text.splitlines() if line.startswith("final average")][0]
    assert table.count("±") == 3
    report = write_report(tmp_path, runs, []).read_text()
    assert "er and recommended end above none" in report.replace("\n", " ")
    assert "## none" in report and "## recommended" in report
