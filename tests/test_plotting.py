"""Run plots and the strategy comparison: files are written, are PNGs, are not blank; partial results still plot."""

import json
import math

import numpy as np
import pytest
from matplotlib.image import imread

from mssr_hf.cl_metrics import CL_METRIC_NAMES
from mssr_hf.plotting import TITLE_METRICS, plot_comparison, render_plots

NAN = math.nan
PLOTS = ["accuracy_matrix.png", "task_scores.png", "replay_timeline.png"]


def log_history(offset: int, steps: int, replay: bool) -> list[dict]:
    """Trainer-style logs: one entry per step (stage-local "step"), replay on every 4th step, and the final summary."""
    history = []
    for step in range(1, steps + 1):
        entry = {"loss": 2.0 / step, "learning_rate": 1e-3, "step": step}
        if replay:
            entry["replay/ratio"] = 0.3 * math.exp(-0.01 * (offset + step)) if step % 4 == 0 else 0.0
            entry["memory/strength_mean"] = 0.9 - 0.01 * step
            entry["memory/strength_q05"] = 0.6 - 0.01 * step
            entry["memory/strength_q95"] = 0.98
        history.append(entry)
    return history + [{"train_runtime": 1.5, "train_loss": 0.7, "step": steps}]


def three_stage_results() -> dict:
    tasks = ["alpaca", "gsm8k", "math"]
    return {
        "tasks": tasks, "probe_task": "mmlu", "strategy": "mssr_full", "model": "tiny",
        "matrix": [[0.61, NAN, NAN], [0.52, 0.44, NAN], [0.49, 0.40, 0.23]], "probe": [0.30, 0.29, None],
        "metrics": {"final_average": 0.373, "average_forgetting": 0.08, "backward_transfer": -0.08,
                    "normalized_score": 0.9},
        "stages": [{"stage": k, "task": t, "strategy": "none" if k == 0 else "mssr_full", "step_offset": 20 * k,
                    "steps": 20, "log_history": log_history(20 * k, 20, replay=k > 0)} for k, t in enumerate(tasks)],
    }  # fmt: skip


def assert_png_not_blank(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    image = imread(path)
    assert image.ndim == 3 and image.shape[0] > 50 and image.shape[1] > 50
    assert float(np.var(image[..., :3])) > 0, f"{path} is blank"


def test_render_plots_three_stages(tmp_path):
    paths = render_plots(tmp_path, three_stage_results())
    assert paths == [tmp_path / "plots" / name for name in PLOTS]
    for path in paths:
        assert_png_not_blank(path)


def test_render_plots_from_results_json(tmp_path):
    # What `mssr-hf report` reads back: NaN survives as NaN, unseen cells may also be null.
    results = json.loads(json.dumps(three_stage_results()))
    results["matrix"][0][2] = None
    for path in render_plots(tmp_path, results):
        assert_png_not_blank(path)


def one_stage() -> dict:
    results = three_stage_results()
    return {**results, "matrix": [[0.5, NAN, NAN]], "probe": [None], "stages": results["stages"][:1]}


def empty_history() -> dict:
    results = three_stage_results()
    return {**results, "stages": [{**s, "log_history": []} for s in results["stages"]]}


def no_step_offset() -> dict:
    """Stages without step_offset (placed one after the other by their "steps"), entries without step, NaN/None."""
    second = [
        {"step": 2, "replay/ratio": NAN, "memory/strength_mean": None},
        {"step": 4, "replay/ratio": 0.25, "memory/strength_mean": 0.7},
    ]
    return {
        "tasks": ["a", "b"],
        "matrix": [[0.4, None], [0.3, 0.5]],
        "stages": [
            {"task": "a", "steps": 4, "log_history": [{"step": 1}, {"replay/ratio": 0.2}]},
            {"task": "b", "log_history": second},
        ],
    }


@pytest.mark.parametrize(
    "results",
    [
        pytest.param(one_stage(), id="one-stage"),
        pytest.param(empty_history(), id="empty-history"),
        pytest.param({"matrix": [[NAN], [None, 0.2]]}, id="missing-keys-and-nan"),
        pytest.param({"tasks": ["a"], "matrix": [], "stages": []}, id="no-finished-stage"),
        pytest.param(no_step_offset(), id="no-step-offset"),
    ],
)
def test_render_plots_partial_results(tmp_path, results):
    paths = render_plots(tmp_path, results)
    assert [p.name for p in paths] == PLOTS
    for path in paths:
        assert_png_not_blank(path)


def test_plot_comparison(tmp_path):
    mssr = three_stage_results()
    none = three_stage_results()
    none.update(strategy="none", matrix=[[0.6, NAN, NAN], [0.3, 0.45, NAN], [0.2, 0.25, NAN]])  # math: NaN
    path = plot_comparison({"none": none, "mssr_full": mssr}, tmp_path / "demo" / "comparison.png")
    assert path == tmp_path / "demo" / "comparison.png"
    assert_png_not_blank(path)
    assert_png_not_blank(plot_comparison({"solo": {"tasks": ["a"], "matrix": []}}, tmp_path / "one.png"))


def test_comparison_draws_the_forgetting_curves_and_final_scores():
    """Left panel: one line per (earlier task, strategy) through that task's column from the stage it was learned;
    right panel: the last row as bars, the mean of the seen scores last."""
    from mssr_hf.plotting import _comparison

    mssr = three_stage_results()
    none = three_stage_results()
    none.update(strategy="none", matrix=[[0.6, NAN, NAN], [0.3, 0.45, NAN], [0.2, 0.25, 0.5]])
    curves, bars = _comparison({"none": none, "mssr_full": mssr}).axes
    lines = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in curves.get_lines()}
    # The last task (math) has no later stage to forget it in: no curve.
    assert lines == {
        "alpaca (none)": ([0, 1, 2], [0.6, 0.3, 0.2]), "gsm8k (none)": ([1, 2], [0.45, 0.25]),
        "alpaca (mssr_full)": ([0, 1, 2], [0.61, 0.52, 0.49]), "gsm8k (mssr_full)": ([1, 2], [0.44, 0.40]),
    }  # fmt: skip
    heights = [round(patch.get_height(), 4) for patch in bars.patches]
    assert heights == [0.2, 0.25, 0.5, round((0.2 + 0.25 + 0.5) / 3, 4), 0.49, 0.40, 0.23, round(1.12 / 3, 4)]


def test_titles_show_summary_metrics_by_their_names_in_results():
    assert set(TITLE_METRICS) <= set(CL_METRIC_NAMES)
