"""A continual run's evaluation, sent to the trackers of ``report_to`` (TensorBoard, W&B, MLflow, ...).

After each stage, :class:`StageReporter` logs every seen task's score, the probe's, and the running continual-learning
metrics (final average, average forgetting, BWT, normalised score) at the stage's last global optimizer step, so that
the stages line up on one step axis. TensorBoard also receives the run's plots as images. The trackers are the
callbacks transformers' ``Trainer`` builds for ``report_to``, driven the way the trainer drives them
(``on_train_begin`` once, then ``on_log``), so every integration transformers supports receives the scalars. The
keys are those of :mod:`mssr_hf.log_keys` (``eval_score/<task>`` and ``eval_<metric>``, shown as
``eval/score/<task>`` and ``eval/<metric>``).

TensorBoard writes these to ``<output_dir>/runs/<date>_<host>/``: the run's folder, next to the stage folders (each
stage's trainer writes its training logs under its own ``checkpoints/runs/``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from accelerate import PartialState
from transformers import TrainerControl, TrainerState
from transformers.integrations import TensorBoardCallback, get_reporting_integration_callbacks

from . import log_keys

__all__ = ["StageReporter", "stage_logs"]


def stage_logs(results: dict[str, Any], stage: int) -> dict[str, float]:
    """The values logged after ``stage``: each seen task's score, the probe's, the summary metrics (finite ones)."""
    row = results["matrix"][stage]
    logs = {log_keys.eval_score_key(task): row[i] for i, task in enumerate(results["tasks"][: stage + 1])}
    if results.get("probe_task"):
        logs[log_keys.eval_probe_key(results["probe_task"])] = results["probe"][stage]
    logs.update({log_keys.eval_metric_key(name): value for name, value in results["metrics"].items()})
    logs[log_keys.EVAL_STAGE] = stage
    return {key: float(value) for key, value in logs.items() if value is not None and math.isfinite(value)}


class StageReporter:
    """Logs each stage's evaluation to the ``report_to`` trackers of ``args`` (on the main process only).

    Args:
        args (`TrainingArguments`): the run's arguments; ``output_dir`` is the run's folder (TensorBoard writes under
            it). The Hub token is left out of what the trackers receive.
    """

    def __init__(self, args):
        self.args = dataclasses.replace(args, hub_token=None)
        self.is_main_process = PartialState().is_main_process
        self.callbacks = [cls() for cls in get_reporting_integration_callbacks(args.report_to)]
        self.started = False

    def log_stage(self, step: int, logs: dict[str, float], plots: Sequence[Path] = (), model=None) -> None:
        """Log ``logs`` at global step ``step``; TensorBoard also gets ``plots`` (PNG files) as images."""
        if not self.callbacks or not self.is_main_process:
            return
        state, control = TrainerState(global_step=step), TrainerControl()
        if not self.started:
            for callback in self.callbacks:
                callback.on_train_begin(self.args, state, control, model=model)
            self.started = True
        for callback in self.callbacks:
            callback.on_log(self.args, state, control, logs=dict(logs), model=model)
        for callback in self.callbacks:
            # Only TensorBoard among transformers' integrations exposes its writer; the others get the scalars.
            if isinstance(callback, TensorBoardCallback) and callback.tb_writer is not None:
                for path in plots:
                    callback.tb_writer.add_image(f"plots/{Path(path).stem}", _rgb(path), step, dataformats="HWC")
                callback.tb_writer.flush()

    def close(self) -> None:
        """Close TensorBoard's event file (the other trackers stay open for the stage trainers that share them)."""
        for callback in self.callbacks:
            if isinstance(callback, TensorBoardCallback) and self.started:
                callback.on_train_end(self.args, TrainerState(), TrainerControl())


def _rgb(path: str | Path) -> np.ndarray:
    """A PNG as an ``(H, W, 3)`` uint8 array."""
    from PIL import Image

    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))
