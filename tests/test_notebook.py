"""notebooks/quickstart.ipynb: stored clean (valid, parameters cell, Colab badge, no outputs), its settings match the
demo's, and it runs end to end on the tiny model (QUICK) in a Jupyter kernel."""

import json
from pathlib import Path

import nbformat
import pytest

from mssr_hf import MSSRConfig
from mssr_hf.demo import SEQUENCE, STRATEGIES, demo_settings, demo_sizes, strategy_settings
from mssr_hf.tasks import get_sequence

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "quickstart.ipynb"
BADGE = (
    "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
    "(https://colab.research.google.com/github/mssr-hf/mssr_hf/blob/main/notebooks/quickstart.ipynb)"
)
NOT_PUSHING = "Not pushing:"


def read_notebook():
    return nbformat.read(NOTEBOOK, as_version=4)


def tagged(nb, tag: str):
    cells = [cell for cell in nb.cells if tag in cell.metadata.get("tags", [])]
    assert len(cells) == 1, f"expected one cell tagged {tag!r}, found {len(cells)}"
    return cells[0]


def code_cell(nb, cell_id: str):
    return next(cell for cell in nb.cells if cell.get("id") == cell_id)


def test_notebook_is_stored_clean():
    nb = read_notebook()
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    assert nb.cells[0].cell_type == "markdown" and BADGE in nb.cells[0].source
    params = tagged(nb, "parameters")
    assert params.cell_type == "code"
    names = {}
    exec(params.source, {}, names)
    assert names == {"QUICK": False, "OUTPUT_DIR": "mssr_quickstart", "STEPS": 15, "PUSH_REPO": None}
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:80]
            assert "!pip" not in cell.source and "%pip" not in cell.source  # plain Python for nbclient
            compile(cell.source, cell.get("id", "cell"), "exec")


@pytest.mark.parametrize("quick", [True, False])
def test_notebook_trains_with_the_demos_settings_at_its_own_length(quick):
    """The settings cell gives the demo's three strategies with their settings and the demo's sizes, with the replay
    step counts scaled to STEPS; the tasks cell loads the demo's sequence."""
    nb = read_notebook()
    names = {"QUICK": quick, "STEPS": 17}
    exec(code_cell(nb, "settings").source, names)
    assert list(names["settings"]) == list(STRATEGIES) == ["none", "er", "recommended"]
    assert names["settings"] == {name: strategy_settings(name, quick, steps=17) for name in STRATEGIES}
    assert names["sizes"] == demo_sizes(quick)
    assert names["settings"]["er"]["max_steps"] == 17 and names["settings"]["er"]["replay_refresh_interval"] == 1
    assert demo_settings(quick)["max_steps"] == (12 if quick else 15)
    assert "get_sequence(SEQUENCE)" in code_cell(nb, "tasks").source


@pytest.mark.slow
def test_notebook_runs_quick_end_to_end(tmp_path, monkeypatch):
    """Executed as on Colab or Jupyter, with the parameters cell replaced as papermill would: every cell runs,
    the comparison prints and the plots show inline, the three runs write a full results.json, and the push cell
    explains it does not push."""
    from nbclient import NotebookClient

    for name, value in (("HF_HUB_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"),
                        ("OMP_NUM_THREADS", "1"), ("TOKENIZERS_PARALLELISM", "false")):  # fmt: skip
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    out = tmp_path / "quickstart"
    nb = read_notebook()
    tagged(nb, "parameters").source = f"QUICK = True\nOUTPUT_DIR = {str(out)!r}\nSTEPS = 6\nPUSH_REPO = None\n"

    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()

    outputs = [output for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    assert any("image/png" in output.get("data", {}) for output in outputs)
    text = "".join(output.get("text", "") for output in outputs if output.output_type == "stream")
    assert "'loss'" not in text  # the per-step logs went to results.json
    comparison = text[text.index("Scores after each stage") :].splitlines()
    assert next(line for line in comparison if line.startswith("none")).split() == list(STRATEGIES)
    assert next(line for line in comparison if line.startswith("final average")).count("±") == 3
    assert any(line.startswith("Without replay (none)") for line in comparison)
    push_output = "".join(output.get("text", "") for output in code_cell(nb, "push").outputs)
    assert NOT_PUSHING in push_output, push_output

    tasks = get_sequence(SEQUENCE)
    for name in STRATEGIES:
        strategy = MSSRConfig(output_dir=str(tmp_path), **strategy_settings(name, True)).replay_strategy
        results = json.loads((out / name / "results.json").read_text())
        assert results["strategy"] == strategy and results["tasks"] == [t.name for t in tasks]
        assert len(results["matrix"]) == len(tasks)
        assert [s["steps"] for s in results["stages"]] == [6] * len(tasks)
        assert (out / name / "plots" / "accuracy_matrix.png").is_file()
        replayed = sum(s["replayed_samples"] for s in results["stages"])
        assert (replayed > 0) == (name != "none"), (name, replayed)
    assert (out / "comparison.png").is_file()
