"""Tasks: specs (:class:`TaskSpec`, ``spec.py``), the paper's Hub tasks (``builtin.py``), offline tasks from
installed packages (``offline.py``), generated letter-string tasks (``synthetic.py``), tasks declared as data, e.g. in
a YAML config (``declared.py``), the answer extractors they share (``extract.py``) and the named sequences of the
paper and the demo."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import InputError
from .builtin import HUB_TASKS
from .declared import TASK_KEYS, task_from_dict
from .offline import OFFLINE_TASKS, make_offline_task
from .spec import METRICS, TaskSpec, load_source
from .synthetic import SYNTHETIC_TASKS, synthetic_task

# A task as a sequence lists it: a built-in name, a spec, or a declaration (a mapping of TASK_KEYS).
TaskLike = str | TaskSpec | Mapping[str, Any]

# name -> zero-argument function building the spec (data is read only when the spec's `load` runs).
BUILTIN_TASKS: dict[str, Callable[[], TaskSpec]] = {**HUB_TASKS, **OFFLINE_TASKS, **SYNTHETIC_TASKS}

# fmt: off
SEQUENCES: dict[str, list[str]] = {
    # Sec. 4 / Table tab:main_results: trained Alpaca-GPT4 -> GSM8K-RFT -> Competition MATH. The table reports MMLU,
    # GSM8K and MATH: MMLU is the general-knowledge probe, evaluated after each stage and never trained (see
    # SEQUENCE_PROBES); Alpaca-GPT4 is scored by ROUGE-L in the average normalised score (App. D, D = 3).
    "paper_3": ["alpaca_gpt4", "gsm8k_rft", "math"],
    # Table tab:longseq_all, in its column order.
    "paper_11": [
        "ag_news", "squad", "sciq", "boolq", "arc_challenge", "gsm8k_rft",
        "math_l1", "math_l2", "math_l3", "math_l4", "math_l5",
    ],
    # Offline, the real tier of bench/retention.py: three short-answer skills that SmolLM2-135M with LoRA learns in
    # part within 30 steps each; without replay it forgets the first (word-list reversal: 0.44 after its stage, 0.04
    # after the third, bench/results/retention).
    "demo_3": ["rg_word_reversal", "rg_addition", "rg_syllogism"],
    # Offline, for the demo: three tasks of short prompts (7-34 tokens) that SmolLM2-135M with LoRA learns in part
    # within 15 steps each, and that overwrite each other: without replay it forgets the first completely (copying
    # letters: 0.90 after its stage, 0.00 after the third; mssr_hf.demo).
    "forget_3": ["syn_copy", "rg_addition", "rg_letter_counting"],
    # Offline, longer: five reasoning-gym skills, the last with GSM8K-style worked solutions.
    "offline_5": ["rg_spell_backward", "rg_basic_arithmetic", "rg_letter_counting", "rg_word_sorting",
                  "rg_gsm_symbolic"],
}
# fmt: on
# The probe the paper reports next to a sequence (``ContinualRunner(..., probe_task=...)``); paper_11 has none.
SEQUENCE_PROBES: dict[str, str] = {"paper_3": "mmlu"}


def get_task(task: TaskLike, where: str = "task") -> TaskSpec:
    """A built-in task by name (see :data:`BUILTIN_TASKS`), a declared task (a mapping of :data:`TASK_KEYS`, see
    :func:`task_from_dict`), or ``task`` itself if it is already a spec.

    Raises:
        `InputError`: an unknown name (the message lists the known ones), or a declaration with a bad key.
    """
    if isinstance(task, TaskSpec):
        return task
    if isinstance(task, Mapping):
        return task_from_dict(task, where)
    if not isinstance(task, str) or task not in BUILTIN_TASKS:
        raise InputError(f"{where}: unknown task {task!r}; known tasks: {', '.join(sorted(BUILTIN_TASKS))} (or "
                         "declare your own: a mapping with name, dataset, ...)")  # fmt: skip
    return BUILTIN_TASKS[task]()


def get_sequence(tasks: TaskLike | Sequence[TaskLike]) -> list[TaskSpec]:
    """Specs for a sequence name (see :data:`SEQUENCES`), a single task, or a list of task names, specs and
    declarations (a list holding one sequence name is that sequence)."""
    if isinstance(tasks, str) and tasks in SEQUENCES:
        return [get_task(name) for name in SEQUENCES[tasks]]
    if isinstance(tasks, (str, TaskSpec, Mapping)):
        return [get_task(tasks, "tasks[0]")]
    tasks = list(tasks)
    if len(tasks) == 1 and isinstance(tasks[0], str) and tasks[0] in SEQUENCES:
        return get_sequence(tasks[0])
    return [get_task(t, f"tasks[{k}]") for k, t in enumerate(tasks)]


__all__ = [
    "BUILTIN_TASKS",
    "METRICS",
    "SEQUENCES",
    "SEQUENCE_PROBES",
    "TASK_KEYS",
    "TaskLike",
    "TaskSpec",
    "get_sequence",
    "get_task",
    "load_source",
    "make_offline_task",
    "synthetic_task",
    "task_from_dict",
]
