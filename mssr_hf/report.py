"""Result tables and the Markdown report of continual runs, as the CLI, the demo, the notebook and the example script
print and write them.

:func:`format_results` renders one run's accuracy matrix and summary metrics as plain text, :func:`side_by_side`
puts several such blocks next to each other, :func:`compare_runs` sets runs of one sequence side by side in narrow
blocks with the evaluation's standard errors and :func:`describe_comparison`'s sentences of what they show, and
:func:`write_report` writes ``report.md`` with every run's table and the plots. Pure Python: it reads the results
dict that ``ContinualRunner.run`` returns (``results.json``).
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from .cl_metrics import final_average_standard_error, lower_triangle, score_standard_error
from .layout import REPORT

__all__ = ["compare_runs", "describe_comparison", "format_results", "matrix_block", "side_by_side", "write_report"]


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


def matrix_block(name: str, results: dict) -> str:
    """One run's accuracy matrix as a narrow block, to stand next to others (:func:`compare_runs`): ``name``; a row per
    stage ("after" the k-th task) and a column per task, both numbered in training order; the final average with its
    standard error (from ``results["eval_sizes"]``, when there) and the average forgetting."""
    tasks, metrics = results["tasks"], results.get("metrics", {})
    lines = [name, "after" + "".join(f"{i + 1:>6}" for i in range(len(tasks)))]
    for stage, row in enumerate(results["matrix"]):
        cells = [_score(row[i]) if i <= stage else "–" for i in range(len(tasks))]
        lines.append(f"{stage + 1:>5}" + "".join(cell.rjust(6) for cell in cells))
    if results["matrix"]:
        error = final_average_standard_error(results["matrix"], results.get("eval_sizes") or [])
        plus_minus = f" ± {error:.2f}" if math.isfinite(error) else ""
        lines.append(f"final average {_score(metrics.get('final_average'))}{plus_minus}")
        lines.append(f"forgetting    {_score(metrics.get('average_forgetting'))}")
    return "\n".join(lines)


def compare_runs(runs: dict[str, dict], gap: int = 4, width: int = 100) -> str:
    """Runs of one task sequence side by side (:func:`matrix_block`, in the order of ``runs``), under a legend of the
    tasks and the evaluation's size, followed by :func:`describe_comparison` (lines of at most ``width``)."""
    first = next(iter(runs.values()))
    legend = ", ".join(f"{i + 1} {task}" for i, task in enumerate(first["tasks"]))
    sizes = sorted(set(first.get("eval_sizes") or []))
    examples = "" if not sizes else f" on {sizes[0]}" if len(sizes) == 1 else f" on {sizes[0]}-{sizes[-1]}"
    header = textwrap.fill(
        f"Scores after each stage (rows) on each task (columns), in training order: {legend}. Each task is "
        f"scored{examples} held-out examples; ± is the standard error of that evaluation (it leaves out the spread "
        "between training seeds).",
        width,
    )
    table = side_by_side([matrix_block(name, results) for name, results in runs.items()], gap)
    return "\n".join([header, "", table, "", textwrap.fill(describe_comparison(runs), width)]).rstrip()


def describe_comparison(runs: dict[str, dict]) -> str:
    """What runs of one sequence show, in plain words written from their numbers. The first run is the reference (the
    run without replay): how far the earlier task it forgot most fell, and where each other run left that task; then
    the final averages, and which of them differ by more than twice the standard error of their difference (the
    evaluation's; from ``eval_sizes``). Empty when a run is unfinished."""
    names = list(runs)
    reference = runs[names[0]]
    tasks, sizes = reference["tasks"], reference.get("eval_sizes") or []
    matrices = {name: lower_triangle(results["matrix"]) for name, results in runs.items() if results["matrix"]}
    if len(tasks) < 2 or any(len(matrices.get(name, [])) < len(tasks) for name in names):
        return ""
    first = matrices[names[0]]
    drops = [first[i][i] - first[-1][i] for i in range(len(tasks) - 1)]
    task = max(range(len(drops)), key=lambda i: -math.inf if math.isnan(drops[i]) else drops[i])
    n = sizes[task] if task < len(sizes) else 0
    noise = 2 * math.hypot(score_standard_error(first[task][task], n), score_standard_error(first[-1][task], n))
    before, after = _score(first[task][task]), _score(first[-1][task])
    if not drops[task] > (noise if math.isfinite(noise) else 0.0):  # without the sizes, any drop counts
        sentence = (f"Without replay ({names[0]}), no earlier task fell by more than twice its standard error (the "
                    f"largest drop: {tasks[task]}, from {before} to {after}).")  # fmt: skip
    else:
        ends = [_score(matrices[name][-1][task]) for name in names[1:]]
        others = [f"with {name} {'it ended at' if k == 0 else 'at'} {end}" for k, (name, end) in
                  enumerate(zip(names[1:], ends))]  # fmt: skip
        sentence = f"Without replay ({names[0]}), {tasks[task]} fell from {before} to {after}"
        sentence += f"; {', '.join(others)}." if others else "."
    averages = {name: runs[name].get("metrics", {}).get("final_average") for name in names}
    errors = {name: final_average_standard_error(runs[name]["matrix"], runs[name].get("eval_sizes") or [])
              for name in names}  # fmt: skip
    sentence += " Final averages: " + ", ".join(f"{name} {_score(averages[name])}" for name in names)
    if not all(value is not None and math.isfinite(value) for value in [*averages.values(), *errors.values()]):
        return sentence + "."  # no standard errors to judge the differences by
    sentence += f" (± {max(errors.values()):.2f} at most)"

    def versus(a: str, b: str) -> str:  # where b ends against a: above, below, or level (within the noise)
        difference, noise = averages[b] - averages[a], 2 * math.hypot(errors[a], errors[b])
        return "level with" if abs(difference) <= noise else "above" if difference > 0 else "below"

    groups: dict[str, list[str]] = {}
    for name in names[1:]:
        groups.setdefault(versus(names[0], name), []).append(name)
    verdicts = [
        f"{_join(group)} end{'s' if len(group) == 1 else ''} {where} {names[0]}" for where, group in groups.items()
    ]
    verdicts += [f"{b} is {versus(a, b)} {a}" for k, a in enumerate(names[1:], 1) for b in names[k + 1 :]]
    if verdicts:
        sentence += f": {_join(verdicts)} (a difference counts when it is more than twice its standard error)"
    return sentence + "."


def _score(value: float | None) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.2f}"


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def write_report(output_dir: Path, runs: dict[str, dict], plots: list[Path]) -> Path:
    """A Markdown report: with several runs, their comparison (:func:`compare_runs`); each run's matrix and metrics;
    the plots."""
    lines = ["# mssr-hf report", ""]
    if len(runs) > 1:
        lines += ["```", compare_runs(runs), "```", ""]
    for name, results in runs.items():
        lines += [f"## {name}", "", "```", format_results(results), "```", ""]
    for plot in plots:
        lines += [f"![{plot.stem}]({plot.relative_to(output_dir) if plot.is_relative_to(output_dir) else plot})", ""]
    path = output_dir / REPORT
    path.write_text("\n".join(lines))
    return path
