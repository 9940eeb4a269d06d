"""Where a continual run keeps its files: the names and paths of the run folder, of each stage's folder, and of each
stage's Hub revision. :class:`~mssr_hf.continual.ContinualRunner` writes this layout (``save`` after every stage,
``load_stage`` to read a stage back), :mod:`mssr_hf.hub` publishes it and ``mssr-hf eval`` / ``report`` read it.

```
OUTPUT_DIR/                     the run's ``output_dir``
  run_config.json               RUN_CONFIG: what the run computes and its hash (a changed config is refused)
  results.json                  RESULTS: accuracy matrix, probe scores, summary metrics, one record per stage,
                                evaluation examples per task
  published.json                PUBLISHED: the stages pushed to the Hub, and where (written after each push)
  plots/                        PLOTS: the run's figures (mssr_hf.plotting)
  report.md                     REPORT: written by ``mssr-hf report`` (and the demo, one level up)
  stage-00-<task>/              stage_name(0, task): also the stage's Hub branch
    adapter_model.safetensors   the adapter (or the full model), with its config and the tokenizer files
    README.md                   MODEL_CARD
    memory.{json,safetensors}   MEMORY_STATE: the replay memory carried to the next stage (mssr_hf.state_io)
    replay_strategy.{...}       STRATEGY_STATE: the replay strategy's state (stages that could replay)
    metrics.json                STAGE_METRICS: the stage's record; written last, it marks the stage as finished
                                and lists the size of every other file of the stage ("files")
    checkpoints/                CHECKPOINTS: the trainer's checkpoints while the stage trains (never published)
```

A stage is finished when its ``metrics.json`` is there and every file it lists has the size it was written with
(:func:`stage_problem`): a stage whose saving was interrupted, or one of whose files was truncated since, is not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .state_io import size_problem

RUN_CONFIG = "run_config.json"
RESULTS = "results.json"
PUBLISHED = "published.json"
PLOTS = "plots"
REPORT = "report.md"
MODEL_CARD = "README.md"
MEMORY_STATE = "memory"  # a state_io name: memory.json + memory.safetensors
STRATEGY_STATE = "replay_strategy"
STAGE_METRICS = "metrics.json"
CHECKPOINTS = "checkpoints"
_STAGE_PREFIX = "stage-"


def stage_name(stage: int, task: str) -> str:
    """The folder of a stage and its Hub branch, e.g. ``stage-01-gsm8k``."""
    return f"{_STAGE_PREFIX}{stage:02d}-{task}"


def stage_dir(output_dir: str | os.PathLike, stage: int, task: str) -> Path:
    """The folder of stage ``stage`` (task ``task``) in the run folder ``output_dir``."""
    return Path(output_dir) / stage_name(stage, task)


def stage_index(stage_dir: str | os.PathLike) -> int:
    """The stage number in a stage folder's name: ``stage-01-gsm8k`` -> 1."""
    return int(Path(stage_dir).name.split("-")[1])


def stage_problem(stage_dir: str | os.PathLike) -> str | None:
    """Why a stage folder does not hold a finished stage, or None when it does: its :data:`STAGE_METRICS` (written
    last) must be there and readable, and every file it lists must have the size it was written with (a record
    without ``"files"``, from before sizes were recorded, is taken as it is)."""
    path = Path(stage_dir) / STAGE_METRICS
    if not path.is_file():
        return f"{path} is missing: the stage has not finished"
    try:
        sizes = json.loads(path.read_text()).get("files", {})
    except (OSError, ValueError, AttributeError) as error:
        return f"{path} cannot be read: {type(error).__name__}: {error}"
    return size_problem(stage_dir, sizes)


def is_finished(stage_dir: str | os.PathLike) -> bool:
    """Whether a stage folder holds a finished stage, complete (:func:`stage_problem`)."""
    return stage_problem(stage_dir) is None


def stage_folders(output_dir: str | os.PathLike) -> list[Path]:
    """The stage folders in the run folder ``output_dir``, finished or not, in stage order."""
    return sorted(p for p in Path(output_dir).glob(f"{_STAGE_PREFIX}*") if p.is_dir())


def finished_stages(output_dir: str | os.PathLike) -> list[Path]:
    """The folders of the finished stages in the run folder ``output_dir``, in stage order."""
    return [p for p in stage_folders(output_dir) if is_finished(p)]
