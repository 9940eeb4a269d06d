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
Rerunning the same command on the same output directory skips finished stages and resumes an unfinished one; a
changed configuration in that directory is refused. Under several processes only the main process writes.

The run folder's file names and stage folders are those of :mod:`mssr_hf.layout`; :meth:`ContinualRunner.load_stage`
reads a finished stage back.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelerate import PartialState
from datasets import Dataset, concatenate_datasets
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel
from transformers.trainer_utils import get_last_checkpoint

from . import cl_metrics, layout
from .evaluation import evaluate_task
from .memory import SampleMemory
from .mssr_config import MSSRConfig, memory_from_config, strategy_from_config
from .mssr_trainer import MSSRTrainer
from .scheduler import ReplayStrategy
from .state_io import has_state, load_state, save_state
from .tasks import TaskSpec, get_sequence
from .tasks.spec import truncate_keeping_answer

# TrainingArguments fields that do not change what a run computes (excluded from the config hash).
_NOT_RESULT_FIELDS = {
    "output_dir", "logging_dir", "run_name", "report_to", "disable_tqdm", "logging_steps", "logging_strategy",
    "save_steps", "save_strategy", "save_total_limit", "push_to_hub", "hub_model_id", "hub_token",
    "hub_private_repo", "hub_strategy", "overwrite_output_dir", "resume_from_checkpoint", "dataloader_num_workers",
    "logging_first_step", "log_level", "log_level_replica", "local_rank", "hub_always_push", "hub_revision",
}  # fmt: skip


@dataclasses.dataclass
class SavedStage:
    """What a finished stage saved, read back by :meth:`ContinualRunner.load_stage` (the folder's layout is in
    :mod:`mssr_hf.layout`).

    Args:
        stage (`int`), task (`str`): which stage.
        path (`Path`): the stage's folder: the adapter (or the full model) and the tokenizer, for ``from_pretrained``
            (with ``peft_config``, ``PeftModel.from_pretrained(base, path)``), and the model card.
        metrics (`dict`): the stage's record (``metrics.json``): its training counts, logs and row of scores.
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
        tasks (`Sequence[str | TaskSpec]` or `str`): task names, specs, or a sequence name (see `mssr_hf.tasks`).
        args (`MSSRConfig`): training and replay settings shared by every stage; ``output_dir`` is the run's root.
            ``push_to_hub`` / ``hub_model_id`` publish each finished stage (see :mod:`mssr_hf.hub`).
        tokenizer (*optional*): defaults to the model's.
        peft_config (`peft.PeftConfig`, *optional*): the adapter trained across all stages (None: full fine-tuning).
        probe_task (`str | TaskSpec`, *optional*): evaluated after every stage, never trained (e.g. `mmlu`).
        eval_size (`int`, *optional*, defaults to `100`): evaluation examples per task (None: all).
        train_size (`int`, *optional*): training examples per task (None: all).
        eval_batch_size (`int`, *optional*, defaults to `16`): generation batch size.
        accuracy_eval_size (`int`, *optional*, defaults to `32`): validation examples per earlier task that the
            `accuracy` strategy evaluates during training.
        model_init_kwargs (`dict`, *optional*): keyword arguments for ``from_pretrained`` when ``model`` is a str.
        callbacks (`list[TrainerCallback]`, *optional*): passed to every stage's trainer.
        exposure_listeners (`list[Callable]`, *optional*): passed to every stage's trainer (see `MSSRTrainer`).
        hub_api (*optional*): a `huggingface_hub.HfApi`-like client for publishing (tests pass a stand-in).
    """

    def __init__(
        self,
        model: str | PreTrainedModel,
        tasks: Sequence[str | TaskSpec] | str,
        args: MSSRConfig,
        *,
        tokenizer=None,
        peft_config=None,
        probe_task: str | TaskSpec | None = None,
        eval_size: int | None = 100,
        train_size: int | None = None,
        eval_batch_size: int = 16,
        accuracy_eval_size: int = 32,
        model_init_kwargs: dict[str, Any] | None = None,
        callbacks: list | None = None,
        exposure_listeners: list | None = None,
        hub_api=None,
    ):
        self.tasks = get_sequence(tasks)
        if not self.tasks:
            raise ValueError("tasks: give at least one task")
        names = [t.name for t in self.tasks]
        if len(set(names)) != len(names):
            raise ValueError(f"tasks: each task may appear once in a sequence, got {names}")
        self.probe = get_sequence([probe_task])[0] if probe_task is not None else None
        self.args = args
        self.output_dir = Path(args.output_dir)
        self.model_init_kwargs = dict(model_init_kwargs or {})
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
        self.state = PartialState()

    # ------------------------------------------------------------------ the recipe

    def run(self) -> dict[str, Any]:
        """Train, evaluate and save every stage; returns the results (also in ``output_dir/results.json``)."""
        self._check_or_record_config()
        results = self._load_results()
        data = [task.load(self.train_size, self.eval_size) for task in self.tasks]
        probe_eval = self.probe.load(0, self.eval_size)[1] if self.probe is not None else None
        model, memory, strategy, bank, next_id = None, None, None, None, 0

        for stage, (train, _) in enumerate(data):
            train = truncate_keeping_answer(train, self.tokenizer, self.args.max_length)
            train = train.add_column(self.args.replay_id_column, list(range(next_id, next_id + len(train))))
            next_id += len(train)
            if layout.is_finished(self.stage_dir(stage)):
                saved = self.load_stage(stage)
                memory, strategy = saved.memory, saved.strategy
                bank = train if bank is None else concatenate_datasets([bank, train])
                continue
            if model is None:
                model = self._model_after(stage - 1)

            trainer = self._stage_trainer(stage, model, train, bank, memory, strategy, data)
            start = time.perf_counter()
            trainer.train(resume_from_checkpoint=get_last_checkpoint(str(self.stage_dir(stage) / layout.CHECKPOINTS)))
            train_seconds = time.perf_counter() - start
            model, memory = trainer.model, trainer.memory
            if stage > 0:
                strategy = trainer.strategy

            scores = {t.name: self._evaluate(model, t, data[i][1]) for i, t in enumerate(self.tasks[: stage + 1])}
            probe_score = self._evaluate(model, self.probe, probe_eval) if self.probe is not None else None
            results = self._record_stage(results, stage, scores, probe_score, trainer, train_seconds)
            self._save_stage(stage, trainer, memory, strategy, results)
            bank = train if bank is None else concatenate_datasets([bank, train])
        return results

    # ------------------------------------------------------------------ one stage

    def _stage_trainer(self, stage, model, train, bank, memory, strategy, data) -> MSSRTrainer:
        """The stage's trainer: no replay on the first task (nothing to replay), the carried strategy after."""
        first = stage == 0
        stage_args = dataclasses.replace(
            self.args,
            output_dir=str(self.stage_dir(stage) / layout.CHECKPOINTS),
            replay_strategy="none" if first else self.args.replay_strategy,
            push_to_hub=False,  # stages are published by the runner, not by every checkpoint
        )
        if not first and strategy is None:
            strategy = strategy_from_config(stage_args)
        earlier = [(t, d[1].select(range(min(self.accuracy_eval_size, len(d[1]))))) for t, d in zip(self.tasks, data)]
        earlier = earlier[:stage]

        def evaluate_earlier(m) -> dict[str, float]:
            return {t.name: evaluate_task(m, self.tokenizer, t, rows, self.eval_batch_size) for t, rows in earlier}

        return MSSRTrainer(
            model, stage_args, train_dataset=train, replay_dataset=bank, processing_class=self.tokenizer,
            memory=memory, strategy=None if first else strategy,
            evaluate_fn=evaluate_earlier if stage_args.replay_strategy == "accuracy" else None,
            peft_config=self.peft_config if first else None, callbacks=self.callbacks,
            exposure_listeners=self.exposure_listeners,
        )  # fmt: skip

    def _evaluate(self, model, task: TaskSpec, examples: Dataset) -> float:
        return evaluate_task(model, self.tokenizer, task, examples, self.eval_batch_size)

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
                "log_history": trainer.state.log_history,
            }
        ]
        return _results_after(results, stage)

    def _save_stage(self, stage, trainer: MSSRTrainer, memory: SampleMemory, strategy, results) -> None:
        from .hub import push_stage, write_model_card
        from .plotting import render_plots

        if self.state.is_main_process:
            stage_dir = self.stage_dir(stage)
            trainer.model.save_pretrained(stage_dir)
            self.tokenizer.save_pretrained(stage_dir)
            save_state(stage_dir, layout.MEMORY_STATE, memory.state_dict())
            if strategy is not None:
                save_state(stage_dir, layout.STRATEGY_STATE, strategy.state_dict())
            write_model_card(stage_dir, self._card_info(stage, results))
            _write_json(self.output_dir / layout.RESULTS, results)
            render_plots(self.output_dir, results)
            # Written last: its presence marks the stage as finished.
            _write_json(stage_dir / layout.STAGE_METRICS, {"stage": stage, **results["stages"][stage],
                                                           "scores": results["matrix"][stage]})  # fmt: skip
            if self.args.push_to_hub:
                push_stage(stage_dir, self.args.hub_model_id, stage, self.tasks[stage].name, api=self.hub_api,
                           private=self.args.hub_private_repo)  # fmt: skip
        self.state.wait_for_everyone()

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
        if not layout.is_finished(path):
            raise ValueError(f"stage {stage} ({self.tasks[stage].name}) is not finished in {self.output_dir}")
        memory = memory_from_config(self.args)
        memory.load_state_dict(load_state(path, layout.MEMORY_STATE))
        strategy = None
        if has_state(path, layout.STRATEGY_STATE):
            strategy = strategy_from_config(self.args)
            strategy.load_state_dict(load_state(path, layout.STRATEGY_STATE))
        return SavedStage(
            stage=stage, task=self.tasks[stage].name, path=path,
            metrics=json.loads((path / layout.STAGE_METRICS).read_text()),
            results=_results_after(self._load_results(), stage), memory=memory, strategy=strategy,
        )  # fmt: skip

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
            return json.loads(path.read_text())
        return {
            "tasks": [t.name for t in self.tasks], "probe_task": self.probe.name if self.probe else None,
            "strategy": self.args.replay_strategy, "model": self.model_name, "matrix": [], "probe": [],
            "metrics": {}, "stages": [],
        }  # fmt: skip

    def run_config(self) -> dict[str, Any]:
        """Everything that decides what this run computes (hashed to refuse a changed config on rerun)."""
        training = {k: v for k, v in self.args.to_dict().items() if k not in _NOT_RESULT_FIELDS}
        return {
            "model": self.model_name, "tasks": [t.name for t in self.tasks],
            "probe_task": self.probe.name if self.probe else None, "eval_size": self.eval_size,
            "train_size": self.train_size, "peft": _jsonable(self.peft_config.to_dict()) if self.peft_config else None,
            "training": _jsonable(training),
        }  # fmt: skip

    def _check_or_record_config(self) -> None:
        config = self.run_config()
        digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()
        path = self.output_dir / layout.RUN_CONFIG
        if path.is_file():
            saved = json.loads(path.read_text())
            if saved["hash"] != digest:
                changed = _diff(saved["config"], config)
                raise ValueError(
                    f"{self.output_dir} holds a run with a different configuration (changed: {', '.join(changed)}); "
                    "use a new output_dir, or rerun with the original settings to resume"
                )
            return
        if self.state.is_main_process:
            _write_json(path, {"hash": digest, "config": config})
        self.state.wait_for_everyone()

    def _card_info(self, stage: int, results: dict[str, Any]) -> dict[str, Any]:
        return {
            "base_model": self.model_name, "stage": stage, "task": self.tasks[stage].name,
            "task_description": self.tasks[stage].description, "tasks": [t.name for t in self.tasks],
            "strategy": self.args.replay_strategy, "peft": self.peft_config is not None,
            "hyperparameters": self.run_config()["training"], "matrix": results["matrix"], "probe": results["probe"],
            "probe_task": self.probe.name if self.probe else None, "metrics": results["metrics"],
        }  # fmt: skip


def _results_after(results: dict[str, Any], stage: int) -> dict[str, Any]:
    """``results`` as they stood after ``stage``: the rows and stage records up to it and their summary metrics,
    NaN written as None (as ``results.json`` holds them)."""
    results = {**results, **{key: results[key][: stage + 1] for key in ("matrix", "probe", "stages")}}
    results["metrics"] = cl_metrics.summarize([row[: i + 1] for i, row in enumerate(results["matrix"])])
    return _finite_or_none(results)


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
