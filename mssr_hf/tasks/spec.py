"""TaskSpec: where a task's data comes from, how a row becomes a training example, and how an answer is scored."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasets import Dataset, DatasetDict, load_dataset, load_from_disk
from huggingface_hub.utils import HFValidationError, validate_repo_id

from .. import scoring
from ..errors import InputError, MissingFileError

METRICS = ("exact_match", "squad_f1", "bleu", "rouge_l", "choice")
FILE_FORMATS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}
# Formatting and fitting use dataset_num_proc processes only for at least this many rows per process: below that,
# starting the processes costs more than they save.
MIN_ROWS_PER_PROCESS = 2000

Source = str | os.PathLike | Mapping[str, str] | Dataset | DatasetDict | Callable[[], Dataset | DatasetDict]


def load_source(source: Source, subset: str | None = None) -> Dataset | DatasetDict:
    """Raw rows from a ``datasets.Dataset``/``DatasetDict``, a callable returning one, a ``save_to_disk`` folder,
    a local JSON/JSONL/CSV/Parquet file, a mapping of split names to such files, or a Hub dataset id (with optional
    ``subset``)."""
    if isinstance(source, (Dataset, DatasetDict)):
        return source
    if isinstance(source, Mapping):
        paths = {split: Path(file) for split, file in source.items()}
        for path in paths.values():
            if not path.is_file():
                raise MissingFileError(f"task data file {path} does not exist")
        builder = FILE_FORMATS[next(iter(paths.values())).suffix]
        return load_dataset(builder, data_files={split: str(path) for split, path in paths.items()})
    if callable(source):
        return source()
    path = Path(source)
    if path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()):
        return load_from_disk(str(path))
    if path.suffix in FILE_FORMATS:
        if not path.is_file():
            raise MissingFileError(f"task data file {path} does not exist")
        return load_dataset(FILE_FORMATS[path.suffix], data_files=str(path))
    return load_dataset(str(source), subset)


def hub_dataset_id(source: Source) -> str | None:
    """The Hub dataset id ``source`` names, or None for a local file or folder, a mapping of files, a dataset or a
    callable (what a model card may list under ``datasets``)."""
    if not isinstance(source, str) or Path(source).exists() or Path(source).suffix in FILE_FORMATS:
        return None
    try:
        validate_repo_id(source)
    except HFValidationError:
        return None
    return source


def num_proc_for(rows: int, requested: int | None) -> int | None:
    """``requested`` processes (``dataset_num_proc``) for ``rows`` rows, or None (one process) when there are fewer
    than :data:`MIN_ROWS_PER_PROCESS` rows for each."""
    if requested is None or requested <= 1 or rows < MIN_ROWS_PER_PROCESS * requested:
        return None
    return requested


def identity(text: str) -> str:
    return text


@dataclass
class TaskSpec:
    """One task of a continual sequence.

    Args:
        name (`str`): short name used in results, directory names and logs.
        source: where the rows come from (see :func:`load_source`).
        to_example (`Callable[[dict], dict]`): raw row -> ``{"prompt": str, "completion": str, "reference": str |
            list[str]}`` (plus ``"choices": list[str]`` for multiple choice). ``completion`` is the supervised target;
            ``reference`` is what a generated answer is scored against.
        metric (`str`, *optional*, defaults to `"exact_match"`): `exact_match`, `squad_f1`, `bleu`, `rouge_l` or
            `choice`.
        extract_answer (`Callable[[str], str]`, *optional*): generated text -> the answer to score.
        max_new_tokens (`int`, *optional*, defaults to `32`): generation length at evaluation.
        subset (`str`, *optional*): Hub configuration name.
        train_split (`str`, *optional*, defaults to `"train"`), eval_split (`str`, *optional*): splits; without an
            evaluation split, 5% of the training rows (seed 42) are held out.
        chat (`bool`, *optional*, defaults to `False`): train on chat ``messages`` instead of prompt/completion.
        choice_scoring (`str`, *optional*, defaults to `"generate"`): for the `choice` metric, `generate` (the letter
            the model writes) or `loglikelihood` (the letter it finds most likely after the prompt).
        description (`str`, *optional*): one line for model cards.
        metadata (`dict`, *optional*): anything else about the task (a declared task keeps its declaration here,
            under ``"declaration"``: :mod:`mssr_hf.tasks.declared`).
        columns (`dict[str, str]`, *optional*): columns the raw rows must have, each with what reads it; checked
            before formatting, so that a missing one is named at once.

    ``to_example`` may also give ``{"messages": [...], "reference": ...}`` (chat rows, the last message the answer)
    instead of a prompt and a completion.
    """

    name: str
    source: Source
    to_example: Callable[[dict], dict]
    metric: str = "exact_match"
    extract_answer: Callable[[str], str] = identity
    max_new_tokens: int = 32
    subset: str | None = None
    train_split: str = "train"
    eval_split: str | None = None
    chat: bool = False
    choice_scoring: str = "generate"
    description: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    columns: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise InputError(f"TaskSpec {self.name!r}: metric must be one of {METRICS}, got {self.metric!r}")
        if self.choice_scoring not in ("generate", "loglikelihood"):
            raise InputError(f"TaskSpec {self.name!r}: choice_scoring must be 'generate' or 'loglikelihood'")
        if not self.name or "/" in self.name:
            raise InputError(f"TaskSpec name must be a non-empty string without '/', got {self.name!r}")

    def load(
        self, max_train: int | None = None, max_eval: int | None = None, seed: int = 42, num_proc: int | None = None
    ) -> tuple[Dataset | None, Dataset]:
        """Formatted ``(train, eval)`` datasets: columns ``prompt``, ``completion``, ``reference`` (and ``choices``),
        or ``messages`` + ``reference`` for chat rows. Without an evaluation split, the usable rows are split 95/5
        with ``seed`` 42 as in the paper (App. C). Rows are formatted with ``datasets.map`` (cached for data read
        from files), in ``num_proc`` processes for large datasets (:func:`num_proc_for`)."""
        raw = load_source(self.source, self.subset)
        if isinstance(raw, DatasetDict):
            if self.train_split not in raw:
                raise InputError(f"task {self.name!r}: no split {self.train_split!r} (has {list(raw)})")
            if self.eval_split is not None and self.eval_split not in raw:
                raise InputError(f"task {self.name!r}: no split {self.eval_split!r} (has {list(raw)})")
            train, evaluation = raw[self.train_split], raw[self.eval_split] if self.eval_split else None
        else:
            train, evaluation = raw, None
        # Format first (rows a task does not use, e.g. another MATH level, are dropped), then split what is left.
        train = self._format(train, num_proc)
        if evaluation is None:
            parts = train.train_test_split(test_size=0.05, seed=seed)
            train, evaluation = parts["train"], parts["test"]
        else:
            evaluation = self._format(evaluation, num_proc)
        if max_train is not None:
            train = train.select(range(min(max_train, len(train))))
        if max_eval is not None:
            evaluation = evaluation.select(range(min(max_eval, len(evaluation))))
        # max_train=0 asks for the evaluation rows only (e.g. a probe task that is never trained).
        return (train if len(train) else None), evaluation

    def _format(self, rows: Dataset, num_proc: int | None = None) -> Dataset:
        columns = rows.column_names
        missing = {column: reader for column, reader in self.columns.items() if column not in columns}
        if missing:
            column, reader = next(iter(missing.items()))
            raise InputError(f"task {self.name!r}: {reader} reads the column {column!r}, which its rows do not have "
                             f"(they have {columns})")  # fmt: skip
        keys = self._example_keys(rows)
        # Rows to_example leaves out (None) are dropped in the same batched pass; the chat form is built after.
        formatted = rows.map(
            _FormatBatch(self.name, self.to_example, columns, keys), batched=True, remove_columns=columns,
            num_proc=num_proc_for(len(rows), num_proc), desc=f"Formatting {self.name}",
        )  # fmt: skip
        answer = "messages" if "messages" in keys else "completion"
        usable = formatted.filter(_has_answer, input_columns=[answer], num_proc=num_proc_for(len(formatted), num_proc))
        empty = len(formatted) - len(usable)
        if empty:
            warnings.warn(f"task {self.name!r}: {empty} of {len(rows)} rows have an empty completion and are left out",
                          stacklevel=3)  # fmt: skip
        if not len(usable):
            raise InputError(f"task {self.name!r}: no usable rows after formatting")
        if self.chat and "messages" not in keys:
            usable = usable.map(_as_messages, remove_columns=["prompt", "completion"], desc=f"Chat rows {self.name}")
            usable = usable.select_columns(["messages", *(k for k in usable.column_names if k != "messages")])
        return usable

    def _example_keys(self, rows: Dataset) -> list[str]:
        """The keys of the examples ``to_example`` makes (those of the first row it does not leave out)."""
        columns = rows.column_names
        for row in rows:
            example = self._example(row, columns)
            if example is not None:
                return list(example)
        raise InputError(f"task {self.name!r}: no usable rows after formatting")

    def _example(self, row: dict, columns: list[str]) -> dict | None:
        """``to_example(row)``, with a missing column or field told in one line naming the task."""
        try:
            example = self.to_example(row)
        except KeyError as error:
            raise InputError(
                f"task {self.name!r}: its rows have no column {error.args[0]!r}, which its to_example reads (the rows "
                f"have {columns})"
            ) from error
        if example is None:
            return None
        shape = ("messages", "reference") if "messages" in example else ("prompt", "completion", "reference")
        missing = [key for key in shape if key not in example]
        if missing:
            raise InputError(
                f"task {self.name!r}: to_example gave a row without {missing} (it has {sorted(example)}); each row "
                "needs prompt, completion and reference (or messages and reference)"
            )
        if "messages" in example and (not example["messages"] or example["messages"][-1]["role"] != "assistant"):
            raise InputError(f"task {self.name!r}: chat rows must end with the assistant's message, the answer")
        return example

    def score(self, predictions: Sequence[str], examples: Sequence[dict]) -> float:
        """The task's metric over generated ``predictions`` for ``examples`` (rows of :meth:`load`'s eval set)."""
        if len(predictions) != len(examples):
            raise ValueError(f"{len(predictions)} predictions for {len(examples)} examples")
        if not predictions:
            return float("nan")
        answers = [self.extract_answer(p) for p in predictions]
        refs = [e["reference"] for e in examples]
        if self.metric == "exact_match":
            return sum(max(scoring.exact_match(a, r) for r in ref) for a, ref in zip(answers, refs)) / len(answers)
        if self.metric == "squad_f1":
            return sum(scoring.squad_f1(a, ref) for a, ref in zip(answers, refs)) / len(answers)
        if self.metric == "bleu":  # sacreBLEU's 0-100 scale, brought to 0-1 like every other score
            return scoring.bleu(answers, [ref[0] for ref in refs]) / 100.0
        if self.metric == "rouge_l":
            return scoring.rouge_l(answers, [ref[0] for ref in refs])
        choices = [e.get("choices") for e in examples]
        return scoring.choice_accuracy(answers, [ref[0] for ref in refs], choices if all(choices) else None)


@dataclass(frozen=True)
class _FormatBatch:
    """``to_example`` over a batch of raw rows: the examples it does not leave out, references as lists of strings.
    A frozen dataclass, so that ``datasets`` can hash it and cache the result."""

    task: str
    to_example: Callable[[dict], dict | None]
    columns: list[str]
    keys: list[str]

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        out: dict[str, list] = {key: [] for key in self.keys}
        for i in range(len(batch[self.columns[0]]) if self.columns else 0):
            row = {column: batch[column][i] for column in self.columns}
            try:
                example = self.to_example(row)
            except KeyError as error:
                raise InputError(f"task {self.task!r}: its rows have no column {error.args[0]!r}, which its "
                                 f"to_example reads (the rows have {self.columns})") from error  # fmt: skip
            if example is None:
                continue
            if sorted(example) != sorted(self.keys):
                raise InputError(f"task {self.task!r}: to_example gives rows with different keys ({sorted(example)} "
                                 f"and {sorted(self.keys)}); give every row the same keys")  # fmt: skip
            reference = example["reference"]
            example["reference"] = [str(r) for r in reference] if isinstance(reference, (list, tuple)) else [
                str(reference)]  # fmt: skip
            for key in self.keys:
                out[key].append(example[key])
        return out


def _has_answer(answer) -> bool:
    """Whether a formatted row has something to learn: a completion, or a last (assistant) message, not blank."""
    text = answer[-1]["content"] if isinstance(answer, list) else answer
    return bool(str(text).strip())


def _as_messages(row: dict) -> dict:
    return {
        "messages": [{"role": "user", "content": row["prompt"]}, {"role": "assistant", "content": row["completion"]}]
    }


def cut_middle(tokens: list[int], keep: int) -> list[int]:
    """``keep`` tokens of ``tokens``: its start and its end, the middle dropped."""
    if keep <= 0:
        return []
    if len(tokens) <= keep:
        return tokens
    head = keep // 2
    return tokens[:head] + tokens[len(tokens) - (keep - head) :]


def truncate_keeping_answer(
    rows: Dataset, tokenizer, max_length: int, answer_tokens: int = 64, num_proc: int | None = None
) -> Dataset:
    """Fit prompt/completion rows into ``max_length`` tokens the paper's way (App. C: "prioritize preserving the prompt
    and the final answer segment"): if the prompt fits, the completion keeps its last ``answer_tokens`` tokens (the
    final answer) and loses its middle; otherwise the prompt loses its middle, keeping its start (instructions,
    context) and its end (the question), and the completion is kept whole (or its last ``answer_tokens`` tokens if
    it is longer than half of ``max_length``). Rows that fit are unchanged; chat rows (``messages``) are left as
    they are. Batched ``datasets.map`` (``num_proc`` processes for large datasets, :func:`num_proc_for`).

    Without this, SFT truncation keeps the start of a sequence and drops the final answer of a long solution.
    """
    if "prompt" not in rows.column_names or max_length is None:
        return rows
    budget = max_length - 1  # room for the EOS token the SFT trainer appends

    def fit(prompt: list[int], completion: list[int]) -> tuple[list[int], list[int]] | None:
        if len(prompt) + len(completion) <= budget:
            return None
        tail = completion[-min(answer_tokens, len(completion), budget) :]
        if len(prompt) + len(tail) <= budget:  # the prompt fits: the completion loses its middle
            head_room = budget - len(prompt) - len(tail)
            completion = completion[:head_room] + tail
        else:  # the prompt is the long part: keep a short completion whole, else its answer tail
            if len(completion) > budget // 2:
                completion = tail
            prompt = cut_middle(prompt, budget - len(completion))
        return prompt, completion

    def fit_batch(batch: dict[str, list]) -> dict[str, list]:
        prompts = tokenizer(batch["prompt"], add_special_tokens=False)["input_ids"]
        completions = tokenizer(batch["completion"], add_special_tokens=False)["input_ids"]
        out = {"prompt": list(batch["prompt"]), "completion": list(batch["completion"])}
        for i, (prompt, completion) in enumerate(zip(prompts, completions)):
            fitted = fit(prompt, completion)
            if fitted is not None:
                out["prompt"][i], out["completion"][i] = tokenizer.decode(fitted[0]), tokenizer.decode(fitted[1])
        return out

    return rows.map(fit_batch, batched=True, num_proc=num_proc_for(len(rows), num_proc),
                    desc="Fitting long examples (keeping the prompt and the final answer)")  # fmt: skip
