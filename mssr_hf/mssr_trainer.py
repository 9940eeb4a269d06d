"""MSSRTrainer: `trl.SFTTrainer` with per-sample memory and scheduled replay of earlier tasks.

Glue only: the equations live in :mod:`mssr_hf.memory` and :mod:`mssr_hf.scheduler`, the batch stream in
:mod:`mssr_hf.sampler`, the map from config fields onto them in :mod:`mssr_hf.mssr_config`. What this file adds to
the parent, through its public hooks:

- ids: every row carries its sample-memory id (``args.replay_id_column``) through tokenisation and the collator;
- losses (``compute_loss``): each sample's mean token loss is read off the parent's own fused forward (no second
  forward, no ``(B, T, V)`` logits), gathered across processes, and written to the memory (observe + review). A
  training step whose fused forward is missing (another trl) raises instead of leaving the memory without losses;
- replay (``get_train_dataloader``): the train dataloader draws from :class:`~mssr_hf.sampler.MixedReplaySampler`,
  whose per-step replay rows are planned by the strategy ``lookahead`` steps ahead, after each optimizer step
  (``on_step_end`` callback), identically on every rank;
- state: memory, strategy, buffer and sampler are saved with every checkpoint (``on_save`` callback; safetensors +
  JSON) and restored by ``resume_from_checkpoint``, which refuses another batch layout or seed. The callback writes
  :data:`COMPLETE_NAME` last, with the size of every file of the checkpoint: a checkpoint without it (a save that was
  interrupted), or with a file missing, truncated or unreadable, is never resumed from
  (:func:`last_complete_checkpoint`).

The private upstream names it still uses are pinned in ``tests/test_upstream_pins.py`` (:data:`TESTED_VERSIONS`).

Time: the memory's clock is the global optimizer step across stages. A stage's ``train()`` starts at the memory's
clock (``step_offset``); HF's ``global_step`` ``g`` of this stage is global step ``step_offset + g``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import trl
from accelerate.utils import broadcast_object_list
from datasets import Dataset, concatenate_datasets
from transformers import TrainerCallback
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import SFTTrainer

from . import log_keys
from .errors import InputError
from .memory import SampleMemory
from .mssr_config import MSSRConfig, memory_from_config, strategy_from_config
from .sampler import MixedReplaySampler
from .scheduler import IntervalReplay, ReplaySignals, ReplayStrategy, draw_buffer, replay_allowance
from .state_io import file_sizes, has_state, load_state, save_state, size_problem

logger = logging.getLogger(__name__)

STATE_NAME = "mssr_state"
# Written last into every checkpoint: the size of each file in it. Without it, the checkpoint's save was interrupted.
COMPLETE_NAME = "mssr_complete.json"
REPLAY_STATE_KEYS = ("memory", "strategy", "sampler", "buffer", "probe_ids", "generator", "step_offset", "counters",
                     "last_ratio", "planned")  # fmt: skip
_CHECKPOINT = re.compile(rf"^{PREFIX_CHECKPOINT_DIR}-(\d+)$")
# The versions whose internals MSSRTrainer was checked against (tests/test_upstream_pins.py pins what it relies on).
TESTED_VERSIONS = {"transformers": "5.23.0", "trl": "1.16.0"}


class _FusedOutputTap:
    """Stands in for ``model`` in the parent's ``compute_loss`` and keeps the output of its fused forward."""

    def __init__(self, model):
        self.model, self.output = model, None

    def __call__(self, *args, **kwargs):
        out = self.model(*args, **kwargs)
        if kwargs.get("fused_lm_head"):
            self.output = out
        return out


class _IdCollator:
    """Wraps the SFT collator (which drops unknown keys) to carry each row's memory id as a LongTensor."""

    def __init__(self, inner, id_column: str):
        self.inner, self.id_column = inner, id_column

    def __call__(self, examples):
        batch = self.inner(examples)
        batch[self.id_column] = torch.tensor([int(e[self.id_column]) for e in examples], dtype=torch.long)
        return batch


class _ReplayCallback(TrainerCallback):
    """MSSRTrainer's two hooks into the training loop, both public callback events."""

    def __init__(self, trainer: MSSRTrainer):
        self.trainer = trainer

    # Replay decisions need the state after each optimizer step. The epoch is counted from the global step: the parent
    # counts it from where this train() call started (the replay sampler, not HF's batch skipping, resumes the stream),
    # so after a resume it would restart at 0.
    def on_step_end(self, args, state, control, **kwargs):
        state.epoch = state.global_step / self.trainer.replay_sampler.steps_per_epoch
        self.trainer._after_optimizer_step()

    # Every checkpoint carries the replay state; train() reads it back on resume. Only the saving process writes, once
    # every process has written its part (each writes its own RNG state), so the completion record comes last.
    def on_save(self, args, state, control, **kwargs):
        self.trainer.accelerator.wait_for_everyone()
        if args.should_save:
            checkpoint = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
            self.trainer.save_replay_state(checkpoint)


def read_checkpoint(checkpoint: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """The replay state and the parent's ``trainer_state.json`` of a complete MSSRTrainer checkpoint.

    Raises:
        `ValueError`: the checkpoint is not complete (no :data:`COMPLETE_NAME`: its save was interrupted, or another
            trainer wrote it), or a file in it is missing, of another size than written, or unreadable. The message
            names the file.
    """
    path = Path(checkpoint)
    marker = path / COMPLETE_NAME
    if not marker.is_file():
        if not has_state(path, STATE_NAME):
            raise InputError(
                f"{path} holds no {STATE_NAME} files: it was not written by MSSRTrainer, or its save was interrupted"
            )
        raise InputError(f"{path} has no {COMPLETE_NAME} (written last): its save was interrupted")
    try:
        sizes = json.loads(marker.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise InputError(f"{marker} cannot be read: {type(error).__name__}: {error}") from error
    problem = size_problem(path, sizes)
    if problem is not None:
        raise InputError(problem)
    trainer_state_file = path / TRAINER_STATE_NAME
    try:
        trainer_state = json.loads(trainer_state_file.read_text())
    except (OSError, ValueError) as error:
        raise InputError(f"{trainer_state_file} cannot be read: {type(error).__name__}: {error}") from error
    state = load_state(path, STATE_NAME)
    missing = [key for key in REPLAY_STATE_KEYS if key not in state]
    if missing:
        raise InputError(f"{path / STATE_NAME}.json lacks {missing}: it is not a complete MSSRTrainer replay state")
    return state, trainer_state


def last_complete_checkpoint(folder: str | os.PathLike) -> tuple[str | None, list[str]]:
    """The newest ``checkpoint-N`` in ``folder`` that :func:`read_checkpoint` accepts (None: none), and why each newer
    one was passed over."""
    folder = Path(folder)
    found = [p for p in folder.iterdir() if _CHECKPOINT.match(p.name) and p.is_dir()] if folder.is_dir() else []
    skipped = []
    for path in sorted(found, key=lambda p: int(_CHECKPOINT.match(p.name).group(1)), reverse=True):
        try:
            read_checkpoint(path)
        except ValueError as error:
            skipped.append(str(error))
            continue
        return str(path), skipped
    return None, skipped


def _with_ids(dataset: Dataset, column: str, start: int) -> Dataset:
    return dataset.add_column(column, list(range(start, start + len(dataset))))


def _ids(dataset: Dataset, column: str) -> torch.Tensor:
    """The ``column`` of ``dataset`` as a tensor, read through numpy (a bank may hold millions of rows).

    Raises:
        `InputError`: the column does not hold non-negative integers.
    """
    values = dataset.select_columns([column]).with_format("arrow")[:][column].to_numpy()  # one read, not row by row
    if values.size and (values.dtype.kind not in "iu" or values.min() < 0):
        raise InputError(f"{column!r} must hold non-negative integers")
    return torch.tensor(values, dtype=torch.int64)  # a copy: arrow hands out a read-only array


def _check_sft_columns(name: str, dataset: Dataset, args: MSSRConfig) -> None:
    """``dataset`` must be in a format SFT trains on."""
    kinds = (["input_ids"], [args.dataset_text_field], ["messages"], ["prompt", "completion"])
    if not any(all(c in dataset.column_names for c in kind) for kind in kinds):
        raise InputError(
            f"{name} has the columns {dataset.column_names}; SFT needs 'prompt' and 'completion', 'messages', "
            f"{args.dataset_text_field!r} (dataset_text_field) or 'input_ids'"
        )


def is_prepared(dataset: Dataset) -> bool:
    """Whether ``dataset`` holds tokenized training rows (``input_ids`` and ``labels``), as
    :meth:`MSSRTrainer.next_replay_dataset` returns them: a trainer uses them as they are."""
    return {"input_ids", "labels"} <= set(dataset.column_names)


class MSSRTrainer(SFTTrainer):
    """`trl.SFTTrainer` that replays earlier tasks' samples with MSSR (or a baseline strategy).

    Args:
        model, args, data_collator, train_dataset, eval_dataset, processing_class, **kwargs:
            as for [`~trl.SFTTrainer`]; ``args`` is an [`MSSRConfig`] and ``train_dataset`` the current task.
        replay_dataset (`datasets.Dataset` or a list of them, *optional*): the earlier tasks' samples (the replay
            bank). Each dataset holds raw rows in a format SFT takes (prompt/completion, messages, text), which this
            trainer tokenizes exactly as it tokenizes ``train_dataset``, or rows already tokenized (``input_ids`` and
            ``labels``, fitted to ``max_length``), which it uses as they are: the bank of the next stage
            (:meth:`next_replay_dataset`) is such a dataset, so a sequence tokenizes each task once. Required unless
            ``replay_strategy="none"``.
        memory (`SampleMemory`, *optional*): the sample memory to carry across stages. When given, every dataset
            must carry ``args.replay_id_column`` with the samples' ids in that memory; otherwise ids are assigned
            (bank ``0..B-1``, task ``B..B+N-1``) and a memory is created from ``args``.
        strategy (`ReplayStrategy`, *optional*): a strategy object to use instead of ``args.replay_strategy``.
        evaluate_fn (`Callable[[model], Mapping[str, float]]`, *optional*): scores of earlier tasks' validation
            subsets (higher is better); needed by the ``accuracy`` strategy, called every ``replay_eval_interval``.
        exposure_listeners (`Sequence[Callable]`, *optional*): each is called as ``fn(memory, ids, losses, step)``
            right before every ``memory.expose(ids, losses, step)``, so it sees the memory as it was before that
            exposure: ``ids`` and ``losses`` are CPU tensors of shape ``(n,)`` gathered from every process (a
            non-finite loss is then skipped by the memory), ``step`` the global optimizer step. Kept in
            ``trainer.exposure_listeners`` (append more there). Their time is not counted as bookkeeping.

    Attributes:
        task_dataset (`datasets.Dataset`): the current task's rows as trained: tokenized, with their ids (the columns
            the model and the collator take).
        replay_dataset (`datasets.Dataset` or None): the bank's rows, likewise.
        counters (`dict`): ``replayed_samples``, ``replay_steps``; ``probe_seconds`` and ``eval_seconds`` (the extra
            forwards of the ``loss`` and ``accuracy`` baselines); ``bookkeeping_seconds``: time in MSSRTrainer's own
            work (gather + observe/review of each micro-batch's losses, planning, buffer refreshes, hazard updates,
            the stage start). Logged as ``replay/<name>``, saved with every checkpoint.
    """

    def __init__(
        self,
        model,
        args: MSSRConfig | None = None,
        data_collator=None,
        train_dataset: Dataset | None = None,
        eval_dataset=None,
        processing_class=None,
        *,
        replay_dataset: Dataset | Sequence[Dataset] | None = None,
        memory: SampleMemory | None = None,
        strategy: ReplayStrategy | None = None,
        evaluate_fn: Callable[[Any], Mapping[str, float]] | None = None,
        exposure_listeners: Sequence[Callable[[SampleMemory, torch.Tensor, torch.Tensor, int], Any]] | None = None,
        **kwargs,
    ):
        if args is None:
            args = MSSRConfig(output_dir="mssr-output")
        if not isinstance(args, MSSRConfig):
            raise TypeError(f"MSSRTrainer needs an MSSRConfig as `args`, got {type(args).__name__}")
        self.strategy = strategy if strategy is not None else strategy_from_config(args)
        train_dataset, bank_parts, num_ids = self._check_datasets(args, train_dataset, replay_dataset, memory)
        if self.strategy.eval_interval and evaluate_fn is None:
            raise InputError(
                f"replay strategy {self.strategy.name!r} evaluates earlier tasks: pass evaluate_fn=callable(model) "
                "returning {task: score}"
            )
        if self.strategy.probe_interval and not bank_parts:
            raise InputError(
                f"replay strategy {self.strategy.name!r} probes buffer samples and needs a replay_dataset"
            )
        super().__init__(model, args, data_collator, train_dataset, eval_dataset, processing_class, **kwargs)
        self.data_collator = _IdCollator(self.data_collator, args.replay_id_column)
        self.evaluate_fn = evaluate_fn
        self.exposure_listeners = list(exposure_listeners or [])
        self.memory = memory if memory is not None else memory_from_config(args)
        if len(self.memory) < num_ids:
            self.memory.extend(num_ids - len(self.memory), step=self.memory.clock)
        self.step_offset = self.memory.clock

        # The parent tokenized the task's rows (and may have dropped rows with no trainable token); the bank's raw
        # parts are tokenized here the same way, the tokenized ones are taken as they are. Rows: task, then bank.
        self.task_dataset = self._training_columns(self.train_dataset)
        bank = [self._training_columns(self._prepared(part)) for part in bank_parts]
        self.replay_dataset = concatenate_datasets(bank) if len(bank) > 1 else (bank[0] if bank else None)
        if self.replay_dataset is not None:
            self.train_dataset = concatenate_datasets([self.task_dataset, self.replay_dataset])
        if len(self.task_dataset) == 0:
            raise InputError("train_dataset has no row with a trainable token after tokenisation and truncation")
        row_ids = _ids(self.train_dataset, args.replay_id_column)
        self.task_rows = torch.arange(len(self.task_dataset))
        self.bank_ids = row_ids[len(self.task_dataset) :]
        self.row_of_id = torch.full((num_ids,), -1, dtype=torch.int64)
        self.row_of_id[row_ids] = torch.arange(row_ids.numel())

        self.generator = torch.Generator().manual_seed(args.resolved_replay_seed())
        self.buffer = self.bank_ids[:0]
        self.probe_ids = self.bank_ids[:0]
        self.replay_sampler: MixedReplaySampler | None = None
        self._restored_sampler_state: dict | None = None
        self._stage_started = False
        self.counters = {"replayed_samples": 0, "replay_steps": 0, "probe_seconds": 0.0, "eval_seconds": 0.0,
                         "bookkeeping_seconds": 0.0, "planned_stage_samples": 0}  # fmt: skip
        self.last_ratio = 0.0  # replay ratio of the last trained step
        self.planned: dict[int, tuple[float, int]] = {}  # step -> (ratio, replay samples), for steps not yet trained
        self._resumed_losses: tuple[int, float, int] | None = None  # (checkpoint step, its loss sum, steps logged)
        self.add_callback(_ReplayCallback(self))

    # ------------------------------------------------------------------ input checks (before any training)

    @staticmethod
    def _check_datasets(args, train_dataset, replay_dataset, memory):
        """Validate the task and bank datasets and give them ids; returns (task, the bank's non-empty parts, number
        of ids)."""
        col = args.replay_id_column
        if not isinstance(train_dataset, Dataset):
            raise InputError(
                f"train_dataset must be a datasets.Dataset (map-style), got {type(train_dataset).__name__}; "
                "streaming datasets cannot be indexed by a replay sampler"
            )
        if len(train_dataset) == 0:
            raise InputError("train_dataset is empty: give the current task's rows")
        _check_sft_columns("train_dataset", train_dataset, args)
        if "completion" in train_dataset.column_names:
            empty = sum(isinstance(c, str) and not c.strip() for c in train_dataset["completion"][:])
            if empty:
                warnings.warn(
                    f"{empty} of {len(train_dataset)} train_dataset rows have an empty completion: on them the model "
                    "learns to end its answer right after the prompt",
                    stacklevel=3,
                )
        parts = [] if replay_dataset is None else [replay_dataset] if isinstance(replay_dataset, Dataset) else list(
            replay_dataset)  # fmt: skip
        for part in parts:
            if not isinstance(part, Dataset):
                raise InputError(
                    f"replay_dataset must be a datasets.Dataset or a list of them, got {type(part).__name__}"
                )
            if not is_prepared(part):
                _check_sft_columns("replay_dataset", part, args)
        parts = [part for part in parts if len(part)]
        if args.replay_strategy != "none" and not parts:
            raise InputError(
                f"replay_strategy={args.replay_strategy!r} needs a non-empty replay_dataset (the earlier tasks' "
                "samples); for the first task of a sequence use replay_strategy='none'"
            )
        datasets = [*parts, train_dataset]
        with_ids = [col in d.column_names for d in datasets]
        if memory is not None and not all(with_ids):
            raise InputError(
                f"a SampleMemory was passed, so every sample needs its memory id: add a {col!r} column to "
                "train_dataset and replay_dataset (ContinualRunner does this), or pass no memory"
            )
        if any(with_ids) and not all(with_ids):
            raise InputError(f"{col!r} is in one dataset but missing from the other: give ids to both or neither")
        if not any(with_ids):
            start = 0
            for k, part in enumerate(parts):
                parts[k], start = _with_ids(part, col, start), start + len(part)
            train_dataset = _with_ids(train_dataset, col, start)
        ids = torch.cat([_ids(d, col) for d in (*parts, train_dataset)])
        if torch.unique(ids).numel() != ids.numel():
            raise InputError(f"{col!r} values must be unique across train_dataset and replay_dataset")
        num_ids = int(ids.max()) + 1
        # New task ids beyond the memory are added to it; bank ids must already be tracked.
        bank_size = sum(len(part) for part in parts)
        if memory is not None and bank_size and int(ids[:bank_size].max()) >= len(memory):
            raise InputError(f"replay_dataset has {col!r} values beyond the memory's {len(memory)} samples")
        return train_dataset, parts, num_ids

    # ------------------------------------------------------------------ data

    def _prepared(self, dataset: Dataset) -> Dataset:
        """``dataset`` tokenized, labelled and fitted to ``max_length`` by the parent's own preparation, exactly as the
        task's rows were (taken as it is when it already is, or when the parent skips preparation)."""
        if is_prepared(dataset) or self._skip_prepare_dataset:
            return dataset
        return self._prepare_dataset(dataset, self.processing_class, self.args, self.args.packing,
                                     self._formatting_func, "replay")  # fmt: skip

    def _training_columns(self, dataset: Dataset) -> Dataset:
        """The columns of ``dataset`` that the model and the collator take (and the id column): what the dataloader
        keeps of a row anyway, and all that a bank needs, so that tasks with other columns share one bank."""
        self._set_signature_columns_if_needed()
        return dataset.select_columns([c for c in dataset.column_names if c in self._signature_columns])

    def next_replay_dataset(self) -> Dataset:
        """The replay bank of the next stage: this stage's bank and task rows, tokenized (pass it as the next
        trainer's ``replay_dataset``; it is not tokenized again)."""
        if self.replay_dataset is None:
            return self.task_dataset
        return concatenate_datasets([self.replay_dataset, self.task_dataset])

    def _set_signature_columns_if_needed(self):
        # Keep the id column when HF drops columns the model's forward does not take.
        super()._set_signature_columns_if_needed()
        if self.args.replay_id_column not in self._signature_columns:
            self._signature_columns.append(self.args.replay_id_column)

    @property
    def global_batch(self) -> int:
        return self.args.per_device_train_batch_size * self.args.gradient_accumulation_steps * self.args.world_size

    @property
    def lookahead(self) -> int:
        """How many optimizer steps ahead the plan is fixed: the dataloader has formed all of step s and the first
        micro-batch of s+1 when step s trains; worker prefetching reads further ahead."""
        workers = self.args.dataloader_num_workers
        prefetched = workers * (self.args.dataloader_prefetch_factor or 2) if workers else 0
        return 2 + math.ceil(prefetched / self.args.gradient_accumulation_steps)

    def stage_steps(self) -> int:
        if self.args.max_steps > 0:
            return self.args.max_steps
        return math.ceil(self.args.num_train_epochs * math.ceil(self.task_rows.numel() / self.global_batch))

    def get_train_dataloader(self):
        # Build this stage's mixed-replay sampler (restored on resume), then the parent builds the loader around it.
        self._build_replay_sampler()
        return super().get_train_dataloader()

    def _get_train_sampler(self, train_dataset=None):
        # The parent's get_train_dataloader takes its sampler from this hook: hand over the one built above.
        return self.replay_sampler

    def _build_replay_sampler(self) -> None:
        """The stage's sampler, a plain Sampler (accelerate leaves it alone) in place of HF's RandomSampler: restored
        from the checkpoint on resume, else the stage begins (memory update, buffer, first plans)."""
        steps = self.stage_steps()
        per_epoch = steps if self.args.max_steps > 0 else math.ceil(self.task_rows.numel() / self.global_batch)
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        # How the global batch is formed: a resumed sampler must see the same layout (and seed) to continue the stream.
        layout = {
            "world_size": self.args.world_size,
            "per_device_train_batch_size": self.args.per_device_train_batch_size,
            "gradient_accumulation_steps": self.args.gradient_accumulation_steps,
        }
        self.replay_sampler = MixedReplaySampler(self.task_rows, self.global_batch, per_epoch, seed,
                                                 self.step_offset + 1, layout=layout)  # fmt: skip
        if self._restored_sampler_state is not None:
            self.replay_sampler.load_state_dict(self._restored_sampler_state)
            self._restored_sampler_state = None
        elif not self._stage_started:
            self._begin_stage(steps)

    # ------------------------------------------------------------------ the schedule

    @contextlib.contextmanager
    def _bookkeeping(self) -> Iterator[None]:
        """Counts the time inside into ``counters["bookkeeping_seconds"]``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.counters["bookkeeping_seconds"] += time.perf_counter() - start

    def _begin_stage(self, num_steps: int) -> None:
        step = self.step_offset
        with self._bookkeeping():
            # memory_time_unit "epoch": one pass over this stage's task samples.
            task_epoch = math.ceil(self.task_rows.numel() / self.global_batch)
            self.memory.set_time_unit(self.args.time_unit_steps(task_epoch), step)
            self.memory.update_hazard(step)  # stage boundary
            self.strategy.begin_stage(step, num_steps, self.bank_ids)
            self._refresh_buffer(step)
            if self.strategy.probe_interval:
                self.probe_ids = torch.sort(self.buffer[: self.args.replay_probe_size]).values
            for ahead in range(1, self.lookahead + 1):
                self._plan(step + ahead)
        self._stage_started = True

    def _refresh_buffer(self, step: int) -> None:
        if self.bank_ids.numel():
            self.buffer = draw_buffer(
                self.bank_ids, self.args.replay_buffer_size, self.strategy, self.memory, step, self.generator,
                self.args.replay_staleness_cap,
            )  # fmt: skip

    def _plan(self, step: int) -> None:
        """Ask the strategy about ``step`` and fix that step's replay rows in the sampler."""
        ratio = float(self.strategy.plan(step, self.memory))
        k = min(round(ratio * self.global_batch), self.global_batch - 1, self.buffer.numel())
        if k > 0 and self.args.replay_max_share is not None:
            k = min(k, replay_allowance(self.args.replay_max_share, self.global_batch, step - self.step_offset,
                                        self.counters["planned_stage_samples"]))  # fmt: skip
        if k > 0:
            self.counters["planned_stage_samples"] += k
            # replay_task_gap_weight: this step's draw leans towards the tasks whose replays show the larger gap (the
            # keyword only then, so a user's ReplayStrategy whose select() predates it keeps working)
            tilt = {"by_task_gap": True} if self.memory.task_gap_weight > 0 else {}
            ids = self.strategy.select(self.buffer, k, step, self.memory, self.generator, **tilt)
            self.replay_sampler.set_plan(step, self.row_of_id[ids])
        self.planned[step] = (ratio if k > 0 else 0.0, max(k, 0))

    def _after_optimizer_step(self) -> None:
        step = self.step_offset + self.state.global_step  # the global step just completed
        relative = self.state.global_step
        strategy = self.strategy
        # The baselines' measurements: extra forwards, timed on their own (probe_seconds, eval_seconds).
        if strategy.probe_interval and relative % strategy.probe_interval == 0:
            strategy.observe(step, ReplaySignals(probe_loss=self._probe_loss()))
        if strategy.eval_interval and relative % strategy.eval_interval == 0:
            strategy.observe(step, ReplaySignals(scores=self._evaluate_earlier_tasks()))
        with self._bookkeeping():
            self.last_ratio, replayed = self.planned.pop(step, (0.0, 0))
            self.counters["replayed_samples"] += replayed
            self.counters["replay_steps"] += int(replayed > 0)
            if relative % self.args.replay_refresh_interval == 0:
                self.memory.update_hazard(step)
                self._refresh_buffer(step)
            self._plan(step + self.lookahead)

    def _probe_loss(self) -> float:
        """Mean token loss of the fixed probe set (the ``loss`` baseline's extra forwards), split across ranks."""
        start = time.perf_counter()
        rows = self.row_of_id[self.probe_ids][self.args.process_index :: self.args.world_size].tolist()
        totals = torch.zeros(2, dtype=torch.float64, device=self.args.device)
        model = self.model
        was_training = model.training
        model.eval()
        with torch.no_grad():
            bs = self.args.per_device_train_batch_size
            for i in range(0, len(rows), bs):
                batch = self.data_collator([self.train_dataset[r] for r in rows[i : i + bs]])
                batch.pop(self.args.replay_id_column)
                batch = self._prepare_inputs(batch)
                out = model(**batch, fused_lm_head=True)
                totals += torch.stack([-out.log_probs.double().sum(), out.label_mask.double().sum()])
        model.train(was_training)
        totals = self.accelerator.gather(totals.unsqueeze(0)).sum(0)
        self.counters["probe_seconds"] += time.perf_counter() - start
        return float(totals[0] / totals[1].clamp(min=1))

    def _evaluate_earlier_tasks(self) -> dict[str, float]:
        """The ``accuracy`` baseline's evaluations; rank 0's scores are broadcast so all ranks decide alike."""
        start = time.perf_counter()
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            scores = [dict(self.evaluate_fn(self.model))]
        self.model.train(was_training)
        if self.args.world_size > 1:
            broadcast_object_list(scores, from_process=0)
        self.counters["eval_seconds"] += time.perf_counter() - start
        return scores[0]

    # ------------------------------------------------------------------ per-sample losses

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # Read each sample's loss off the parent's own fused forward; the returned loss is the parent's.
        ids = inputs.pop(self.args.replay_id_column, None)
        tap = _FusedOutputTap(model)
        result = super().compute_loss(
            tap, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
        )
        if self.model.training and ids is not None:
            if tap.output is None:
                raise RuntimeError(
                    f"MSSRTrainer reads each sample's loss off the forward that trl's SFTTrainer.compute_loss runs "
                    f"with fused_lm_head=True, and this training step ran none: the installed trl {trl.__version__} "
                    f"computes the loss differently from trl {TESTED_VERSIONS['trl']}, which MSSRTrainer was tested "
                    "with. Install that version, or update MSSRTrainer.compute_loss"
                )
            self._observe(ids, tap.output)
        return result

    def _observe(self, ids: torch.Tensor, output) -> None:
        with self._bookkeeping():
            nll = -output.log_probs.detach().double()  # (B, T-1), 0 where the label is ignored
            tokens = output.label_mask.sum(-1)  # (B,)
            losses = torch.where(tokens > 0, nll.sum(-1) / tokens.clamp(min=1), torch.nan)  # (B,)
            ids, losses = self.accelerator.gather(ids), self.accelerator.gather(losses)  # same on every rank
            ids, losses = ids.cpu(), losses.cpu()
            step = self.step_offset + self.state.global_step + 1  # the optimizer step this micro-batch belongs to
        for listener in self.exposure_listeners:
            listener(self.memory, ids, losses, step)
        with self._bookkeeping():
            self.memory.expose(ids, losses, step)  # observe, then review the finite ones

    # ------------------------------------------------------------------ logging

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        # Replay and memory statistics join the trainer's own logs (so tensorboard / wandb get them), and its summary
        # (which a train() call resumed at the last step logs with the model still in eval mode).
        if (self.model.training or "train_loss" in logs) and self._stage_started:
            logs.update(self.replay_stats())
        # The parent's summary train_loss averages the steps of this train() call only (0.0 when it resumed at the last
        # step): after a resume, make it the mean over every step of the run whose loss was logged.
        if "train_loss" in logs and self._resumed_losses is not None:
            resumed_step, loss_sum, logged_steps = self._resumed_losses
            trained = self.state.global_step - resumed_step
            if logged_steps + trained > 0:
                logs["train_loss"] = (loss_sum + logs["train_loss"] * trained) / (logged_steps + trained)
        super().log(logs, start_time)

    def replay_stats(self) -> dict[str, float]:
        step = self.step_offset + self.state.global_step
        stats = {
            log_keys.REPLAY_RATIO: self.last_ratio,
            log_keys.REPLAY_REPLAYED_SAMPLES: self.counters["replayed_samples"],
            log_keys.REPLAY_REPLAY_STEPS: self.counters["replay_steps"],
            log_keys.REPLAY_PROBE_SECONDS: round(self.counters["probe_seconds"], 4),
            log_keys.REPLAY_EVAL_SECONDS: round(self.counters["eval_seconds"], 4),
            log_keys.REPLAY_BOOKKEEPING_SECONDS: round(self.counters["bookkeeping_seconds"], 4),
            log_keys.MEMORY_SKIPPED_LOSSES: self.memory.skipped_losses,
        }
        if isinstance(self.strategy, IntervalReplay):
            upcoming = [t for t in self.strategy.replay_steps() if t > self.state.global_step]
            if upcoming:
                stats[log_keys.REPLAY_STEPS_TO_NEXT] = upcoming[0] - self.state.global_step
        if self.bank_ids.numel():
            summary = self.memory.summary(self.bank_ids, max(step, self.memory.clock))
            if self.memory.forgetting.scores[0] > 0:
                summary.update(self.memory.forgetting.calibration())
            stats.update({log_keys.memory_key(k): round(v, 6) for k, v in summary.items()})
        return stats

    # ------------------------------------------------------------------ checkpoints

    def replay_state_dict(self) -> dict[str, Any]:
        """Memory, strategy, buffer and sampler state at the end of the current optimizer step."""
        return {
            "memory": self.memory.state_dict(),
            "strategy": self.strategy.state_dict(),
            "sampler": self.replay_sampler.state_dict(next_step=self.step_offset + self.state.global_step + 1),
            "buffer": self.buffer.clone(),
            "probe_ids": self.probe_ids.clone(),
            "generator": self.generator.get_state(),
            "step_offset": self.step_offset,
            "counters": dict(self.counters),
            "last_ratio": self.last_ratio,
            "planned": {str(step): list(plan) for step, plan in self.planned.items()},
        }

    def load_replay_state_dict(self, state: dict[str, Any]) -> None:
        self.memory.load_state_dict(state["memory"])
        self.strategy.load_state_dict(state["strategy"])
        self.buffer, self.probe_ids = state["buffer"].long(), state["probe_ids"].long()
        self.generator.set_state(state["generator"])
        self.step_offset = int(state["step_offset"])
        self.counters = {**self.counters, **state["counters"]}  # a state saved before a counter existed keeps it at 0
        self.last_ratio = float(state["last_ratio"])
        self.planned = {int(step): (float(r), int(k)) for step, (r, k) in state["planned"].items()}
        self._restored_sampler_state = state["sampler"]
        self._stage_started = True

    def train(self, resume_from_checkpoint: str | bool | None = None, *args, **kwargs):
        """As the parent's, with ``resume_from_checkpoint`` read by :func:`read_checkpoint` (an incomplete or corrupt
        checkpoint is refused, naming the file); ``True`` takes the newest complete checkpoint in ``output_dir`` and
        logs the newer ones it passed over. After a resume, the summary ``train_loss`` is the mean over every step of
        the run whose loss was logged, not only the steps of this call.
        """
        # Restore the replay state before HF builds the dataloader (works for every backend, FSDP and DeepSpeed too).
        if resume_from_checkpoint:
            path = resume_from_checkpoint
            if path is True:
                path, skipped = last_complete_checkpoint(self.args.output_dir)
                if path is None:
                    raise InputError(
                        f"resume_from_checkpoint=True but {self.args.output_dir} holds no complete checkpoint"
                        + "".join(f"; {reason}" for reason in skipped)
                    )
                for reason in skipped:
                    logger.warning(f"Resuming from {path}, not from a newer checkpoint: {reason}")
            replay_state, trainer_state = read_checkpoint(path)
            self.load_replay_state_dict(replay_state)
            self._resumed_losses = _logged_loss_sum(trainer_state)
            resume_from_checkpoint = str(path)
        output = super().train(resume_from_checkpoint, *args, **kwargs)
        return output._replace(training_loss=output.metrics.get("train_loss", output.training_loss))

    def save_replay_state(self, checkpoint: str) -> None:
        """Write :meth:`replay_state_dict` into ``checkpoint`` (the folder the parent just saved; called on save), then
        :data:`COMPLETE_NAME` with the size of every file in the folder, which marks the checkpoint complete."""
        if not os.path.isdir(checkpoint):
            raise RuntimeError(
                f"MSSRTrainer saves its replay state into the checkpoint folder {checkpoint}, but the parent trainer "
                f"wrote none there (a hyperparameter-search trial, or a transformers version other than "
                f"{TESTED_VERSIONS['transformers']} that names checkpoints differently)"
            )
        save_state(checkpoint, STATE_NAME, self.replay_state_dict())
        marker = Path(checkpoint) / COMPLETE_NAME
        temporary = marker.with_name(f".{COMPLETE_NAME}.tmp")
        temporary.write_text(json.dumps({"files": file_sizes(checkpoint, skip=(COMPLETE_NAME,))}, indent=1))
        os.replace(temporary, marker)


def _logged_loss_sum(trainer_state: dict[str, Any]) -> tuple[int, float, int]:
    """(the checkpoint's step, the sum of its steps' logged training losses, how many steps they cover): each logged
    ``loss`` is the mean over the steps since the previous log."""
    step, total, covered = int(trainer_state["global_step"]), 0.0, 0
    for entry in trainer_state.get("log_history", []):
        if "loss" in entry and covered < entry["step"] <= step:
            total += entry["loss"] * (entry["step"] - covered)
            covered = entry["step"]
    return step, total, covered
