"""The mixed-replay sampler behind MSSRTrainer's train dataloader.

The training dataset is the current task's rows plus the replay bank's rows. The sampler yields row indices one
optimizer step's *global* batch at a time (``global_batch = per_device_batch * processes * grad_accumulation``):
the replay rows planned for that step, the rest from the current task's stream. Accelerate deals consecutive
micro-batches of that stream to the processes, so the union of the ranks' micro-batches of one optimizer step is the
planned global batch, and every rank's sampler yields the same stream.

It is a plain :class:`torch.utils.data.Sampler` (accelerate replaces ``RandomSampler`` subclasses). Plans are
written ahead by the trainer (see ``MSSRTrainer``): the dataloader reads batches ahead of the step being trained, so
the plan for step ``s`` is fixed at the end of step ``s - lookahead``, on every rank from the same state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch.utils.data import Sampler


class MixedReplaySampler(Sampler[int]):
    """Yields ``steps_per_epoch * global_batch`` row indices per epoch.

    Args:
        task_rows (`torch.Tensor`): dataset rows of the current task, shape ``(n,)``.
        global_batch (`int`): samples per optimizer step across all processes and accumulation steps.
        steps_per_epoch (`int`): optimizer steps per pass (the trainer's epoch length).
        seed (`int`): seed of the task stream; pass ``p`` of the stream is ``randperm(n)`` seeded by ``seed + p``
            (the order of accelerate's seedable sampler), or the rows in order if ``shuffle`` is false.
        first_step (`int`): the 1-based global optimizer step of the first batch.
        shuffle (`bool`, *optional*, defaults to `True`): shuffle the task stream in each pass.
        layout (`Mapping[str, int]`, *optional*): how ``global_batch`` is formed (e.g. processes, per-device batch,
            accumulation steps). Recorded in :meth:`state_dict` with ``global_batch`` and ``seed``: a state saved with
            another layout or seed is refused on load, since the stream would not continue where it stopped.
    """

    def __init__(
        self,
        task_rows: torch.Tensor,
        global_batch: int,
        steps_per_epoch: int,
        seed: int,
        first_step: int = 1,
        shuffle: bool = True,
        layout: Mapping[str, int] | None = None,
    ):
        if task_rows.numel() == 0:
            raise ValueError("the current task has no training rows")
        if global_batch < 1 or steps_per_epoch < 1:
            raise ValueError(f"global_batch and steps_per_epoch must be >= 1, got {global_batch}, {steps_per_epoch}")
        self.task_rows = task_rows.to(torch.int64)
        self.global_batch = int(global_batch)
        self.steps_per_epoch = int(steps_per_epoch)
        self.seed = int(seed)
        self.shuffle = shuffle
        self.layout = dict(layout or {})
        self.next_step = int(first_step)  # the step the next yielded index belongs to
        self.cursor = 0  # position in the (endless) task stream
        self.plans: dict[int, torch.Tensor] = {}  # step -> replay rows, written ahead by the trainer
        self.cursor_at: dict[int, int] = {}  # step -> task cursor when that step began
        self._perm_pass, self._perm = -1, self.task_rows

    # ------------------------------------------------------------------ plans

    def set_plan(self, step: int, replay_rows: torch.Tensor) -> None:
        """Fix the replay rows of ``step`` (at most ``global_batch - 1`` of them)."""
        if step < self.next_step and not torch.equal(self.plans.get(step, replay_rows[:0]), replay_rows):
            raise RuntimeError(
                f"replay plan for step {step} arrived after the dataloader already formed that batch "
                f"(next step {self.next_step}); increase the planning look-ahead"
            )
        if replay_rows.numel() >= self.global_batch:
            raise ValueError(f"a step holds {self.global_batch} samples; {replay_rows.numel()} replay rows leave none")
        self.plans[int(step)] = replay_rows.to(torch.int64)

    def step_start_cursor(self, step: int) -> int:
        """Task-stream position at the start of ``step`` (for checkpoints)."""
        return self.cursor_at.get(step, self.cursor)

    # ------------------------------------------------------------------ the stream

    def _task_slice(self, count: int) -> torch.Tensor:
        n = self.task_rows.numel()
        out = []
        while count > 0:
            p, offset = divmod(self.cursor, n)
            if p != self._perm_pass:
                if self.shuffle:
                    g = torch.Generator().manual_seed(self.seed + p)
                    self._perm = self.task_rows[torch.randperm(n, generator=g)]
                else:
                    self._perm = self.task_rows
                self._perm_pass = p
            take = min(count, n - offset)
            out.append(self._perm[offset : offset + take])
            self.cursor += take
            count -= take
        return torch.cat(out) if out else self.task_rows[:0]

    def batch_for_step(self, step: int) -> torch.Tensor:
        """Form the global batch of ``step`` (advances the stream). Shape ``(global_batch,)``."""
        self.cursor_at[step] = self.cursor
        # Keep recent history: a checkpoint taken while the dataloader reads ahead resumes from an earlier step.
        for table in (self.cursor_at, self.plans):
            for old in [s for s in table if s < step - 8]:
                del table[old]
        replay = self.plans.get(step, self.task_rows[:0])
        rows = self._task_slice(self.global_batch - replay.numel())
        if replay.numel():
            # Spread replay over the micro-batches: a seeded shuffle, identical on every rank.
            rows = torch.cat([rows, replay])
            rows = rows[torch.randperm(rows.numel(), generator=torch.Generator().manual_seed(self.seed * 7919 + step))]
        return rows

    def __iter__(self):
        for _ in range(self.steps_per_epoch):
            step = self.next_step
            rows = self.batch_for_step(step)
            self.next_step = step + 1
            yield from rows.tolist()

    def __len__(self) -> int:
        return self.steps_per_epoch * self.global_batch

    # ------------------------------------------------------------------ state

    def built_with(self) -> dict[str, int]:
        """What the stream depends on besides its position: the batch layout, ``global_batch`` and ``seed``."""
        return {**self.layout, "global_batch": self.global_batch, "seed": self.seed}

    def state_dict(self, next_step: int | None = None) -> dict[str, Any]:
        """State to resume at ``next_step`` (default: the next step not yet formed): the task-stream position then
        and the plans from then on, and what the sampler was built with."""
        step = self.next_step if next_step is None else next_step
        return {
            "next_step": step,
            "cursor": self.step_start_cursor(step),
            "plans": {str(s): rows.tolist() for s, rows in self.plans.items() if s >= step},
            "seed": self.seed,
            "built_with": self.built_with(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`state_dict`; refused if it was built with another batch layout or seed."""
        saved, now = state.get("built_with"), self.built_with()
        if saved is not None and saved != now:
            changed = "; ".join(
                f"{key}: saved {saved.get(key)!r}, now {now.get(key)!r}"
                for key in [*now, *(k for k in saved if k not in now)]
                if saved.get(key) != now.get(key)
            )
            raise ValueError(
                f"cannot resume the replay sampler: the checkpoint was written with another batch layout or seed "
                f"({changed}); resume with the same number of processes, per_device_train_batch_size, "
                "gradient_accumulation_steps and seed (data_seed if set), or start a new run"
            )
        self.next_step = int(state["next_step"])
        self.cursor = int(state["cursor"])
        self.plans = {int(s): torch.tensor(rows, dtype=torch.int64) for s, rows in state["plans"].items()}
        self.cursor_at = {}
        self._perm_pass = -1
