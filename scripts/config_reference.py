"""Writes the MSSRConfig reference table of README.md from the fields' help metadata, and the table of the keys of a
declared task from mssr_hf.tasks.TASK_KEYS.

.venv/bin/python scripts/config_reference.py          # rewrite README.md between the markers
.venv/bin/python scripts/config_reference.py --check  # exit 1 if README.md is out of date (tests run this)
"""

import dataclasses
import sys
from pathlib import Path

from trl import SFTConfig

from mssr_hf.mssr_config import MSSRConfig
from mssr_hf.tasks import TASK_KEYS

BEGIN, END = "<!-- config-reference:begin -->", "<!-- config-reference:end -->"
TASKS_BEGIN, TASKS_END = "<!-- task-keys:begin -->", "<!-- task-keys:end -->"
README = Path(__file__).resolve().parents[1] / "README.md"


def reference_table() -> str:
    inherited = {f.name for f in dataclasses.fields(SFTConfig)}
    rows = ["| field | default | description |", "|---|---|---|"]
    for f in dataclasses.fields(MSSRConfig):
        if f.name in inherited:
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        rows.append(f"| `{f.name}` | `{default!r}` | {f.metadata['help']} |")
    return "\n".join(rows)


def task_keys_table() -> str:
    return "\n".join(["| key | meaning |", "|---|---|"] + [f"| `{k}` | {v} |" for k, v in TASK_KEYS.items()])


def _between(text: str, begin: str, end: str, table: str) -> str:
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{table}\n{end}{tail}"


def render(readme: str) -> str:
    readme = _between(readme, BEGIN, END, reference_table())
    return _between(readme, TASKS_BEGIN, TASKS_END, task_keys_table())


if __name__ == "__main__":
    current = README.read_text()
    wanted = render(current)
    if "--check" in sys.argv:
        sys.exit(0 if current == wanted else 1)
    README.write_text(wanted)
