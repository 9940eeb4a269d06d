"""Tasks declared as data: a mapping (a YAML entry of ``tasks:``, or a Python dict) that says where a task's rows are,
how a row becomes a prompt and a completion, and how answers are scored. :func:`task_from_dict` checks the mapping
and builds the :class:`~mssr_hf.tasks.spec.TaskSpec`; ``mssr-hf train`` and ``ContinualRunner`` accept such mappings
next to built-in task names::

    tasks:
      - rg_addition                                  # a built-in task
      - name: capitals                               # a declared one
        dataset: data/capitals.jsonl                 # local JSON/JSONL/CSV/Parquet, save_to_disk folder or Hub id
        prompt_template: "What is the capital of {country}?\\nAnswer:"
        completion_template: " {capital}"
        reference_field: capital
        max_new_tokens: 8

A row becomes a training example in one of three ways: columns used as they are (``prompt_field`` and
``completion_field``), format strings over the row's columns (``prompt_template`` and ``completion_template``, e.g.
``"Question: {question}\\nAnswer:"``; ``{answers[text][0]}`` indexes a nested column), or chat messages
(``messages_field``: a list of ``{"role", "content"}``, the last one the assistant's answer). The text a field or
template gives is used as it is: prompt and completion are joined without a separator, as TRL does, so start the
completion with a space where the words should be apart.

Every key is checked before any data or model is loaded (an unknown key, a missing one, a value of the wrong type,
a template that does not parse, a regular expression that does not compile, a local file that does not exist), and
the columns a task reads are checked against its rows when they are loaded, before training. Each error names the
task and the key.
"""

from __future__ import annotations

import difflib
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError, MissingFileError
from .extract import first_line, own_answer
from .spec import FILE_FORMATS, METRICS, TaskSpec

__all__ = ["TASK_KEYS", "AnswerPattern", "RowFormat", "task_from_dict"]

# Every key a declared task takes, with what it means (README's table is generated from this).
TASK_KEYS: dict[str, str] = {
    "name": "Short name used in results, folder names and Hub branches (required).",
    "dataset": "Hub dataset id, local JSON/JSONL/CSV/Parquet file, save_to_disk folder, or {split: file} (required).",
    "subset": "Configuration of a Hub dataset.",
    "train_split": "Split trained on (default: train).",
    "eval_split": "Split evaluated on (default: none, 5% of the training rows are held out).",
    "prompt_field": "Column holding the prompt.",
    "prompt_template": "The prompt as a format string over the row's columns, e.g. 'Question: {question}\\nAnswer:'.",
    "completion_field": "Column holding the completion (the supervised target).",
    "completion_template": "The completion as a format string, e.g. ' {answer}'.",
    "messages_field": "Column holding chat messages (role, content); the last one is the assistant's answer.",
    "reference_field": "Column scored against (a string or a list of strings; default: the completion, stripped).",
    "choices_field": "Column holding a multiple-choice question's options (metric choice).",
    "metric": f"How answers are scored: {', '.join(METRICS)} (default: exact_match).",
    "answer_regex": "Regular expression that finds the answer in a generation (its first group, or the whole match).",
    "max_new_tokens": "Tokens generated per answer at evaluation (default: 32).",
    "chat": "Train prompt/completion rows as a chat: user and assistant messages (default: false).",
    "choice_scoring": "For metric choice: generate (default) or loglikelihood.",
    "description": "One line for the model card.",
}
_STRING_KEYS = ("name", "subset", "train_split", "eval_split", "prompt_field", "prompt_template", "completion_field",
                "completion_template", "messages_field", "reference_field", "choices_field", "metric", "answer_regex",
                "choice_scoring", "description")  # fmt: skip


@dataclass(frozen=True)
class RowFormat:
    """A declared task's ``to_example``: one raw row to ``prompt``/``completion`` (or ``messages``), ``reference`` and
    ``choices``. A frozen dataclass, so ``datasets`` hashes it the same in every run and caches what it formats."""

    prompt_field: str | None = None
    prompt_template: str | None = None
    completion_field: str | None = None
    completion_template: str | None = None
    messages_field: str | None = None
    reference_field: str | None = None
    choices_field: str | None = None

    def __call__(self, row: dict) -> dict:
        if self.messages_field is not None:
            messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in row[self.messages_field]]
            answer = messages[-1]["content"] if messages else ""
            example = {"messages": messages}
        else:
            prompt = row[self.prompt_field] if self.prompt_field else self.prompt_template.format_map(row)
            answer = row[self.completion_field] if self.completion_field else self.completion_template.format_map(row)
            example = {"prompt": str(prompt), "completion": str(answer)}
        example["reference"] = row[self.reference_field] if self.reference_field else str(answer).strip()
        if self.choices_field is not None:
            example["choices"] = [str(option) for option in row[self.choices_field]]
        return example

    def columns(self) -> dict[str, str]:
        """Each column the rows must have, and the key that reads it."""
        needed = {}
        for key in ("prompt_template", "completion_template"):
            for column in template_columns(getattr(self, key) or ""):
                needed.setdefault(column, key)
        for key in ("prompt_field", "completion_field", "messages_field", "reference_field", "choices_field"):
            if getattr(self, key) is not None:
                needed.setdefault(getattr(self, key), key)
        return needed


@dataclass(frozen=True)
class AnswerPattern:
    """A declared task's ``extract_answer``: the first match of ``pattern`` in the generation (its first group if it
    has groups), stripped; an empty answer when nothing matches."""

    pattern: str

    def __call__(self, text: str) -> str:
        match = re.search(self.pattern, own_answer(text))
        if match is None:
            return ""
        return (match.group(1) if match.re.groups else match.group(0)).strip()


def whole_answer(text: str) -> str:
    """The generation up to a next example, stripped: the default answer of a declared ``bleu``/``rouge_l`` task."""
    return own_answer(text).strip()


def template_columns(template: str) -> list[str]:
    """The columns a format string reads: ``"Q: {question} ({meta[source]})"`` -> ``["question", "meta"]``.

    Raises:
        `ValueError`: the template does not parse, or has a positional field (``{}``, ``{0}``).
    """
    columns = []
    for _, field_name, _, _ in string.Formatter().parse(template):
        if field_name is None:
            continue
        column = re.split(r"[.\[]", field_name, maxsplit=1)[0]
        if not column or column.isdigit():
            raise ValueError(f"{{{field_name}}} is positional: name a column, e.g. {{question}}")
        columns.append(column)
    return columns


def task_from_dict(declaration: Mapping[str, Any], where: str = "task") -> TaskSpec:
    """The :class:`TaskSpec` a mapping declares (its keys: :data:`TASK_KEYS`).

    Args:
        declaration (`Mapping[str, Any]`): the task's keys and values, e.g. one entry of a YAML ``tasks:`` list.
        where (`str`, *optional*): how errors name the declaration's place, e.g. ``"tasks[1]"``.

    Raises:
        `InputError`: an unknown or missing key, a value of the wrong type or out of range, two ways of making the
            prompt, a template that does not parse, a regular expression that does not compile (the message names
            the task and the key). `MissingFileError`: a local data file that does not exist.
    """
    if not isinstance(declaration, Mapping):
        raise InputError(f"{where}: a task is a built-in name or a mapping of keys, got {declaration!r}")
    name = declaration.get("name")
    label = f"{where} ({name!r})" if isinstance(name, str) else where

    def fail(key: str, problem: str) -> InputError:
        return InputError(f"{label}: {key!r} {problem}")

    for key in declaration:
        if key not in TASK_KEYS:
            close = difflib.get_close_matches(str(key), TASK_KEYS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise fail(key, f"is not a task key ({hint}the keys: {', '.join(TASK_KEYS)})")
    for key in ("name", "dataset"):
        if declaration.get(key) in (None, ""):
            raise fail(key, "is missing: every declared task needs a name and a dataset")
    for key in _STRING_KEYS:
        if key in declaration and not isinstance(declaration[key], str):
            raise fail(key, f"must be a string, got {declaration[key]!r}")
    if "/" in name:
        raise fail("name", f"must not contain '/', got {name!r}")

    given = {key for key in declaration if declaration[key] is not None}
    if "messages_field" in given:
        others = sorted(given & {"prompt_field", "prompt_template", "completion_field", "completion_template", "chat"})
        if others:
            raise fail("messages_field", f"makes chat rows from the messages alone: drop {others}")
    else:
        for part in ("prompt", "completion"):
            ways = [key for key in (f"{part}_field", f"{part}_template") if key in given]
            if len(ways) != 1:
                problem = f"give one of them, not both ({ways})" if ways else "neither is given"
                raise fail(f"{part}_field", f"or {part}_template makes each row's {part}: {problem} (or use "
                                            "messages_field for chat rows)")  # fmt: skip
    for key in ("prompt_template", "completion_template"):
        if key in given:
            try:
                template_columns(declaration[key])
            except ValueError as error:
                raise fail(key, f"is not a format string over the row's columns: {error}") from None

    metric = declaration.get("metric", "exact_match")
    if metric not in METRICS:
        raise fail("metric", f"must be one of {', '.join(METRICS)}, got {metric!r}")
    choice_scoring = declaration.get("choice_scoring", "generate")
    if choice_scoring not in ("generate", "loglikelihood"):
        raise fail("choice_scoring", f"must be 'generate' or 'loglikelihood', got {choice_scoring!r}")
    if ("choice_scoring" in given or "choices_field" in given) and metric != "choice":
        key = "choice_scoring" if "choice_scoring" in given else "choices_field"
        raise fail(key, f"applies to metric 'choice', and this task's metric is {metric!r}")
    if choice_scoring == "loglikelihood" and "choices_field" not in given:
        raise fail("choices_field", "is missing: loglikelihood scoring compares the options' letters")
    max_new_tokens = declaration.get("max_new_tokens", 32)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise fail("max_new_tokens", f"must be an integer >= 1, got {max_new_tokens!r}")
    chat = declaration.get("chat", False)
    if not isinstance(chat, bool):
        raise fail("chat", f"must be true or false, got {chat!r}")
    if "answer_regex" in given:
        try:
            re.compile(declaration["answer_regex"])
        except re.error as error:
            raise fail("answer_regex", f"is not a regular expression: {error}") from None
        extract = AnswerPattern(declaration["answer_regex"])
    else:
        extract = whole_answer if metric in ("bleu", "rouge_l") else first_line

    source = _dataset(declaration["dataset"], fail)
    row_format = RowFormat(**{key: declaration.get(key) for key in (
        "prompt_field", "prompt_template", "completion_field", "completion_template", "messages_field",
        "reference_field", "choices_field")})  # fmt: skip
    return TaskSpec(
        name=name, source=source, to_example=row_format, metric=metric, extract_answer=extract,
        max_new_tokens=max_new_tokens, subset=declaration.get("subset"),
        train_split=declaration.get("train_split", "train"), eval_split=declaration.get("eval_split"), chat=chat,
        choice_scoring=choice_scoring, description=declaration.get("description", ""),
        columns=row_format.columns(), metadata={"declaration": dict(declaration)},
    )  # fmt: skip


def _dataset(value: Any, fail) -> str | dict[str, str]:
    """A declared ``dataset``: a Hub id or a local path (str), or a mapping of split names to local files; a local
    file that does not exist fails here."""
    if isinstance(value, Mapping):
        if not value or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise fail("dataset", f"as a mapping gives a local file per split, e.g. {{train: a.jsonl}}, got {value!r}")
        suffixes = {Path(v).suffix for v in value.values()}
        if len(suffixes) != 1 or next(iter(suffixes)) not in FILE_FORMATS:
            raise fail("dataset", f"files must share one of the suffixes {', '.join(FILE_FORMATS)}, got {value!r}")
        for split, path in value.items():
            if not Path(path).is_file():
                raise MissingFileError(f"{fail('dataset', '')}names {path} for split {split!r}, which does not exist")
        return dict(value)
    if not isinstance(value, str):
        raise fail("dataset", f"must be a Hub dataset id, a local path or a {{split: file}} mapping, got {value!r}")
    if Path(value).suffix in FILE_FORMATS and not Path(value).is_file():
        raise MissingFileError(f"{fail('dataset', '')}names the file {value}, which does not exist")
    return value
