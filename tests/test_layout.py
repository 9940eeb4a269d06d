"""The run folder's names and paths (``mssr_hf/layout.py``); ContinualRunner's round trip through them is tested in
``test_continual.py``."""

import json
from pathlib import Path

from mssr_hf import layout
from mssr_hf.hub import stage_revision
from mssr_hf.state_io import file_sizes


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


def test_a_stage_is_finished_only_with_every_file_it_recorded(tmp_path):
    stage = layout.stage_dir(tmp_path, 0, "add")
    (stage / "checkpoints" / "checkpoint-2").mkdir(parents=True)
    (stage / "checkpoints" / "checkpoint-2" / "model.safetensors").write_bytes(b"weights")
    (stage / "memory.safetensors").write_bytes(b"0123456789")
    (stage / ".memory.json.tmp").write_text("left by an interrupted write")
    files = file_sizes(stage, skip=(layout.CHECKPOINTS, layout.STAGE_METRICS))
    assert files == {"memory.safetensors": 10}  # checkpoints and temporary (hidden) files are not the stage's
    assert layout.stage_problem(stage) == f"{stage / layout.STAGE_METRICS} is missing: the stage has not finished"
    (stage / layout.STAGE_METRICS).write_text(json.dumps({"stage": 0, "files": files}))
    assert layout.stage_problem(stage) is None and layout.is_finished(stage)
    (stage / "memory.safetensors").write_bytes(b"01234")
    assert layout.stage_problem(stage) == f"{stage / 'memory.safetensors'} holds 5 bytes, 10 were written"
    (stage / "memory.safetensors").unlink()
    assert layout.stage_problem(stage) == f"{stage / 'memory.safetensors'} is missing"
    (stage / layout.STAGE_METRICS).write_text('{"stage": 0, "fi')
    assert layout.stage_problem(stage).startswith(f"{stage / layout.STAGE_METRICS} cannot be read: JSONDecodeError")
    assert layout.finished_stages(tmp_path) == []
