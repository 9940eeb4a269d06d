"""ContinualRunner: train one model on a sequence of tasks with MSSR replay, evaluate, save and publish each stage.

The recipe, for each task in order:

1. build an :class:`~mssr_hf.mssr_trainer.MSSRTrainer` with the task, the bank of earlier tasks' samples and the
   carried :class:`~mssr_hf.memory.SampleMemory` (and replay strategy);
2. train (resuming from the stage's last checkpoint if a previous run was interrupted);
3. evaluate every task seen so far (and the probe task);
4. save the stage: adapter (or model), tokenizer, memory and strategy state, metrics, model card; update
   ``results.json`` and the plots; push the stage to the Hub if asked;
5. add the task's samples to the bank.

One adapter is trained continuously across stages: the adapter saved after stage k holds everything learned up to k.
Rerunning the same command on the same output directory skips finished stages and resumes an unfinished one from its
newest complete checkpoint; a changed configuration in that directory is refused once it holds a finished stage or a
complete checkpoint. Everything a run reads is checked before it writes anything. Under several processes only the
main process writes.

What survives an interruption (``kill -9`` included): a checkpoint counts only once MSSRTrainer has written its
completion record, last (:func:`~mssr_hf.mssr_trainer.last_complete_checkpoint`), and a stage only once its
``metrics.json``, written last with the size of every other file of the stage, is there (:func:`mssr_hf.layout.
stage_problem`). A stage whose files are missing, truncated or unreadable runs again from its last complete
checkpoint, and so does every later stage (the same results: every stage is deterministic given the one before).
A stage's Hub push is recorded apart (``published.json``); a failed push is tried again after every later stage and on
every rerun, and ``run`` ends with :class:`UnpublishedStagesError` while a finished stage is unpublished.

The run folder's file names and stage folders are those of :mod:`mssr_hf.layout`; :meth:`ContinualRunner.load_stage`
reads a finished stage back.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelerate import PartialState
from accelerate.utils import gather_object
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel
from transformers.trainer import TRAINING_ARGS_NAME

from . import cl_metrics, layout
from .errors import InputError
from .evaluation import evaluate_task
from .memory import SampleMemory
from .mssr_config import MSSRConfig, memory_from_config, strategy_from_config
from .mssr_trainer import MSSRTrainer, last_complete_checkpoint
from .progress import StageProgressBar
from .scheduler import ReplayStrategy
from .state_io import file_sizes, has_state, load_state, save_state, state_digest
from .tasks import TaskLike, TaskSpec, get_sequence, get_task
from .tasks.spec import hub_dataset_id, truncate_keeping_answer
from .tracking import StageReporter, stage_logs

logger = logging.getLogger(__name__)

# TrainingArguments fields that do not change what a run computes (excluded from the config hash).
_NOT_RESULT_FIELDS = {
    "output_dir", "logging_dir", "run_name", "report_to", "disable_tqdm", "logging_steps", "logging_strategy",
    "save_steps", "save_strategy", "save_total_limit", "push_to_hub", "hub_model_id", "hub_token",
    "hub_private_repo", "hub_strategy", "overwrite_output_dir", "resume_from_checkpoint", "dataloader_num_workers",
    "logging_first_step", "log_level", "log_level_replica", "local_rank", "hub_always_push", "hub_revision",
}  # fmt: skip


class UnpublishedStagesError(RuntimeError):
    """Raised by :meth:`ContinualRunner.run` with ``push_to_hub`` when every stage finished but some are not published
    (rerunning the same command publishes them).

    Attributes:
        results (`dict`): the run's results, as ``run`` would have returned them.
        stages (`list[str]`): the folder names (Hub branches) of the finished stages that are not published.
    """

    def __init__(self, repo_id: str, stages: list[str], errors: list[str], results: dict[str, Any]):
        self.results, self.stages = results, stages
        cause = f" Last error: {errors[-1]}" if errors else ""
        super().__init__(
            f"{len(stages)} finished stage(s) not published to the Hub repo {repo_id!r}: {', '.join(stages)}. "
            f"Rerun the same command to publish them.{cause}"
        )


@dataclasses.dataclass
class SavedStage:
    """What a finished stage saved, read back by :meth:`ContinualRunner.load_stage` (the folder's layout is in
    :mod:`mssr_hf.layout`).

    Args:
        stage (`int`), task (`str`): which stage.
        path (`Path`): the stage's folder: the adapter (or the full model) and the tokenizer, for ``from_pretrained``
            (with ``peft_config``, ``PeftModel.from_pretrained(base, path)``), and the model card.
        metrics (`dict`): the stage's record (``metrics.json``): its training counts, logs and row of scores, and the
            size of each file of the stage (``files``).
        results (`dict`): the run's results as they stood after this stage (rows and records up to it, and their
            summary metrics), as ``results.json`` held them then.
        memory (`SampleMemory`): the replay memory the next stage starts from.
        strategy (`ReplayStrategy`, *optional*): the replay strategy's state the next stage continues (None after the
            first stage, which does not replay).
    """

    stage: int
    task: str
    path: Path
    metrics: dict[str, Any]
    results: dict[str, Any]
    memory: SampleMemory
    strategy: ReplayStrategy | None


class ContinualRunner:
    """Runs a task sequence with one strategy and writes one directory per stage plus ``results.json``.

    Args:
        model (`str` or `PreTrainedModel`): the base model (a path or Hub id is loaded with ``model_init_kwargs``;
            ``trust_remote_code`` stays off unless you set it there).
        tasks (`Sequence[str | TaskSpec | dict]` or `str`): task names, specs, declarations (mappings of
            `mssr_hf.tasks.TASK_KEYS`, as in a YAML config), or a sequence name (see `mssr_hf.tasks`).
        args (`MSSRConfig`): training and replay settings shared by every stage; ``output_dir`` is the run's root.
            ``push_to_hub`` / ``hub_model_id`` publish each finished stage (see :mod:`mssr_hf.hub`).
        tokenizer (*optional*): defaults to the model's.
        peft_config (`peft.PeftConfig`, *optional*): the adapter trained across all stages (None: full fine-tuning).
        probe_task (`str | TaskSpec | dict`, *optional*): evaluated after every stage, never trained (e.g. `mmlu`).
        eval_size (`int`, *optional*, defaults to `100`): evaluation examples per task (None: all).
        train_size (`int`, *optional*): training examples per task (None: all).
        eval_batch_size (`int`, *optional*, defaults to `16`): generation batch size.
        accuracy_eval_size (`int`, *optional*, defaults to `32`): validation examples per earlier task that the
            `accuracy` strategy evaluates during training.
        model_init_kwargs (`dict`, *optional*): keyword arguments for ``from_pretrained`` when ``model`` is a str,
            on top of ``args.model_init_kwargs`` (a ``dtype`` or ``torch_dtype`` may be a name such as "bfloat16").
        callbacks (`list[TrainerCallback]`, *optional*): passed to every stage's trainer.
        exposure_listeners (`list[Callable]`, *optional*): passed to every stage's trainer (see `MSSRTrainer`).
        progress_label (`str`, *optional*): show one progress bar per stage, ``"<label> · stage k/n · <task>"``, in
            place of the trainer's progress bar and printed logs, which still go to the ``report_to`` trackers and
            to ``results.json`` (:mod:`mssr_hf.progress`). None: the trainers' own output.
        hub_api (*optional*): a `huggingface_hub.HfApi`-like client for publishing (tests pass a stand-in).
    """

    def __init__(
        self,
        model: str | PreTrainedModel,
        tasks: Sequence[TaskLike] | TaskLike,
        args: MSSRConfig,
        *,
        tokenizer=None,
        peft_config=None,
        probe_task: TaskLike | None = None,
        eval_size: int | None = 100,
        train_size: int | None = None,
        eval_batch_size: int = 16,
        accuracy_eval_size: int = 32,
        model_init_kwargs: dict[str, Any] | None = None,
        callbacks: list | None = None,
        exposure_listeners: list | None = None,
        progress_label: str | None = None,
        hub_api=None,
    ):
        self.tasks = get_sequence(tasks)
        if not self.tasks:
            raise InputError("tasks: give at least one task")
        names = [t.name for t in self.tasks]
        if len(set(names)) != len(names):
            raise InputError(f"tasks: each task may appear once in a sequence, got {names}")
        self.probe = get_task(probe_task, "probe_task") if probe_task is not None else None
        if args.push_to_hub and not args.hub_model_id:
            raise InputError("push_to_hub needs a repo: set hub_model_id (e.g. --hub_model_id me/my-mssr-run)")
        self.args = args
        self.output_dir = Path(args.output_dir)
        self.model_init_kwargs = model_init_arguments({**(args.model_init_kwargs or {}), **(model_init_kwargs or {})})
        self.base_model = model
        self.model_name = model if isinstance(model, str) else getattr(model.config, "_name_or_path", "") or "model"
        self.tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(self.model_name)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.peft_config = peft_config
        self.eval_size, self.train_size = eval_size, train_size
        self.eval_batch_size, self.accuracy_eval_size = eval_batch_size, accuracy_eval_size
        self.hub_api = hub_api
        self.callbacks = list(callbacks or [])
        self.exposure_listeners = list(exposure_listeners or [])
        self.progress_label = progress_label
        self.state = PartialState()
        self.publish_errors: dict[int, str] = {}  # stage -> why its last push failed (main process)

    # ------------------------------------------------------------------ the recipe

    def run(self) -> dict[str, Any]:
        """Train, evaluate and save every stage; returns the results (also in ``output_dir/results.json``).

        After each stage, the stage's scores and the running forgetting / BWT go to the ``report_to`` trackers at
        the stage's last global step, with the plots (:mod:`mssr_hf.tracking`).

        Raises:
            `InputError`: bad input (a task's rows, the output folder, a configuration changed since this folder's
                run saved something), before anything is written.
            `UnpublishedStagesError`: with ``push_to_hub``, after every stage finished, if a stage could not be
                published (it carries the results).
        """
        data = self._prepare_data()
        probe_eval = self.probe.load(0, self.eval_size)[1] if self.probe is not None else None
        self._check_output_dir()
        self._check_or_record_config()
        results = self._load_results()
        results["eval_sizes"] = [len(evaluation) for _, evaluation in data]  # for the scores' standard errors
        model, memory, strategy = None, None, None
        # The earlier tasks' rows: tokenized by the stage that trained them (each task is tokenized once), and raw for
        # the finished stages a rerun skips (the next stage's trainer tokenizes those).
        bank: list[Dataset] = []
        reporter = StageReporter(self.args)

        running = False  # from the first stage that has to run, every later stage runs too (results grow in order)
        for stage, (train, _) in enumerate(data):
            saved = None if running else self._finished_stage(stage)
            if saved is not None:
                memory, strategy = saved.memory, saved.strategy
                bank.append(train)
                continue
            if not running:
                self._publish_finished()  # what earlier runs finished but could not publish
                running = True
            if model is None:
                model = self._model_after(stage - 1)

            progress = self._progress_bar(stage)
            trainer = self._stage_trainer(stage, model, train, bank or None, memory, strategy, data, progress)
            start = time.perf_counter()
            trainer.train(resume_from_checkpoint=self._resume_point(stage))
            train_seconds = time.perf_counter() - start
            model, memory = trainer.model, trainer.memory
            if stage > 0:
                strategy = trainer.strategy

            if progress is not None:
                progress.show(f"scoring {stage + 1} task{'s' if stage else ''}")
            scores = {t.name: self._evaluate(model, t, data[i][1]) for i, t in enumerate(self.tasks[: stage + 1])}
            probe_score = self._evaluate(model, self.probe, probe_eval) if self.probe is not None else None
            results = self._record_stage(results, stage, scores, probe_score, trainer, train_seconds)
            plots = self._save_stage(stage, trainer, memory, strategy, results)
            reporter.log_stage(trainer.step_offset + trainer.state.global_step, stage_logs(results, stage), plots,
                               model=model)  # fmt: skip
            self._publish_finished()
            if progress is not None:
                progress.show(f"scored {stage + 1} task{'s' if stage else ''}")
                progress.close()
            bank = [trainer.next_replay_dataset()]
        reporter.close()
        if not running:
            self._publish_finished()
        self._raise_if_unpublished(results)
        return results

    # ------------------------------------------------------------------ checks before anything is written

    def _prepare_data(self) -> list[tuple[Dataset, Dataset]]:
        """Each task's (training rows fitted into ``max_length``, with their memory ids; evaluation rows), all loaded
        and checked before the run writes anything. Training rows keep only what training reads (the prompt and
        completion, or the messages), so that tasks of different columns share one replay bank."""
        data, next_id = [], 0
        num_proc = self.args.dataset_num_proc
        for task in self.tasks:
            train, evaluation = task.load(self.train_size, self.eval_size, num_proc=num_proc)
            if train is None:
                raise InputError(f"task {task.name!r} has no training rows (train_size={self.train_size})")
            train = train.remove_columns([c for c in ("reference", "choices") if c in train.column_names])
            train = truncate_keeping_answer(train, self.tokenizer, self.args.max_length, num_proc=num_proc)
            train = train.add_column(self.args.replay_id_column, list(range(next_id, next_id + len(train))))
            next_id += len(train)
            data.append((train, evaluation))
        return data

    def _check_output_dir(self) -> None:
        """``output_dir`` must be a folder this process can write to (created if missing)."""
        path = self.output_dir
        if path.exists() and not path.is_dir():
            raise InputError(f"output_dir {path} is a file, not a folder: give another output_dir")
        try:
            path.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError as error:
            raise InputError(f"output_dir {path} cannot be written to: {error.strerror or error}") from error

    # ------------------------------------------------------------------ one stage

    def _progress_bar(self, stage: int) -> StageProgressBar | None:
        if self.progress_label is None:
            return None
        where = f"stage {stage + 1}/{len(self.tasks)} · {self.tasks[stage].name}"
        return StageProgressBar(f"{self.progress_label} · {where}")

    def _stage_trainer(self, stage, model, train, bank, memory, strategy, data, progress=None) -> MSSRTrainer:
        """The stage's trainer: no replay on the first task (nothing to replay), the carried strategy after; with
        ``progress``, that bar is the trainer's only output."""
        first = stage == 0
        stage_args = dataclasses.replace(
            self.args,
            output_dir=str(self.stage_dir(stage) / layout.CHECKPOINTS),
            replay_strategy="none" if first else self.args.replay_strategy,
            push_to_hub=False,  # stages are published by the runner, not by every checkpoint
            hub_token=None,  # used for the push only: the trainer saves its arguments in every checkpoint
            model_init_kwargs=None,  # the runner loads the model (with them); the trainer receives it loaded
        )
        if not first and strategy is None:
            strategy = strategy_from_config(stage_args)
        earlier = [(t, d[1].select(range(min(self.accuracy_eval_size, len(d[1]))))) for t, d in zip(self.tasks, data)]
        earlier = earlier[:stage]

        def evaluate_earlier(m) -> dict[str, float]:
            return {t.name: self._evaluate(m, t, rows) for t, rows in earlier}

        trainer = MSSRTrainer(
            model, stage_args, train_dataset=train, replay_dataset=bank, processing_class=self.tokenizer,
            memory=memory, strategy=None if first else strategy,
            evaluate_fn=evaluate_earlier if stage_args.replay_strategy == "accuracy" else None,
            peft_config=self.peft_config if first else None, callbacks=self.callbacks,
            exposure_listeners=self.exposure_listeners,
        )  # fmt: skip
        if progress is not None:
            progress.replace_trainer_output(trainer)
            trainer.add_callback(progress)
        return trainer

    def _evaluate(self, model, task: TaskSpec, examples: Dataset) -> float:
        # Under a stage's progress bar (progress_label), the evaluation shows no bar of its own.
        return evaluate_task(model, self.tokenizer, task, examples, self.eval_batch_size, self.args.max_length,
                             progress=self.progress_label is None)  # fmt: skip

    def _resume_point(self, stage: int) -> str | None:
        """The stage's newest complete checkpoint (None: start the stage); newer incomplete ones are logged."""
        checkpoint, skipped = last_complete_checkpoint(self.stage_dir(stage) / layout.CHECKPOINTS)
        for reason in skipped:
            where = f"resumes from {checkpoint}" if checkpoint else "starts from its beginning"
            logger.warning(f"Stage {stage} ({self.tasks[stage].name}) {where}, passing over: {reason}")
        return checkpoint

    def _record_stage(self, results, stage, scores, probe_score, trainer: MSSRTrainer, seconds) -> dict[str, Any]:
        names = [t.name for t in self.tasks]
        row = [scores.get(name) for name in names]  # None: not seen yet
        results["matrix"] = results["matrix"][:stage] + [row]
        results["probe"] = results["probe"][:stage] + [probe_score]
        results["stages"] = results["stages"][:stage] + [
            {
                "stage": stage,
                "task": names[stage],
                "strategy": trainer.strategy.name,
                "train_seconds": round(seconds, 3),
                "steps": trainer.state.global_step,
                "replayed_samples": trainer.counters["replayed_samples"],
                "replay_steps": trainer.counters["replay_steps"],
                "probe_seconds": round(trainer.counters["probe_seconds"], 3),
                "eval_seconds": round(trainer.counters["eval_seconds"], 3),
                "step_offset": trainer.step_offset,
                "processes": trainer.args.world_size,
                "memory_sha256": self._memory_digests(trainer.memory),
                "log_history": trainer.state.log_history,
            }
        ]
        return _results_after(results, stage)

    def _memory_digests(self, memory: SampleMemory) -> list[str]:
        """The SHA-256 of the memory's state on each process, in rank order (all equal: every rank holds the same
        memory)."""
        digests = [state_digest(memory.state_dict())]
        if self.state.num_processes > 1:
            digests = gather_object(digests)
        if len(set(digests)) > 1:
            logger.warning(f"The processes hold different replay memories (SHA-256 per rank: {digests})")
        return digests

    def _save_stage(self, stage, trainer: MSSRTrainer, memory: SampleMemory, strategy, results) -> list[Path]:
        """Write the stage's folder (``metrics.json`` last), ``results.json`` and the plots; returns the plots."""
        from .hub import write_model_card

        stage_dir = self.stage_dir(stage)
        if self.state.is_main_process:
            # The stage reads as unfinished while its files are (re)written: metrics.json, written last, finishes it.
            (stage_dir / layout.STAGE_METRICS).unlink(missing_ok=True)
            self._forget_published(stage)
        self.state.wait_for_everyone()
        save_weights(trainer, stage_dir)  # on every rank: FSDP and DeepSpeed ZeRO-3 gather the weights from all
        plots = []
        if self.state.is_main_process:
            (stage_dir / TRAINING_ARGS_NAME).unlink(missing_ok=True)  # a pickle; run_config.json has the arguments
            save_state(stage_dir, layout.MEMORY_STATE, memory.state_dict())
            if strategy is not None:
                save_state(stage_dir, layout.STRATEGY_STATE, strategy.state_dict())
            write_model_card(stage_dir, self._card_info(stage, results))
            _write_json(self.output_dir / layout.RESULTS, results)
            plots = render_plots_if_installed(self.output_dir, results)
            # Written last, with the size of every other file: its presence marks the stage as finished.
            record = {"stage": stage, **results["stages"][stage], "scores": results["matrix"][stage],
                      "files": file_sizes(stage_dir, skip=(layout.CHECKPOINTS, layout.STAGE_METRICS))}  # fmt: skip
            _write_json(stage_dir / layout.STAGE_METRICS, record)
        self.state.wait_for_everyone()
        return plots

    # ------------------------------------------------------------------ publishing

    def _published(self) -> dict[str, Any]:
        path = self.output_dir / layout.PUBLISHED
        return _read_json(path) if path.is_file() else {}

    def _is_published(self, published: dict[str, Any], stage: int) -> bool:
        entry = published.get(layout.stage_name(stage, self.tasks[stage].name))
        return isinstance(entry, dict) and entry.get("repo_id") == self.args.hub_model_id

    def _forget_published(self, stage: int) -> None:
        """A stage whose files are rewritten is no longer the copy the Hub holds."""
        published = self._published()
        if published.pop(layout.stage_name(stage, self.tasks[stage].name), None) is not None:
            _write_json(self.output_dir / layout.PUBLISHED, published)

    def _publish_finished(self) -> None:
        """With ``push_to_hub``: push every finished stage not yet published to ``hub_model_id``, in stage order, and
        record each push in ``published.json``. A failed push is logged and kept in ``publish_errors``; the next call
        tries it again. A stage goes to ``main`` only if no later stage is published."""
        if not self.args.push_to_hub:
            return
        if self.state.is_main_process:
            from .hub import push_stage

            published = self._published()
            finished = [k for k in range(len(self.tasks)) if layout.is_finished(self.stage_dir(k))]
            for stage in (k for k in finished if not self._is_published(published, k)):
                task = self.tasks[stage].name
                to_main = not any(self._is_published(published, k) for k in finished if k > stage)
                try:
                    revision = push_stage(
                        self.stage_dir(stage), self.args.hub_model_id, stage, task, api=self.hub_api,
                        private=self.args.hub_private_repo, token=self.args.hub_token, main=to_main,
                        revision=self.args.hub_revision,
                    )  # fmt: skip
                except (RuntimeError, ValueError) as error:  # push_stage's errors never hold the token
                    self.publish_errors[stage] = str(error)
                    logger.warning(f"{error} (tried again after the next stage, and by a rerun)")
                    continue
                self.publish_errors.pop(stage, None)
                published[layout.stage_name(stage, task)] = {"repo_id": self.args.hub_model_id,
                                                             "revision": revision, "main": to_main}  # fmt: skip
                _write_json(self.output_dir / layout.PUBLISHED, published)
        self.state.wait_for_everyone()

    def _raise_if_unpublished(self, results: dict[str, Any]) -> None:
        if not (self.args.push_to_hub and self.state.is_main_process):
            return
        published = self._published()
        missing = [k for k in range(len(self.tasks)) if not self._is_published(published, k)]
        if missing:
            names = [layout.stage_name(k, self.tasks[k].name) for k in missing]
            errors = [self.publish_errors[k] for k in missing if k in self.publish_errors]
            raise UnpublishedStagesError(self.args.hub_model_id, names, errors, results)

    # ------------------------------------------------------------------ reading a stage back, resuming

    def stage_dir(self, stage: int) -> Path:
        """The folder of stage ``stage`` (:func:`mssr_hf.layout.stage_dir`)."""
        return layout.stage_dir(self.output_dir, stage, self.tasks[stage].name)

    def load_stage(self, stage: int) -> SavedStage:
        """What finished stage ``stage`` saved, read back from ``output_dir``: the mirror of saving a stage, and how
        a rerun picks up the memory and strategy of the stages it skips.

        Raises:
            `ValueError`: the stage is not finished in ``output_dir``.
        """
        path = self.stage_dir(stage)
        problem = layout.stage_problem(path)
        if problem is not None:
            task = self.tasks[stage].name
            raise ValueError(f"stage {stage} ({task}) is not finished in {self.output_dir}: {problem}")
        memory = memory_from_config(self.args)
        _load_into(memory, path, layout.MEMORY_STATE)
        strategy = None
        if has_state(path, layout.STRATEGY_STATE):
            strategy = strategy_from_config(self.args)
            _load_into(strategy, path, layout.STRATEGY_STATE)
        return SavedStage(
            stage=stage, task=self.tasks[stage].name, path=path, metrics=_read_json(path / layout.STAGE_METRICS),
            results=_results_after(self._load_results(), stage), memory=memory, strategy=strategy,
        )  # fmt: skip

    def _finished_stage(self, stage: int) -> SavedStage | None:
        """What finished stage ``stage`` saved, or None when the stage has to run: not finished, or finished but a
        file of it is missing, truncated or unreadable (logged: the stage runs again from its last complete
        checkpoint)."""
        try:
            return self.load_stage(stage)
        except ValueError as error:
            if (self.stage_dir(stage) / layout.STAGE_METRICS).is_file():
                logger.warning(f"{error}; the stage runs again from its last complete checkpoint")
            return None

    def _model_after(self, stage: int):
        """The model as it was after ``stage`` (-1: the base model)."""
        base = self.base_model
        if isinstance(base, str):
            base = AutoModelForCausalLM.from_pretrained(base, **self.model_init_kwargs)
        if stage < 0:
            return base
        stage_dir = self.stage_dir(stage)
        if self.peft_config is not None:
            from peft import PeftModel

            return PeftModel.from_pretrained(base, str(stage_dir), is_trainable=True)
        return AutoModelForCausalLM.from_pretrained(str(stage_dir), **self.model_init_kwargs)

    def _load_results(self) -> dict[str, Any]:
        path = self.output_dir / layout.RESULTS
        if path.is_file():
            return _read_json(path)
        return {
            "tasks": [t.name for t in self.tasks], "probe_task": self.probe.name if self.probe else None,
            "strategy": self.args.replay_strategy, "model": self.model_name, "matrix": [], "probe": [],
            "metrics": {}, "stages": [], "eval_sizes": [],
        }  # fmt: skip

    def run_config(self) -> dict[str, Any]:
        """Everything that decides what this run computes (hashed to refuse a changed config on rerun)."""
        training = {k: v for k, v in self.args.to_dict().items() if k not in _NOT_RESULT_FIELDS}
        return {
            "model": self.model_name, "tasks": [_task_record(t) for t in self.tasks],
            "probe_task": _task_record(self.probe) if self.probe else None, "eval_size": self.eval_size,
            "train_size": self.train_size, "peft": _jsonable(self.peft_config.to_dict()) if self.peft_config else None,
            "training": _jsonable(training),
        }  # fmt: skip

    def _check_or_record_config(self) -> None:
        """Record the run's configuration, or check it against the one recorded. A changed configuration is refused
        once the folder holds something a rerun continues from (a finished stage or a complete checkpoint); before
        that, the new one replaces it, and the stage folders (nothing in them to resume from) are removed."""
        config = self.run_config()
        digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()
        path = self.output_dir / layout.RUN_CONFIG
        # Every process reads the folder before the main process changes it, and all pass the same barriers.
        self.state.wait_for_everyone()
        saved = _read_json(path) if path.is_file() else None
        replace = saved is not None and saved.get("hash") != digest
        if replace:
            changed = ", ".join(_diff(saved.get("config", {}), config))
            if self._holds_saved_work():
                raise InputError(
                    f"{self.output_dir} holds a run with a different configuration (changed: {changed}); "
                    "use a new output_dir, or rerun with the original settings to resume"
                )
            logger.warning(f"{self.output_dir} holds no finished stage and no complete checkpoint: its configuration "
                           f"is replaced (changed: {changed})")  # fmt: skip
        self.state.wait_for_everyone()
        if self.state.is_main_process and (saved is None or replace):
            for folder in layout.stage_folders(self.output_dir) if replace else []:
                shutil.rmtree(folder)
            _write_json(path, {"hash": digest, "config": config})
        self.state.wait_for_everyone()

    def _holds_saved_work(self) -> bool:
        """Whether the run folder holds something a rerun would continue from: a stage's ``metrics.json`` or a
        complete checkpoint."""
        return any(
            (folder / layout.STAGE_METRICS).is_file() or last_complete_checkpoint(folder / layout.CHECKPOINTS)[0]
            for folder in layout.stage_folders(self.output_dir)
        )

    def _card_info(self, stage: int, results: dict[str, Any]) -> dict[str, Any]:
        import peft
        import transformers
        import trl

        from .version import __version__

        versions = {"mssr_hf": __version__, "transformers": transformers.__version__, "trl": trl.__version__}
        if self.peft_config is not None:
            versions["peft"] = peft.__version__
        specs = [*self.tasks, *([self.probe] if self.probe is not None else [])]
        return {
            "base_model": self.model_name, "stage": stage, "task": self.tasks[stage].name,
            "task_description": self.tasks[stage].description, "tasks": [t.name for t in self.tasks],
            "strategy": self.args.replay_strategy, "peft": self.peft_config is not None,
            "hyperparameters": self.run_config()["training"], "matrix": results["matrix"], "probe": results["probe"],
            "probe_task": self.probe.name if self.probe else None, "metrics": results["metrics"],
            "repo_id": self.args.hub_model_id if self.args.push_to_hub else None,
            "latest_revision": self.args.hub_revision or "main", "versions": versions,
            "task_specs": [{"dataset": hub_dataset_id(t.source), "subset": t.subset,
                            "split": t.eval_split or t.train_split, "metric": t.metric} for t in specs],
        }  # fmt: skip


def model_init_arguments(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``from_pretrained`` keyword arguments with ``torch_dtype`` given its current name, ``dtype``, and a dtype's name
    ("bfloat16") made a ``torch.dtype``.

    Raises:
        `InputError`: both ``dtype`` and ``torch_dtype``, or a name that is no torch dtype.
    """
    import torch

    kwargs = dict(kwargs)
    if "torch_dtype" in kwargs:
        if "dtype" in kwargs:
            raise InputError("model_init_kwargs: give dtype or torch_dtype (its older name), not both")
        kwargs["dtype"] = kwargs.pop("torch_dtype")
    dtype = kwargs.get("dtype")
    if isinstance(dtype, str) and dtype != "auto":
        if not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise InputError(f"dtype {dtype!r} is not a torch dtype (e.g. bfloat16, float16, float32, or auto)")
        kwargs["dtype"] = getattr(torch, dtype)
    return kwargs


def save_weights(trainer: MSSRTrainer, directory: Path) -> None:
    """``trainer.save_model(directory)``, called on every process: it gathers the weights that FSDP and DeepSpeed
    ZeRO-3 shard, and the main process writes them (with the tokenizer and, for an adapter, PEFT's model card). FSDP
    gathers them only into a full state dict, so a run configured for sharded checkpoints switches to it for this
    save."""
    plugin = trainer.accelerator.state.fsdp_plugin if trainer.is_fsdp_enabled else None
    previous = plugin.state_dict_type if plugin is not None else None
    if plugin is not None:
        plugin.set_state_dict_type("FULL_STATE_DICT")
    try:
        trainer.save_model(str(directory))
    finally:
        if plugin is not None:
            plugin.set_state_dict_type(previous)


def render_plots_if_installed(output_dir: Path, results: dict[str, Any]) -> list[Path]:
    """The run's plots (:func:`mssr_hf.plotting.render_plots`), or none when matplotlib is not installed (the
    ``plots`` extra): the run goes on without them, and says so once."""
    try:
        from .plotting import render_plots
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] != "matplotlib":
            raise
        if not _PLOTS_SKIPPED:
            logger.warning('matplotlib is not installed: the run writes no plots (pip install "mssr-hf[plots]")')
            _PLOTS_SKIPPED.append(True)
        return []
    return render_plots(output_dir, results)


_PLOTS_SKIPPED: list[bool] = []  # whether the missing-matplotlib note was given (once per process)


def _task_record(task: TaskSpec) -> str | dict[str, Any]:
    """How ``run_config.json`` records a task: its declaration for a declared task (so a changed format or dataset
    is a changed configuration, and ``mssr-hf eval`` can load it again), else its name."""
    return _jsonable(task.metadata["declaration"]) if "declaration" in task.metadata else task.name


def _results_after(results: dict[str, Any], stage: int) -> dict[str, Any]:
    """``results`` as they stood after ``stage``: the rows and stage records up to it and their summary metrics,
    NaN written as None (as ``results.json`` holds them)."""
    results = {**results, **{key: results[key][: stage + 1] for key in ("matrix", "probe", "stages")}}
    results["metrics"] = cl_metrics.summarize([row[: i + 1] for i, row in enumerate(results["matrix"])])
    return _finite_or_none(results)


def _load_into(target: SampleMemory | ReplayStrategy, directory: Path, name: str) -> None:
    """``target.load_state_dict`` of the state saved as ``name`` in ``directory``; an unreadable or incomplete state
    raises a ValueError naming its file."""
    state = load_state(directory, name)  # names the file itself
    try:
        target.load_state_dict(state)
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        raise ValueError(
            f"{directory / name}.json does not hold a complete state: {type(error).__name__}: {error}"
        ) from error


def _read_json(path: Path) -> Any:
    """The JSON in ``path``; a file that is not JSON raises a ValueError naming it."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} cannot be read: {type(error).__name__}: {error}") from error


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _diff(old: dict, new: dict, prefix: str = "") -> list[str]:
    keys = sorted(set(old) | set(new))
    out = []
    for key in keys:
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _diff(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return out


def _finite_or_none(value: Any) -> Any:
    """NaN/inf become None, so the JSON we write is standard JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(v) for v in value]
    return value


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(_finite_or_none(value), indent=1, default=str, allow_nan=False))
    os.replace(tmp, path)
