"""One terminal progress bar per stage of a continual run, in place of the trainer's own bar and printed logs.

``ContinualRunner(..., progress_label="er")`` shows, for each stage, a bar such as ``er · stage 2/3 · rg_addition``
with the steps done and their rate, then ``scoring 2 tasks`` while the stage's evaluation runs (``scored 2 tasks``
once it has). The trainer's logs (loss, replay statistics, ...) are no longer printed; they still reach the
``report_to`` trackers and every stage's ``log_history`` in ``results.json``. Without ``progress_label`` the trainers
keep transformers' own progress bar (or, with ``disable_tqdm``, its printed logs).
"""

from __future__ import annotations

import time

from tqdm.auto import tqdm
from transformers import PrinterCallback, TrainerCallback
from transformers.trainer import DEFAULT_PROGRESS_CALLBACK

__all__ = ["StageProgressBar"]


class StageProgressBar(TrainerCallback):
    """A stage's progress bar: its optimizer steps and their rate while it trains, then what the runner does next
    (shown on the main process only). The time in brackets is the stage's; the rate is the training's.

    Args:
        description (`str`): the bar's label, e.g. ``"er · stage 2/3 · rg_addition"``.
    """

    FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"

    def __init__(self, description: str):
        self.description = description
        self.bar = None
        self.rate = ""  # the training's steps per second, as shown

    @staticmethod
    def replace_trainer_output(trainer) -> None:
        """Remove the trainer's own progress bar and log printing (transformers adds one of the two to every
        trainer), so that this bar is the only output of the stage."""
        for callback in (DEFAULT_PROGRESS_CALLBACK, PrinterCallback):
            trainer.remove_callback(callback)

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.bar is None:
            self.bar = tqdm(total=state.max_steps, desc=self.description, bar_format=self.FORMAT, dynamic_ncols=True)
            self.first_step, self.start = state.global_step, time.perf_counter()  # a resumed stage starts past 0
            self.bar.update(state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            seconds = time.perf_counter() - self.start
            self.rate = f"{(state.global_step - self.first_step) / seconds:.2f} step/s" if seconds > 0 else ""
            self.bar.set_postfix_str(self.rate, refresh=False)
            self.bar.update(state.global_step - self.bar.n)

    def show(self, text: str) -> None:
        """Show ``text`` after the training's rate (e.g. what the stage does after training)."""
        if self.bar is not None:
            self.bar.set_postfix_str(", ".join(part for part in (self.rate, text) if part))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
