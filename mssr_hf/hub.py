"""Model cards and Hub publishing for the stages of a continual run.

Layout on the Hub: **one repo per run, one branch per stage, ``main`` = the latest finished stage.**

* Stage k of the task sequence is pushed to the branch ``stage-{k:02d}-{task}`` (see :func:`stage_revision`; the
  stage's folder has the same name, see :mod:`mssr_hf.layout`), and the same folder is pushed to ``main`` (or to the
  branch ``hub_revision`` names). So ``PeftModel.from_pretrained(base, repo, revision="stage-01-gsm8k")`` loads any
  stage, and the default revision loads the latest one. The repo is created private when ``hub_private_repo``.
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

from huggingface_hub import EvalResult, HfApi, ModelCard, ModelCardData
from huggingface_hub.utils import HFValidationError, validate_repo_id

from .cl_metrics import CL_METRIC_NAMES
from .errors import InputError
from .layout import CHECKPOINTS, MODEL_CARD, stage_name

__all__ = ["hub_model_id", "push_stage", "stage_revision", "write_model_card"]

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

# How each task metric is named in a card's model-index: (Hub metric type, display name).
METRIC_TYPES = {
    "exact_match": ("exact_match", "Exact match"), "squad_f1": ("f1", "SQuAD F1"), "bleu": ("bleu", "BLEU"),
    "rouge_l": ("rouge", "ROUGE-L"), "choice": ("accuracy", "Accuracy"),
}  # fmt: skip
CARD_TAGS = ["mssr", "continual-learning", "replay", "trl", "sft"]


def hub_model_id(name: str) -> str | None:
    """``name`` if it is a Hub model id, None if it is a local path (a folder that exists here, or a string the Hub
    would not take as an id). A card's ``base_model`` must be a Hub id: the Hub rejects a commit whose card names a
    local path there."""
    if not name or Path(name).exists():
        return None
    try:
        validate_repo_id(name)
    except HFValidationError:
        return None
    return name


def write_model_card(stage_dir: str | Path, info: dict[str, Any]) -> Path:
    """Write ``stage_dir/README.md``: a Hub model card for the adapter (or model) saved after one stage, built with
    ``huggingface_hub.ModelCard`` on the metadata PEFT wrote there when it saved the adapter (its tags are kept).

    The metadata holds ``base_model`` only when the base model is a Hub id (for a local path, the tags that name it
    are dropped too), ``library_name``, ``pipeline_tag``, the tags, ``datasets`` (the Hub ids of the tasks trained so
    far) and a ``model-index`` with each task's score after this stage. The body has the run's summary, a snippet
    that loads this stage (from ``repo_id`` at the stage's revision when the run publishes, else from the folder),
    the accuracy matrix, the continual-learning metrics and the hyperparameters.

    Args:
        stage_dir (`str` or `Path`): the stage's folder.
        info (`dict`): as built by ``ContinualRunner._card_info``: ``base_model``, ``stage``, ``task``, ``tasks``,
            ``strategy``, ``peft`` (`bool`), ``hyperparameters`` (flat dict of training arguments), ``matrix`` (rows
            of scores after each stage so far), ``probe`` and ``probe_task`` (optional), ``metrics``, and optionally
            ``task_description``, ``repo_id``, ``latest_revision`` (the branch of the latest stage), ``task_specs``
            (per task of ``tasks``, then the probe: ``dataset`` (Hub id or None), ``subset``, ``split``, ``metric``)
            and ``versions`` (package -> version). Missing, ``None`` or NaN values are shown as "–".

    Returns:
        `Path`: the card's path.
    """
    stage, task, tasks = int(info["stage"]), str(info["task"]), [str(t) for t in info["tasks"]]
    strategy, peft = str(info["strategy"]), bool(info.get("peft"))
    path = Path(stage_dir) / MODEL_CARD
    data = ModelCard.load(path).data if path.is_file() else ModelCardData()
    base_model = str(info["base_model"])
    hub_base = hub_model_id(base_model)
    data.base_model = hub_base
    data.library_name = "peft" if peft else "transformers"
    data.pipeline_tag = "text-generation"
    # PEFT tags its adapters "base_model:adapter:<base model>"; with a local base model that names a local path.
    kept = [t for t in data.tags or [] if hub_base is not None or not t.startswith("base_model:")]
    data.tags = list(dict.fromkeys([*kept, *CARD_TAGS, strategy]))
    specs = info.get("task_specs") or []
    hub_datasets = [spec.get("dataset") for spec in specs[: stage + 1]]
    data.datasets = list(dict.fromkeys(d for d in hub_datasets if d)) or None
    repo_id = info.get("repo_id")
    data.model_name = repo_id or stage_revision(stage, task)
    data.eval_results = _eval_results(info, tasks, specs) or None
    data.mssr = {"stage": stage, "task": task, "tasks": tasks, "strategy": strategy}

    shown_base = hub_base or f"path/to/{Path(base_model).name}"
    body = [
        f"# {hub_base or Path(base_model).name}: stage {stage} ({task}) of a continual run with `{strategy}` replay",
        "",
        _summary_paragraph(info, stage, task, tasks, strategy, peft),
        "",
        "## How to load it",
        "",
        _loading_snippet(
            shown_base,
            hub_base is None,
            stage_revision(stage, task),
            repo_id,
            peft,
            info.get("latest_revision") or "main",
        ),
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
    versions = info.get("versions") or {}
    if versions:
        body += ["", "### Framework versions", "", *(f"- {name} {version}" for name, version in versions.items())]
    card = ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(body) + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    card.save(path)
    return path


def _eval_results(info: dict[str, Any], tasks: list[str], specs: list[dict[str, Any]]) -> list[EvalResult]:
    """The model-index entries: each task trained so far (and the probe) with its score after this stage."""
    stage, matrix = int(info["stage"]), info.get("matrix") or []
    row = matrix[stage] if stage < len(matrix) else []
    scored = [(tasks[i], specs[i] if i < len(specs) else {}, row[i]) for i in range(min(stage + 1, len(row)))]
    probe = info.get("probe") or []
    if info.get("probe_task") and stage < len(probe):
        scored.append((str(info["probe_task"]), specs[len(tasks)] if len(specs) > len(tasks) else {}, probe[stage]))
    results = []
    for name, spec, score in scored:
        if _number(score) == MISSING:
            continue
        metric_type, metric_name = METRIC_TYPES.get(spec.get("metric", ""), (spec.get("metric") or "score", None))
        results.append(EvalResult(
            task_type="text-generation", task_name=name, dataset_type=spec.get("dataset") or name, dataset_name=name,
            dataset_config=spec.get("subset"), dataset_split=spec.get("split"), metric_type=metric_type,
            metric_name=metric_name, metric_value=round(float(score), 4),
        ))  # fmt: skip
    return results


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


def _loading_snippet(
    base_model: str, local_base: bool, revision: str, repo_id: str | None, peft: bool, latest: str = "main"
) -> str:
    """Python that loads this stage: from ``repo_id`` at the stage's revision, or from the stage's folder."""
    where = f"{json.dumps(repo_id)}, revision={json.dumps(revision)}" if repo_id else json.dumps(f"path/to/{revision}")
    lines = ["from transformers import AutoModelForCausalLM, AutoTokenizer", ""]
    if peft:
        lines[0:0] = ["from peft import PeftModel"]
        note = "  # the local base model the adapter was trained on" if local_base else ""
        lines += [
            f"base = AutoModelForCausalLM.from_pretrained({json.dumps(base_model)}){note}",
            f"model = PeftModel.from_pretrained(base, {where})",
        ]
    else:
        lines += [f"model = AutoModelForCausalLM.from_pretrained({where})"]
    lines += [f"tokenizer = AutoTokenizer.from_pretrained({where})"]
    if repo_id:
        latest_note = "the default revision" if latest == "main" else f"revision={json.dumps(latest)}"
        lines += [f"# each stage has its own branch; the latest stage is also at {latest_note}"]
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
    revision: str | None = None,
) -> str:
    """Publish a finished stage: create the run's repo if needed, upload the stage folder to its branch and to the
    branch of the latest stage (``main``, or ``revision``).

    Args:
        stage_dir (`str` or `Path`): the stage's folder (``checkpoints/`` in it is not uploaded).
        repo_id (`str`): the run's repo, e.g. ``"me/smollm2-mssr"`` (the ``hub_model_id`` training argument).
        stage (`int`), task (`str`): which stage this is; they name the branch (:func:`stage_revision`).
        api (*optional*): a `huggingface_hub.HfApi`-like client; default ``HfApi(token=token or $HF_TOKEN)``.
        private (`bool`, *optional*): visibility if the repo is created (None: the account's default).
        token (`str`, *optional*): overrides ``HF_TOKEN``; ignored when ``api`` is given.
        main (`bool`, *optional*, defaults to `True`): also upload to the latest stage's branch (False when a later
            stage is already published there).
        revision (`str`, *optional*): the branch of the latest stage (the ``hub_revision`` training argument;
            None: ``main``). Created if missing.

    Returns:
        `str`: the stage's revision (branch) name.

    Raises:
        `ValueError`: ``repo_id`` is not set.
        `RuntimeError`: a Hub call failed (the message names the repo, stage and step; the client's error is chained
            unless its text contains the token).
    """
    if not repo_id:
        raise InputError("push_to_hub needs a repo: set hub_model_id (e.g. --hub_model_id me/my-mssr-run)")
    token = token or os.environ.get("HF_TOKEN") or None
    if api is None:
        api = HfApi(token=token)
    branch = stage_revision(stage, task)
    folder = str(stage_dir)
    message = f"mssr_hf stage {stage} ({task})"
    latest = revision or "main"
    steps = [("create the repo", lambda: api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model"))]
    for name in (branch, latest) if latest != "main" and main else (branch,):
        steps.append(
            (f"create branch {name}", lambda name=name: api.create_branch(repo_id, branch=name, exist_ok=True))
        )
    for target in (branch, latest) if main else (branch,):
        upload = dict(repo_id=repo_id, folder_path=folder, revision=target, commit_message=message,
                      ignore_patterns=CHECKPOINT_PATTERNS, delete_patterns="*")  # fmt: skip
        steps.append((f"upload to {target}", lambda upload=upload: api.upload_folder(**upload)))
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
