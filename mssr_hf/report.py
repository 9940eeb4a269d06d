"""Result tables and the Markdown report of continual runs, as the CLI, the demo, the notebook and the example script
print and write them.

:func:`format_results` renders one run's accuracy matrix and summary metrics as plain text, :func:`side_by_side`
puts several such blocks next to each other, and :func:`write_report` writes ``report.md`` with every run's table
and the plots. Pure Python: it reads the results dict that ``ContinualRunner.run`` returns (``results.json``).
"""

from __future__ import annotations

from pathlib import Path

from .layout import REPORT

__all__ = ["format_results", "side_by_side", "write_report"]


def format_results(results: dict) -> str:
    """The accuracy matrix and summary metrics as plain text."""
    tasks = results["tasks"]
    width = max(8, *(len(t) for t in tasks))
    lines = [
        f"strategy: {results.get('strategy')}",
        "after stage".ljust(14) + "".join(t.rjust(width + 2) for t in tasks),
    ]
    for stage, row in enumerate(results["matrix"]):
        cells = "".join(
            ("–" if i > stage or row[i] is None else f"{row[i]:.3f}").rjust(width + 2) for i in range(len(tasks))
        )
        lines.append(f"{stage} {tasks[stage]}"[:14].ljust(14) + cells)
    for key, value in results.get("metrics", {}).items():
        lines.append(f"{key}: {value:.4f}")
    return "\n".join(lines)


def side_by_side(blocks: list[str], gap: int = 4) -> str:
    """Text blocks (e.g. :func:`format_results` of several runs) as columns, ``gap`` spaces apart."""
    split = [b.splitlines() for b in blocks]
    widths = [max(len(line) for line in lines) for lines in split]
    height = max(len(lines) for lines in split)
    rows = []
    for i in range(height):
        cells = [(lines[i] if i < len(lines) else "").ljust(w) for lines, w in zip(split, widths)]
        rows.append((" " * gap).join(cells).rstrip())
    return "\n".join(rows)


def write_report(output_dir: Path, runs: dict[str, dict], plots: list[Path]) -> Path:
    """A Markdown report: each run's matrix and metrics, and the plots."""
    lines = ["# mssr-hf report", ""]
    for name, results in runs.items():
        lines += [f"## {name}", "", "```", format_results(results), "```", ""]
    for plot in plots:
        lines += [f"![{plot.stem}]({plot.relative_to(output_dir) if plot.is_relative_to(output_dir) else plot})", ""]
    path = output_dir / REPORT
    path.write_text("\n".join(lines))
    return path
