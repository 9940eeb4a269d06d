"""TaskSpec: where a task's data comes from, how a row becomes a training example, and how an answer is scored."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasets import Dataset, DatasetDict, load_dataset, load_from_disk

from .. import scoring

METRICS = ("exact_match", "squad_f1", "bleu", "rouge_l", "choice")
_FILE_FORMATS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}

Source = str | os.PathLike | Dataset | DatasetDict | Callable[[], Dataset | DatasetDict]


def load_source(source: Source, subset: str | None = None) -> Dataset | DatasetDict:
    """Raw rows from a ``datasets.Dataset``/``DatasetDict``, a callable returning one, a ``save_to_disk`` folder,
    a local JSON/JSONL/CSV/Parquet file, or a Hub dataset id (with optional ``subset``)."""
    if isinstance(source, (Dataset, DatasetDict)):
        return source
    if callable(source):
        return source()
    path = Path(source)
    if path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()):
        return load_from_disk(str(path))
    if path.suffix in _FILE_FORMATS:
        if not path.is_file():
            raise FileNotFoundError(f"task data file {path} does not exist")
        return load_dataset(_FILE_FORMATS[path.suffix], data_files=str(path))
    return load_dataset(str(source), subset)


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

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"TaskSpec {self.name!r}: metric must be one of {METRICS}, got {self.metric!r}")
        if self.choice_scoring not in ("generate", "loglikelihood"):
            raise ValueError(f"TaskSpec {self.name!r}: choice_scoring must be 'generate' or 'loglikelihood'")
        if not self.name or "/" in self.name:
            raise ValueError(f"TaskSpec name must be a non-empty string without '/', got {self.name!r}")

    def load(
        self, max_train: int | None = None, max_eval: int | None = None, seed: int = 42
    ) -> tuple[Dataset | None, Dataset]:
        """Formatted ``(train, eval)`` datasets: columns ``prompt``, ``completion``, ``reference`` (and ``choices``),
        or ``messages`` + ``reference`` when ``chat``. Without an evaluation split, the usable rows are split 95/5
        with ``seed`` 42 as in the paper (App. C)."""
        raw = load_source(self.source, self.subset)
        if isinstance(raw, DatasetDict):
            if self.train_split not in raw:
                raise ValueError(f"task {self.name!r}: no split {self.train_split!r} (has {list(raw)})")
            train, evaluation = raw[self.train_split], raw[self.eval_split] if self.eval_split else None
        else:
            train, evaluation = raw, None
        # Format first (rows a task does not use, e.g. another MATH level, are dropped), then split what is left.
        train = self._format(train)
        if evaluation is None:
            parts = train.train_test_split(test_size=0.05, seed=seed)
            train, evaluation = parts["train"], parts["test"]
        else:
            evaluation = self._format(evaluation)
        if max_train is not None:
            train = train.select(range(min(max_train, len(train))))
        if max_eval is not None:
            evaluation = evaluation.select(range(min(max_eval, len(evaluation))))
        # max_train=0 asks for the evaluation rows only (e.g. a probe task that is never trained).
        return (train if len(train) else None), evaluation

    def _format(self, rows: Dataset) -> Dataset:
        examples = [e for e in (self._example(row, rows.column_names) for row in rows) if e is not None]
        empty = sum(not str(e["completion"]).strip() for e in examples)
        if empty:
            warnings.warn(f"task {self.name!r}: {empty} of {len(rows)} rows have an empty completion and are left out",
                          stacklevel=3)  # fmt: skip
        examples = [e for e in examples if str(e["completion"]).strip()]
        if not examples:
            raise ValueError(f"task {self.name!r}: no usable rows after formatting")
        if self.chat:
            examples = [
                {
                    "messages": [
                        {"role": "user", "content": e["prompt"]},
                        {"role": "assistant", "content": e["completion"]},
                    ],
                    **{k: v for k, v in e.items() if k not in ("prompt", "completion")},
                }
                for e in examples
            ]
        for e in examples:
            if isinstance(e.get("reference"), str):
                e["reference"] = [e["reference"]]
        return Dataset.from_list(examples)

    def _example(self, row: dict, columns: list[str]) -> dict | None:
        """``to_example(row)``, with a missing column or field told in one line naming the task."""
        try:
            example = self.to_example(row)
        except KeyError as error:
            raise ValueError(
                f"task {self.name!r}: its rows have no column {error.args[0]!r}, which its to_example reads (the rows "
                f"have {columns})"
            ) from error
        if example is None:
            return None
        missing = [key for key in ("prompt", "completion", "reference") if key not in example]
        if missing:
            raise ValueError(
                f"task {self.name!r}: to_example gave a row without {missing} (it has {sorted(example)}); each row "
                "needs prompt, completion and reference"
            )
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


def cut_middle(tokens: list[int], keep: int) -> list[int]:
    """``keep`` tokens of ``tokens``: its start and its end, the middle dropped."""
    if keep <= 0:
        return []
    if len(tokens) <= keep:
        return tokens
    head = keep // 2
    return tokens[:head] + tokens[len(tokens) - (keep - head) :]


def truncate_keeping_answer(rows: Dataset, tokenizer, max_length: int, answer_tokens: int = 64) -> Dataset:
    """Fit prompt/completion rows into ``max_length`` tokens the paper's way (App. C: "prioritize preserving the prompt
    and the final answer segment"): if the prompt fits, the completion keeps its last ``answer_tokens`` tokens (the
    final answer) and loses its middle; otherwise the prompt loses its middle, keeping its start (instructions,
    context) and its end (the question), and the completion is kept whole (or its last ``answer_tokens`` tokens if
    it is longer than half of ``max_length``). Rows that fit are unchanged; chat rows (``messages``) are left as
    they are.

    Without this, SFT truncation keeps the start of a sequence and drops the final answer of a long solution.
    """
    if "prompt" not in rows.column_names or max_length is None:
        return rows
    budget = max_length - 1  # room for the EOS token the SFT trainer appends

    def fit(row: dict) -> dict:
        prompt = tokenizer(row["prompt"], add_special_tokens=False)["input_ids"]
        completion = tokenizer(row["completion"], add_special_tokens=False)["input_ids"]
        if len(prompt) + len(completion) <= budget:
            return row
        tail = completion[-min(answer_tokens, len(completion), budget) :]
        if len(prompt) + len(tail) <= budget:  # the prompt fits: the completion loses its middle
            head_room = budget - len(prompt) - len(tail)
            completion = completion[:head_room] + tail
        else:  # the prompt is the long part: keep a short completion whole, else its answer tail
            if len(completion) > budget // 2:
                completion = tail
            prompt = cut_middle(prompt, budget - len(completion))
        return {**row, "prompt": tokenizer.decode(prompt), "completion": tokenizer.decode(completion)}

    return rows.map(fit, desc="Fitting long examples (keeping the prompt and the final answer)")
