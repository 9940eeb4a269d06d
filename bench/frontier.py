"""The budget frontier of ``bench/retention.py --frontier``: retention against replay share, per selection rule.

Retention is mostly bought with replayed samples, so selection rules are compared at equal budgets: each rule
replays the same fraction of every batch (``share``; a replay every step, ``replay_lambda0 = share``) at several
shares, with the same seeds and no staleness cap (``replay_staleness_cap=0``, which would otherwise fill the buffer
with the longest-unreviewed samples first, whatever the rule). A memory-aware rule wins only if its curve lies above
uniform selection's, and the paired differences (same seed, same share) say how consistently.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

SHARES = (0.05, 0.1, 0.2, 0.3)
UNIFORM = "uniform"
# selection rule -> (replay_strategy, MSSRConfig overrides); frontier_variants makes every rule replay every step.
SELECTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    UNIFORM: ("fixed", {}),
    "memory": ("mssr_spl", {}),
    "calibrated": ("mssr_spl", {"replay_weighting": "calibrated"}),
    "forgotten": ("mssr_spl", {"replay_weighting": "forgotten"}),
    "uniform_front": ("fixed", {"replay_ratio_profile": "front"}),
    "forgotten_front": ("mssr_spl", {"replay_weighting": "forgotten", "replay_ratio_profile": "front"}),
    # Each step's replay shifted between tasks by their observed loss gap (replay_task_gap_weight), within a task
    # uniform (zeta 0) or by predicted gap.
    "task_gap": ("mssr_spl", {"replay_weighting": "forgotten", "replay_zeta": 0.0, "replay_task_gap_weight": 1.0}),
    "forgotten_task_gap": ("mssr_spl", {"replay_weighting": "forgotten", "replay_task_gap_weight": 1.0}),
}


def variant_name(selection: str, share: float) -> str:
    return f"{selection}@{share:g}"


def parse_name(variant: str) -> tuple[str, float] | None:
    """(selection, share) of a frontier variant's name, or None for any other variant."""
    selection, sep, share = variant.rpartition("@")
    if not sep:
        return None
    try:
        return selection, float(share)
    except ValueError:
        return None


def frontier_variants(
    shares: list[float], selections: dict[str, tuple[str, dict[str, Any]]]
) -> list[tuple[str, str, dict[str, Any]]]:
    """(variant name, replay_strategy, overrides) for every selection rule at every share."""
    out = []
    for share in shares:
        for selection, (strategy, overrides) in selections.items():
            # No staleness cap: it fills the buffer oldest-first for every rule, which would hide the selection.
            settings = {"replay_staleness_cap": 0, **overrides, "replay_lambda0": share, "replay_lambda_min": 0.0}
            if strategy == "fixed":
                settings["replay_fixed_interval"] = 1
            else:
                settings["replay_first_interval"] = 1
            out.append((variant_name(selection, share), strategy, settings))
    return out


def paired_differences(records: list[dict[str, Any]], metric: str) -> dict[tuple[str, float], dict[str, Any]]:
    """For every memory-aware selection and share: the per-seed difference of ``metric`` to uniform selection at
    the same share and seed, its mean and the number of seeds on which it is positive."""
    by_key: dict[tuple[str, float, int], float] = {}
    for r in records:
        parsed = parse_name(r["variant"])
        if parsed:
            by_key[(*parsed, r["seed"])] = r["metrics"][metric]
    out = {}
    for (selection, share, seed), value in sorted(by_key.items()):
        if selection == UNIFORM or (UNIFORM, share, seed) not in by_key:
            continue
        entry = out.setdefault((selection, share), {"diffs": []})
        entry["diffs"].append(value - by_key[(UNIFORM, share, seed)])
    for entry in out.values():
        diffs = entry["diffs"]
        entry["mean"] = statistics.fmean(diffs)
        entry["positive"] = sum(d > 0 for d in diffs)
        entry["negative"] = sum(d < 0 for d in diffs)
    return out


def markdown(summary: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """The frontier as tables: final average and forgetting per selection (rows) and share (columns), then the
    paired differences to uniform selection."""
    cells: dict[str, dict[float, dict]] = {}
    for variant, row in summary.items():
        parsed = parse_name(variant)
        if parsed:
            cells.setdefault(parsed[0], {})[parsed[1]] = row
    if not cells:
        return ""
    shares = sorted({s for by_share in cells.values() for s in by_share})
    lines = []
    for metric, label in (("final_average", "final average"), ("average_forgetting", "average forgetting")):
        lines += [f"Budget frontier, {label} (mean ± std over seeds; in brackets the share of the trained samples "
                  "that were replays: per-step counts are rounded, so it differs from the nominal share):", "",
                  "| selection | " + " | ".join(f"{s:.0%}" for s in shares) + " |",
                  "|---|" + "---:|" * len(shares)]  # fmt: skip
        for selection, by_share in cells.items():
            row = []
            for s in shares:
                r = by_share.get(s)
                row.append(
                    "–" if r is None else f"{r[metric][0]:.3f} ± {r[metric][1]:.3f} ({r['replay_share'][0]:.1%})"
                )
            lines.append(f"| {selection} | " + " | ".join(row) + " |")
        lines.append("")
    for metric, better in (("final_average", "higher"), ("average_forgetting", "lower")):
        diffs = paired_differences(records, metric)
        if not diffs:
            continue
        lines += [f"Paired difference to uniform selection, {metric} ({better} is better): mean over seeds "
                  "(seeds above / below uniform).", "",
                  "| selection | " + " | ".join(f"{s:.0%}" for s in shares) + " |",
                  "|---|" + "---:|" * len(shares)]  # fmt: skip
        for selection in [s for s in cells if s != UNIFORM]:
            row = []
            for s in shares:
                d = diffs.get((selection, s))
                row.append("–" if d is None else f"{d['mean']:+.3f} ({d['positive']}/{d['negative']})")
            lines.append(f"| {selection} | " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


def plot(summary: dict[str, Any], path: Path, title: str) -> Path | None:
    """Final average and forgetting against the measured replay share, one line per selection rule."""
    curves: dict[str, list[tuple[float, tuple, tuple]]] = {}
    for variant, row in summary.items():
        parsed = parse_name(variant)
        if parsed:
            curves.setdefault(parsed[0], []).append(
                (row["replay_share"][0], row["final_average"], row["average_forgetting"])
            )
    if not curves:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for selection, points in curves.items():
        points.sort()
        x = [100 * p[0] for p in points]
        style = dict(marker="o", capsize=3, linestyle="--" if selection == UNIFORM else "-")
        for ax, i in zip(axes, (1, 2)):
            ax.errorbar(x, [p[i][0] for p in points], yerr=[p[i][1] for p in points], label=selection, **style)
    for ax, label in zip(axes, ("final average (higher is better)", "average forgetting (lower is better)")):
        ax.set_xlabel("replayed samples (% of the samples trained)")
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
