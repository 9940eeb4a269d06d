"""Plots of a continual run: the accuracy matrix, each task's score across stages, and the replay timeline (read from
the trainer's logs by the keys of :mod:`mssr_hf.log_keys`).

Figures are built with `matplotlib.figure.Figure` directly (no pyplot): no global state, no display needed, safe to
call from a training process. Every function accepts partial results (one stage, empty logs, missing keys, NaN or
``None`` scores) and still writes its file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from .cl_metrics import CL_METRIC_NAMES
from .layout import PLOTS
from .log_keys import MEMORY_STRENGTH_MEAN, MEMORY_STRENGTH_Q05, MEMORY_STRENGTH_Q95, REPLAY_RATIO

__all__ = ["plot_comparison", "render_plots"]

DPI = 120
# The summary metrics a plot title shows, by their short names (normalized_score is left out).
TITLE_METRICS = {"final_average": "avg", "average_forgetting": "forgetting", "backward_transfer": "BWT"}


def render_plots(output_dir: str | Path, results: dict[str, Any]) -> list[Path]:
    """Write ``output_dir/plots/{accuracy_matrix,task_scores,replay_timeline}.png`` from a run's ``results.json``.

    Args:
        output_dir (`str` or `Path`): the run's root directory.
        results (`dict`): as written by `ContinualRunner`: ``tasks``, ``matrix`` (row t = scores after stage t),
            ``probe`` / ``probe_task``, ``strategy``, ``metrics`` and ``stages`` (each with ``task``,
            ``step_offset`` and the trainer's ``log_history``).

    Returns:
        `list[Path]`: the written files.
    """
    plots = Path(output_dir) / PLOTS
    plots.mkdir(parents=True, exist_ok=True)
    tasks, matrix = _tasks(results), _matrix(results)
    figures = {
        "accuracy_matrix.png": _accuracy_matrix(tasks, matrix, results),
        "task_scores.png": _task_scores(tasks, matrix, results),
        "replay_timeline.png": _replay_timeline(results.get("stages") or [], tasks),
    }
    paths = []
    for name, figure in figures.items():
        figure.savefig(plots / name, dpi=DPI)
        paths.append(plots / name)
    return paths


def plot_comparison(results_by_strategy: dict[str, dict[str, Any]], path: str | Path) -> Path:
    """Two panels comparing strategies on one sequence: left, each earlier task's score after every stage from the
    one it was learned on (the forgetting curves; one line style per strategy, one colour per task); right, each
    task's score after the last stage, one bar per strategy (plus the mean over tasks).

    Args:
        results_by_strategy (`dict[str, dict]`): strategy name → that run's results (as for `render_plots`).
        path (`str` or `Path`): the PNG to write.

    Returns:
        `Path`: ``path``.
    """
    figure = _comparison(results_by_strategy)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=DPI)
    return path


_STYLES = ("--", "-", ":", "-.")


def _comparison(results_by_strategy: dict[str, dict[str, Any]]) -> Figure:
    groups: list[str] = []
    for results in results_by_strategy.values():
        groups += [t for t in _tasks(results) if t not in groups]
    groups.append("mean")
    figure = Figure(figsize=(5.0 + max(5.0, 1.0 + len(groups) * (0.5 + 0.35 * len(results_by_strategy))), 4.2))
    curves, bars_ax = figure.subplots(1, 2, width_ratios=[4, max(5, len(groups) * 1.2)])

    # Left: the forgetting curves of the tasks that later stages could make the model forget.
    stages = 0
    for k, (strategy, results) in enumerate(results_by_strategy.items()):
        tasks, matrix = _tasks(results), _matrix(results)
        stages = max(stages, len(matrix))
        for i, task in enumerate(tasks[: max(0, len(matrix) - 1)]):
            x = np.arange(i, len(matrix))
            curves.plot(x, matrix[i:, i], marker="o", ls=_STYLES[k % len(_STYLES)], color=f"C{groups.index(task)}",
                        label=f"{task} ({strategy})")  # fmt: skip
    curves.set_xticks(range(stages), [f"after {t}" for t in range(stages)])
    curves.set_ylim(0, 1.05)
    curves.set_ylabel("score")
    curves.set_title("Earlier tasks across stages", fontsize=10)
    curves.grid(alpha=0.3)
    if curves.get_legend_handles_labels()[0]:
        curves.legend(fontsize=7, loc="lower left", handlelength=3.5)  # long enough to show the line style

    # Right: every task after the last stage.
    width = 0.8 / max(1, len(results_by_strategy))
    x = np.arange(len(groups))
    top = 1.0
    for k, (strategy, results) in enumerate(results_by_strategy.items()):
        tasks, matrix = _tasks(results), _matrix(results)
        last = matrix[-1] if len(matrix) else np.full(len(tasks), np.nan)
        final = {t: last[i] for i, t in enumerate(tasks)}
        seen = [v for v in final.values() if math.isfinite(v)]
        final["mean"] = float(np.mean(seen)) if seen else math.nan
        heights = np.array([final.get(g, math.nan) for g in groups], dtype=float)
        positions = x - 0.4 + width * (k + 0.5)
        bars = bars_ax.bar(positions, np.nan_to_num(heights), width * 0.95, label=strategy, color=f"C{k}")
        bars_ax.bar_label(bars, labels=[f"{h:.2f}" if math.isfinite(h) else "–" for h in heights], fontsize=7,
                          padding=1)  # fmt: skip
        top = max(top, float(np.nanmax(heights, initial=0.0)))
    bars_ax.set_xticks(x, groups)
    bars_ax.set_ylim(0, top * 1.15)
    bars_ax.set_ylabel("score after the last stage")
    bars_ax.set_title("Final scores per task, by replay strategy", fontsize=10)
    bars_ax.axvline(len(groups) - 1.5, color="0.7", lw=0.8)  # separates the mean from the tasks
    bars_ax.legend(fontsize=8, loc="upper left", ncols=min(4, max(1, len(results_by_strategy))))
    bars_ax.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    return figure


# ------------------------------------------------------------------ the three run plots


def _accuracy_matrix(tasks: list[str], matrix: np.ndarray, results: dict[str, Any]) -> Figure:
    """Heatmap of R[t][i] (rows: after stage t; columns: tasks, then the probe task); NaN / unseen cells blank."""
    probe, probe_task = _probe(results, len(matrix))
    columns = tasks + ([f"{probe_task}\n(probe)"] if probe is not None else [])
    values = np.hstack([matrix, probe[:, None]]) if probe is not None else matrix
    rows = [f"after {t}: {tasks[t] if t < len(tasks) else '?'}" for t in range(len(matrix))]
    figure = Figure(figsize=(1.6 + 1.1 * max(1, len(columns)), 1.4 + 0.55 * max(1, len(rows))))
    ax = figure.add_subplot()
    ax.set_title(_title("Accuracy matrix", results), fontsize=10)
    if not rows:
        ax.text(0.5, 0.5, "no finished stage", transform=ax.transAxes, ha="center", va="center", color="0.5")
        ax.set_axis_off()
        return figure
    vmax = max(1.0, float(np.nanmax(values, initial=0.0)))
    image = ax.imshow(np.ma.masked_invalid(values), cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto")
    for (t, i), value in np.ndenumerate(values):
        if math.isfinite(value):
            color = "black" if value > 0.6 * vmax else "white"
            ax.text(i, t, f"{value:.2f}", ha="center", va="center", color=color, fontsize=9)
    ax.set_xticks(range(len(columns)), columns)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("evaluated on")
    figure.colorbar(image, ax=ax, fraction=0.05, pad=0.03, label="score")
    figure.tight_layout()
    return figure


def _task_scores(tasks: list[str], matrix: np.ndarray, results: dict[str, Any]) -> Figure:
    """One line per task: its score after every stage from the one it was learned on (the forgetting curve)."""
    figure = Figure(figsize=(max(5.5, 1.2 * len(matrix) + 3), 3.8))
    ax = figure.add_subplot()
    stages = np.arange(len(matrix))
    for i, task in enumerate(tasks[: len(matrix)]):
        ax.plot(stages[i:], matrix[i:, i], marker="o", color=f"C{i}", label=task)
    probe, probe_task = _probe(results, len(matrix))
    if probe is not None:
        ax.plot(stages, probe, marker="s", ls="--", color="0.4", label=f"{probe_task} (probe)")
    ax.set_xticks(stages, [f"{t}: {tasks[t] if t < len(tasks) else '?'}" for t in stages])
    ax.set_xlim(-0.3, max(0, len(matrix) - 1) + 0.3)
    top = max(1.0, float(np.nanmax(matrix, initial=0.0)))
    ax.set_ylim(0, top * 1.05)
    ax.set_xlabel("after stage")
    ax.set_ylabel("score")
    ax.set_title(_title("Score of each task across stages", results), fontsize=10)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best")
    figure.tight_layout()
    return figure


def _replay_timeline(stages: Sequence[dict[str, Any]], tasks: list[str]) -> Figure:
    """Replay ratio (stems at the logged steps where it is > 0) and the bank's mean strength, over the global step."""
    figure = Figure(figsize=(9, 4.2), layout="constrained")
    ax = figure.add_subplot()
    strength_ax = ax.twinx()
    ax.set_zorder(strength_ax.get_zorder() + 1)  # replay stems in front of the strength band
    ax.patch.set_visible(False)
    ratio_x, ratio_y, strength = [], [], []  # strength: (x, mean, q05, q95)
    offset, boundaries = 0, []
    for k, record in enumerate(stages):
        offset = _finite_or(record.get("step_offset"), offset)
        boundaries.append((offset, str(record.get("task") or (tasks[k] if k < len(tasks) else f"stage {k}"))))
        for entry in record.get("log_history") or []:
            step = _finite_or(entry.get("step"), math.nan)
            if not math.isfinite(step):
                continue
            ratio = _finite_or(entry.get(REPLAY_RATIO), 0.0)
            if ratio > 0:
                ratio_x.append(offset + step)
                ratio_y.append(ratio)
            mean = _finite_or(entry.get(MEMORY_STRENGTH_MEAN), math.nan)
            if math.isfinite(mean):
                q05 = _finite_or(entry.get(MEMORY_STRENGTH_Q05), mean)
                q95 = _finite_or(entry.get(MEMORY_STRENGTH_Q95), mean)
                strength.append((offset + step, mean, q05, q95))
        offset += _finite_or(record.get("steps"), 0)  # fallback for the next stage's offset

    if ratio_x:
        ax.vlines(ratio_x, 0, ratio_y, color="C0", lw=1.2, alpha=0.8)
        ax.plot(ratio_x, ratio_y, "o", color="C0", ms=3.5, label="replay ratio λ (logged steps with replay)")
    ax.set_ylim(0, max(ratio_y, default=0.5) * 1.25)
    ax.set_ylabel("replay ratio", color="C0")
    ax.set_xlabel("global optimizer step")

    if strength:
        xs, mean, q05, q95 = (np.array(v, dtype=float) for v in zip(*sorted(strength)))
        strength_ax.fill_between(xs, q05, q95, color="C1", alpha=0.15, lw=0, label="strength 5–95%")
        marker = "o" if len(xs) == 1 else None  # a lone point draws no line
        strength_ax.plot(xs, mean, color="C1", lw=1.5, marker=marker, ms=3.5, label="mean memory strength m (bank)")
    strength_ax.set_ylim(0, 1.05)
    strength_ax.set_ylabel("memory strength", color="C1")

    right = max([x for x, _ in boundaries] + ratio_x + [s[0] for s in strength] + [offset, 1])
    ax.set_xlim(0, right * 1.02)
    for x, task in boundaries:
        ax.axvline(x, color="0.5", ls=":", lw=1)
        ax.annotate(task, (x, 1), xycoords=("data", "axes fraction"), xytext=(3, -3), textcoords="offset points",
                    ha="left", va="top", fontsize=8, color="0.3")  # fmt: skip
    if not ratio_x and not strength:
        ax.text(0.5, 0.5, "no replay logged", transform=ax.transAxes, ha="center", va="center", color="0.5")
    handles = [h for a in (ax, strength_ax) for h in a.get_legend_handles_labels()[0]]
    if handles:
        figure.legend(handles=handles, fontsize=8, loc="outside lower center", ncols=len(handles), frameon=False)
    ax.set_title("Replay timeline (dotted: stage starts)", fontsize=10)
    return figure


# ------------------------------------------------------------------ reading results


def _tasks(results: dict[str, Any]) -> list[str]:
    tasks = [str(t) for t in results.get("tasks") or []]
    if not tasks:
        tasks = [str(s.get("task", f"task {k}")) for k, s in enumerate(results.get("stages") or [])]
    width = max([len(row) for row in results.get("matrix") or []], default=0)
    return tasks + [f"task {i}" for i in range(len(tasks), width)]


def _matrix(results: dict[str, Any]) -> np.ndarray:
    """Shape ``(stages, tasks)``, float, NaN for missing and not-yet-seen cells (j > t)."""
    tasks = _tasks(results)
    rows = results.get("matrix") or []
    out = np.full((len(rows), len(tasks)), np.nan)
    for t, row in enumerate(rows):
        for i, value in enumerate(row[: min(t + 1, len(tasks))]):
            out[t, i] = _finite_or(value, math.nan)
    return out


def _probe(results: dict[str, Any], stages: int) -> tuple[np.ndarray | None, str]:
    """The probe column (shape ``(stages,)``), or None when it has no number."""
    probe = list(results.get("probe") or [])[:stages]
    values = np.array([_finite_or(v, math.nan) for v in probe] + [math.nan] * (stages - len(probe)), dtype=float)
    if not np.isfinite(values).any():
        return None, ""
    return values, str(results.get("probe_task") or "probe")


def _title(what: str, results: dict[str, Any]) -> str:
    metrics = results.get("metrics") or {}
    parts = [f"{what}: {results.get('strategy', '')}".rstrip(": ")]
    for key in CL_METRIC_NAMES:
        value = _finite_or(metrics.get(key), math.nan)
        if key in TITLE_METRICS and math.isfinite(value):
            parts.append(f"{TITLE_METRICS[key]} {value:.3f}")
    return " · ".join(parts)


def _finite_or(value: Any, default: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) else default
