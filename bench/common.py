"""What the benchmarks share: the repository root, the machine they ran on, and the tiny Llama they train.

Importing this module puts the repository root first on ``sys.path``, so a benchmark measures this checkout's
``mssr_hf`` (not whatever an editable install points at). The benchmarks run as ``python bench/<name>.py``, which
puts this folder on ``sys.path``; each also adds it itself, so that ``import common`` works when a test loads the
script by its path.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path[:1]:
    sys.path.insert(0, str(ROOT))


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; ``platform.processor()`` where that is missing)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_line() -> str:
    """One line for a report: CPU model and logical cores (the benchmarks run on CPU)."""
    return f"{cpu_model()}, {os.cpu_count()} cores, no GPU"


def tiny_model_dir(path: Path, corpus: Callable[[], Iterable[str]], vocab_size: int = 512, **architecture) -> Path:
    """A tiny random Llama and a tokenizer trained on ``corpus()`` (called only if needed), saved once to ``path``
    and reused from there (load both with ``from_pretrained``). ``architecture``: the keyword arguments of
    :func:`mssr_hf.tiny_model.build_tiny_model` (``hidden_size``, ``layers``, ``seed``, ...)."""
    from mssr_hf.tiny_model import build_tiny_model, build_tiny_tokenizer

    if not (path / "config.json").is_file():
        tokenizer = build_tiny_tokenizer(corpus(), vocab_size=vocab_size)
        build_tiny_model(tokenizer, **architecture).save_pretrained(path)
        tokenizer.save_pretrained(path)
    return path
