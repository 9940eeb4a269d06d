"""Generated letter-string tasks that a tiny model learns from scratch in a few hundred steps, and that interfere:
every task reads the same kind of input (a few letters) and writes the same kind of output (letters), so training
one overwrites the others unless they are replayed. They feed the synthetic tier of ``bench/retention.py`` and fast
tests.

A row is ``"<task>: c a f d ="`` -> ``" d f a c"`` (letters separated by spaces, so each one is a token for any
tokenizer); the answer is scored by exact match on the first line.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

from datasets import Dataset, DatasetDict

from ..errors import InputError
from .extract import first_line
from .spec import TaskSpec

ALPHABET = "abcdefgh"


def _shift(letters: list[str]) -> list[str]:
    return [ALPHABET[(ALPHABET.index(c) + 1) % len(ALPHABET)] for c in letters]


def _mirror(letters: list[str]) -> list[str]:
    return [ALPHABET[len(ALPHABET) - 1 - ALPHABET.index(c)] for c in letters]


def _swap_pairs(letters: list[str]) -> list[str]:
    out = list(letters)
    for i in range(0, len(out) - 1, 2):
        out[i], out[i + 1] = out[i + 1], out[i]
    return out


# name -> (the instruction word that opens the prompt, the letters -> answer function)
TRANSFORMS: dict[str, tuple[str, Callable[[list[str]], list[str]]]] = {
    "syn_copy": ("copy", list),
    "syn_reverse": ("reverse", lambda s: s[::-1]),
    "syn_sort": ("sort", sorted),
    "syn_shift": ("shift", _shift),
    "syn_rotate": ("rotate", lambda s: s[1:] + s[:1]),
    "syn_mirror": ("mirror", _mirror),
    "syn_swap": ("swap", _swap_pairs),
}


def synthetic_task(
    name: str, size: int = 2000, seed: int = 0, min_len: int = 3, max_len: int = 5, eval_size: int = 200
) -> TaskSpec:
    """A generated letter-string task of :data:`TRANSFORMS`.

    Args:
        name (`str`): e.g. `"syn_reverse"`.
        size (`int`, *optional*, defaults to `2000`): distinct inputs to generate (no input appears twice, so no
            evaluation input is also a training one); the last ``eval_size`` of them form the evaluation split.
        seed (`int`, *optional*, defaults to `0`): the generator's seed (each task mixes its name in, so two tasks
            with one seed draw different inputs).
        min_len (`int`, *optional*, defaults to `3`), max_len (`int`, *optional*, defaults to `5`): input length.
        eval_size (`int`, *optional*, defaults to `200`): inputs held out for evaluation.
    """
    if name not in TRANSFORMS:
        raise InputError(f"unknown synthetic task {name!r}; known: {', '.join(TRANSFORMS)}")
    if not 1 <= min_len <= max_len:
        raise InputError(f"synthetic task {name!r}: need 1 <= min_len <= max_len, got {min_len}, {max_len}")
    possible = sum(len(ALPHABET) ** n for n in range(min_len, max_len + 1))
    if not 0 <= eval_size < size <= possible:
        raise InputError(
            f"synthetic task {name!r}: need 0 <= eval_size < size <= {possible} (the distinct inputs of "
            f"{min_len}-{max_len} letters), got eval_size={eval_size}, size={size}"
        )
    word, transform = TRANSFORMS[name]

    def source() -> DatasetDict:
        rng = random.Random(f"{name}-{seed}")
        rows, seen = [], set()
        while len(rows) < size:
            letters = [rng.choice(ALPHABET) for _ in range(rng.randint(min_len, max_len))]
            if tuple(letters) not in seen:
                seen.add(tuple(letters))
                rows.append({"letters": " ".join(letters), "answer": " ".join(transform(letters))})
        cut = size - eval_size
        return DatasetDict({"train": Dataset.from_list(rows[:cut]), "test": Dataset.from_list(rows[cut:])})

    def to_example(row: dict) -> dict:
        return {"prompt": f"{word}: {row['letters']} =", "completion": f" {row['answer']}", "reference": row["answer"]}

    return TaskSpec(name, source, to_example, extract_answer=first_line, max_new_tokens=2 * max_len + 2,
                    eval_split="test", description=f"{word} a string of letters (generated)",
                    metadata={"size": size, "seed": seed, "min_len": min_len, "max_len": max_len,
                              "eval_size": eval_size})  # fmt: skip


SYNTHETIC_TASKS: dict[str, Callable[[], TaskSpec]] = {name: partial(synthetic_task, name) for name in TRANSFORMS}
