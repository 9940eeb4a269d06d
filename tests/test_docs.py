"""README.md stays in step with the code."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_config_reference_in_readme_is_current():
    """README's MSSRConfig table is generated from the fields' help metadata; regenerate it when fields change."""
    done = subprocess.run([sys.executable, "scripts/config_reference.py", "--check"], cwd=ROOT)
    assert done.returncode == 0, "README.md is stale: run `.venv/bin/python scripts/config_reference.py`"


def test_every_config_field_is_in_the_readme_table():
    import dataclasses

    from trl import SFTConfig

    from mssr_hf import MSSRConfig

    readme = (ROOT / "README.md").read_text()
    inherited = {f.name for f in dataclasses.fields(SFTConfig)}
    for f in dataclasses.fields(MSSRConfig):
        if f.name not in inherited:
            assert f"| `{f.name}` |" in readme, f.name
            assert f.metadata.get("help"), f"{f.name} has no help text"


def test_readme_names_the_two_setup_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/demo.sh" in readme and "bash scripts/test.sh" in readme
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
