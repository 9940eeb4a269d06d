"""Writes the MSSRConfig reference table of README.md from the fields' help metadata.

.venv/bin/python scripts/config_reference.py          # rewrite README.md between the markers
.venv/bin/python scripts/config_reference.py --check  # exit 1 if README.md is out of date (tests run this)
"""

import dataclasses
import sys
from pathlib import Path

from trl import SFTConfig

from mssr_hf.mssr_config import MSSRConfig

BEGIN, END = "<!-- config-reference:begin -->", "<!-- config-reference:end -->"
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


def render(readme: str) -> str:
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{reference_table()}\n{END}{tail}"


if __name__ == "__main__":
    current = README.read_text()
    wanted = render(current)
    if "--check" in sys.argv:
        sys.exit(0 if current == wanted else 1)
    README.write_text(wanted)
