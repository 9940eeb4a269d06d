"""The run folder's names and paths (``mssr_hf/layout.py``); ContinualRunner's round trip through them is tested in
``test_continual.py``."""

from pathlib import Path

from mssr_hf import layout
from mssr_hf.hub import stage_revision


def test_stage_folder_and_hub_branch_share_one_name():
    assert layout.stage_name(1, "gsm8k") == "stage-01-gsm8k" == stage_revision(1, "gsm8k")
    assert layout.stage_name(12, "math_l5") == "stage-12-math_l5"
    assert layout.stage_dir("runs/a", 0, "add") == Path("runs/a/stage-00-add")
    assert layout.stage_index(layout.stage_dir("runs/a", 7, "arc-challenge")) == 7  # a task name may hold "-"


def test_finished_stages_are_the_folders_with_their_metrics_written(tmp_path):
    for stage, task in enumerate(["add", "sub", "mul"]):
        layout.stage_dir(tmp_path, stage, task).mkdir()
    for stage, task in enumerate(["add", "sub"]):
        (layout.stage_dir(tmp_path, stage, task) / layout.STAGE_METRICS).write_text("{}")
    (tmp_path / layout.PLOTS).mkdir()
    assert layout.finished_stages(tmp_path) == [tmp_path / "stage-00-add", tmp_path / "stage-01-sub"]
    assert layout.is_finished(tmp_path / "stage-01-sub") and not layout.is_finished(tmp_path / "stage-02-mul")
    assert layout.finished_stages(tmp_path / "missing") == []
