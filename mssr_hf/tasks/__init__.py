"""Tasks: specs (`TaskSpec`), the paper's Hub tasks, offline tasks from installed packages, and named sequences."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .builtin import HUB_TASKS
from .offline import CHATTERBOT_CATEGORIES, REASONING_GYM, champ_task, chatterbot_task, reasoning_gym_task
from .spec import METRICS, TaskSpec, load_source

BUILTIN_TASKS: dict[str, Callable[[], TaskSpec]] = {
    **HUB_TASKS,
    **{name: (lambda name=name: reasoning_gym_task(name)) for name in REASONING_GYM},
    "champ_math": champ_task,
    **{f"chatterbot_{c}": (lambda c=c: chatterbot_task(c)) for c in CHATTERBOT_CATEGORIES},
}

SEQUENCES: dict[str, list[str]] = {
    # Sec. 4: Alpaca-GPT4 -> GSM8K (reasoning-formatted) -> MATH; MMLU is the general-knowledge probe.
    "paper_3": ["alpaca_gpt4", "gsm8k_rft", "math"],
    "paper_11": [
        "ag_news",
        "squad",
        "sciq",
        "boolq",
        "arc_challenge",
        "gsm8k_rft",
        "math_l1",
        "math_l2",
        "math_l3",
        "math_l4",
        "math_l5",
    ],  # fmt: skip
    # Offline (packages only): three skills with different answer formats.
    "demo_3": ["rg_spell_backward", "rg_basic_arithmetic", "rg_letter_counting"],
    "offline_5": ["rg_spell_backward", "rg_basic_arithmetic", "rg_letter_counting", "rg_chain_sum", "champ_math"],
}


def get_task(task: str | TaskSpec) -> TaskSpec:
    """A built-in task by name (or ``task`` itself if it is already a spec)."""
    if isinstance(task, TaskSpec):
        return task
    if task not in BUILTIN_TASKS:
        raise ValueError(f"unknown task {task!r}; known tasks: {', '.join(sorted(BUILTIN_TASKS))}")
    return BUILTIN_TASKS[task]()


def get_sequence(tasks: str | TaskSpec | Sequence[str | TaskSpec]) -> list[TaskSpec]:
    """Specs for a sequence name (see :data:`SEQUENCES`), a single task, or a list of names/specs."""
    if isinstance(tasks, str) and tasks in SEQUENCES:
        return [get_task(name) for name in SEQUENCES[tasks]]
    if isinstance(tasks, (str, TaskSpec)):
        return [get_task(tasks)]
    if len(tasks) == 1 and isinstance(tasks[0], str) and tasks[0] in SEQUENCES:
        return get_sequence(tasks[0])
    return [get_task(t) for t in tasks]


__all__ = ["BUILTIN_TASKS", "METRICS", "SEQUENCES", "TaskSpec", "get_sequence", "get_task", "load_source"]
