"""README.md stays in step with the code."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _python_blocks(text: str) -> list[str]:
    """The bodies of a Markdown text's ```python fences."""
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


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


def test_readme_python_blocks_compile_and_import_real_names():
    """The quickstart is code a user pastes: it must parse, and every name it imports from mssr_hf must exist."""
    import ast
    import importlib

    blocks = _python_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 2
    for block in blocks:
        tree = ast.parse(block)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module.startswith("mssr_hf"):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module}.{alias.name}"
    quickstart = blocks[0].splitlines()
    assert len([line for line in quickstart if line.strip()]) <= 20  # a 20-line quickstart


def test_benchmarks_recommended_settings_are_valid_configs(tmp_path):
    """BENCHMARKS.md's recommended settings are real MSSRConfig fields and pass its validation."""
    from mssr_hf import MSSRConfig

    text = (ROOT / "BENCHMARKS.md").read_text()
    lines = [line for block in _python_blocks(text) for line in block.splitlines()]
    calls = [line.split("#")[0].strip() for line in lines if "MSSRConfig(" in line]
    assert len(calls) >= 2
    prefix = f"MSSRConfig(output_dir={str(tmp_path)!r}, use_cpu=True, "
    for call in calls:
        config = eval(call.replace("MSSRConfig(", prefix, 1), {"MSSRConfig": MSSRConfig})
        assert isinstance(config, MSSRConfig)
    # The result folders it cites exist.
    for folder in re.findall(r"bench/results/retention/[\w.+=*-]+", text):
        assert list(ROOT.glob(folder)), folder
