"""Model cards and Hub publishing for the stages of a continual run.

Layout on the Hub: **one repo per run, one branch per stage, ``main`` = the latest finished stage.**

* Stage k of the task sequence is pushed to the branch ``stage-{k:02d}-{task}`` (see :func:`stage_revision`; the
  stage's folder has the same name, see :mod:`mssr_hf.layout`), and the same folder is pushed to ``main``. So
  ``PeftModel.from_pretrained(base, repo, revision="stage-01-gsm8k")`` loads any stage, and the default revision
  loads the latest one.
* ``ContinualRunner`` pushes each stage once it is finished and records the push in the run folder's
  ``published.json`` (:mod:`mssr_hf.layout`). A push that fails does not stop the run: every later stage's end, and
  every rerun of the same command, pushes again the finished stages not yet published (a stage goes to ``main`` only
  if no later stage is published), and the run ends with an error naming the stages still unpublished.
* Each upload mirrors the stage folder (``delete_patterns="*"``: files the folder no longer has are removed from
  that revision; the Hub always keeps ``.gitattributes``). The stage's ``checkpoints/`` are never uploaded.
* Why branches and not one repo per stage: one place to find a run, stages share the base model and tokenizer, and a
  stage is one ``revision=`` away; why not subfolders: ``from_pretrained(repo, subfolder=...)`` is less widely
  supported by downstream tools than ``revision=``.

The token comes from the ``token`` argument or the ``HF_TOKEN`` environment variable (else the cached
``huggingface-cli login``). It goes to ``HfApi(token=...)`` and nowhere else: it is never printed, logged, written to
the model card, or put in an error message.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub import HfApi

from .cl_metrics import CL_METRIC_NAMES
from .layout import CHECKPOINTS, MODEL_CARD, stage_name

__all__ = ["push_stage", "stage_revision", "write_model_card"]

CHECKPOINT_PATTERNS = [f"{CHECKPOINTS}/*", f"{CHECKPOINTS}/**"]
# Training arguments shown on the card besides every memory_* / replay_* field.
CARD_HYPERPARAMETERS = (
    "learning_rate", "max_steps", "per_device_train_batch_size", "gradient_accumulation_steps", "seed",
    "lr_scheduler_type", "warmup_ratio", "warmup_steps", "weight_decay",
)  # fmt: skip
MISSING = "–"


def stage_revision(stage: int, task: str) -> str:
    """The Hub branch of a stage, e.g. ``stage-01-gsm8k`` (also the name of the stage's output folder:
    :func:`mssr_hf.layout.stage_name`)."""
    return stage_name(stage, task)


# ------------------------------------------------------------------ model card


def write_model_card(stage_dir: str | Path, info: dict[str, Any]) -> Path:
    """Write ``stage_dir/README.md``: a Hub model card for the adapter (or model) saved after one stage.

    Args:
        stage_dir (`str` or `Path`): the stage's folder.
        info (`dict`): as built by ``ContinualRunner._card_info``: ``base_model``, ``stage``, ``task``, ``tasks``,
            ``strategy``, ``peft`` (`bool`), ``hyperparameters`` (flat dict of training arguments), ``matrix`` (rows
            of scores after each stage so far), ``probe`` and ``probe_task`` (optional), ``metrics``, and optionally
            ``task_description`` and ``repo_id``. Missing, ``None`` or NaN values are shown as "–".

    Returns:
        `Path`: the card's path.
    """
    stage, task, tasks = int(info["stage"]), str(info["task"]), [str(t) for t in info["tasks"]]
    strategy, peft = str(info["strategy"]), bool(info.get("peft"))
    front = {
        "base_model": str(info["base_model"]),
        "library_name": "peft" if peft else "transformers",
        "pipeline_tag": "text-generation",
        "tags": ["mssr", "continual-learning", "replay", "trl", "sft", strategy],
        "mssr": {"stage": stage, "task": task, "tasks": tasks, "strategy": strategy},
    }
    body = [
        f"# {front['base_model']}: stage {stage} ({task}) of a continual run with `{strategy}` replay",
        "",
        _summary_paragraph(info, stage, task, tasks, strategy, peft),
        "",
        "## How to load it",
        "",
        _loading_snippet(front["base_model"], stage_revision(stage, task), info.get("repo_id"), peft),
        "",
        "## Scores so far",
        "",
        'Score on each task after each stage (rows); "–": not trained on yet.',
        "",
        *_matrix_table(info.get("matrix") or [], tasks, info.get("probe") or [], info.get("probe_task")),
        "",
        *_metrics_list(info.get("metrics") or {}),
        "",
        "<details>",
        "<summary>Hyperparameters</summary>",
        "",
        *_hyperparameter_table(info.get("hyperparameters") or {}),
        "",
        "</details>",
        "",
        "Trained with `mssr_hf` (`MSSRTrainer`: a `trl.SFTTrainer` with MSSR replay; `ContinualRunner`).",
    ]
    text = "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n\n" + "\n".join(body) + "\n"
    path = Path(stage_dir) / MODEL_CARD
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _summary_paragraph(info, stage: int, task: str, tasks: list[str], strategy: str, peft: bool) -> str:
    what = "LoRA adapter" if peft else "model"
    description = f" ({info['task_description']})" if info.get("task_description") else ""
    if stage == 0:
        trained = f"fine-tuned on `{task}`{description}"
    else:
        learned = " → ".join(f"`{t}`" for t in tasks[: stage + 1])
        trained = f"fine-tuned continuously on {learned}, in that order (this stage: `{task}`{description})"
    return (
        f"This {what} is stage {stage} of {len(tasks)} in the task sequence {' → '.join(tasks)}: the base model was "
        f"{trained}, with the `{strategy}` replay strategy (MSSR: memory-aware adaptive replay of earlier tasks' "
        f"samples). One {what} is trained across all stages, so the {what} of stage {stage} holds everything learned "
        f"up to stage {stage}."
    )


def _loading_snippet(base_model: str, revision: str, repo_id: str | None, peft: bool) -> str:
    source = json.dumps(repo_id) if repo_id else '"path/to/this/folder"  # or the Hub repo id'
    if peft:
        lines = [
            "from peft import PeftModel",
            "from transformers import AutoModelForCausalLM",
            "",
            f"base = {json.dumps(base_model)}",
            f"repo_or_dir = {source}",
            "model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), repo_or_dir)",
            f'# this stage from the Hub: PeftModel.from_pretrained(..., repo_id, revision="{revision}")',
        ]
    else:
        lines = [
            "from transformers import AutoModelForCausalLM",
            "",
            f"repo_or_dir = {source}",
            "model = AutoModelForCausalLM.from_pretrained(repo_or_dir)",
            f'# this stage from the Hub: AutoModelForCausalLM.from_pretrained(repo_id, revision="{revision}")',
        ]
    return "\n".join(["```python", *lines, "```"])


def _matrix_table(matrix: Sequence, tasks: list[str], probe: Sequence, probe_task: str | None) -> list[str]:
    header = ["after stage", *tasks] + ([f"{probe_task} (probe)"] if probe_task else [])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|"]
    for t, row in enumerate(matrix):
        cells = [f"{t} {tasks[t] if t < len(tasks) else ''}".strip()]
        cells += [_number(row[i]) if i <= t and i < len(row) else MISSING for i in range(len(tasks))]
        if probe_task:
            cells.append(_number(probe[t]) if t < len(probe) else MISSING)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _metrics_list(values: dict[str, Any]) -> list[str]:
    explain = {
        "final_average": "mean score over the tasks seen, after this stage",
        "average_forgetting": "mean over earlier tasks of the largest drop below the score right after learning it",
        "backward_transfer": "mean change of earlier tasks' scores since they were learned; negative: forgetting",
        "normalized_score": "mean over tasks of the latest score divided by the best score this run reached",
    }
    return [f"- **{name}**: {_number(values.get(name))} ({explain[name]})" for name in CL_METRIC_NAMES]


def _hyperparameter_table(hyperparameters: dict[str, Any]) -> list[str]:
    keys = [k for k in hyperparameters if k.startswith(("memory_", "replay_"))]
    keys = [k for k in CARD_HYPERPARAMETERS if k in hyperparameters] + sorted(keys)
    return ["| name | value |", "| --- | --- |"] + [f"| `{k}` | {_value(hyperparameters[k])} |" for k in keys]


def _number(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return MISSING
    return f"{number:.3f}" if math.isfinite(number) else MISSING


def _value(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return MISSING
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple, dict)):
        return f"`{json.dumps(value, default=str)}`"
    return str(value).replace("|", "\\|")


# ------------------------------------------------------------------ publishing


def push_stage(
    stage_dir: str | Path,
    repo_id: str | None,
    stage: int,
    task: str,
    *,
    api=None,
    private: bool | None = None,
    token: str | None = None,
    main: bool = True,
) -> str:
    """Publish a finished stage: create the run's repo if needed, upload the stage folder to its branch and to main.

    Args:
        stage_dir (`str` or `Path`): the stage's folder (``checkpoints/`` in it is not uploaded).
        repo_id (`str`): the run's repo, e.g. ``"me/smollm2-mssr"`` (the ``hub_model_id`` training argument).
        stage (`int`), task (`str`): which stage this is; they name the branch (:func:`stage_revision`).
        api (*optional*): a `huggingface_hub.HfApi`-like client; default ``HfApi(token=token or $HF_TOKEN)``.
        private (`bool`, *optional*): visibility if the repo is created (None: the account's default).
        token (`str`, *optional*): overrides ``HF_TOKEN``; ignored when ``api`` is given.
        main (`bool`, *optional*, defaults to `True`): also upload to ``main`` (False when a later stage is already
            published there).

    Returns:
        `str`: the stage's revision (branch) name.

    Raises:
        `ValueError`: ``repo_id`` is not set.
        `RuntimeError`: a Hub call failed (the message names the repo, stage and step; the client's error is chained
            unless its text contains the token).
    """
    if not repo_id:
        raise ValueError("push_to_hub needs a repo: set hub_model_id (e.g. --hub_model_id me/my-mssr-run)")
    token = token or os.environ.get("HF_TOKEN") or None
    if api is None:
        api = HfApi(token=token)
    branch = stage_revision(stage, task)
    folder = str(stage_dir)
    message = f"mssr_hf stage {stage} ({task})"
    steps = [
        ("create the repo", lambda: api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")),
        (f"create branch {branch}", lambda: api.create_branch(repo_id, branch=branch, exist_ok=True)),
    ]
    for revision in (branch, "main") if main else (branch,):
        upload = dict(repo_id=repo_id, folder_path=folder, revision=revision, commit_message=message,
                      ignore_patterns=CHECKPOINT_PATTERNS, delete_patterns="*")  # fmt: skip
        steps.append((f"upload to {revision}", lambda upload=upload: api.upload_folder(**upload)))
    for step, call in steps:
        try:
            call()
        except Exception as error:
            detail = f"{type(error).__name__}: {error}"
            leaks = bool(token) and token in detail + repr(error.args)
            failure = RuntimeError(
                f"Publishing stage {stage} ({task}) to the Hub repo {repo_id!r} failed at '{step}': "
                + (f"{type(error).__name__} (details withheld: they contain the token)" if leaks else detail)
            )
            if leaks:
                raise failure from None
            raise failure from error
    return branch
