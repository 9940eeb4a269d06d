r"""Paired comparisons pooled over several sequences: does a setting that won on one sequence hold on others?

``bench/retention.py`` compares variants on one sequence, paired by seed. A preset is chosen on the development
sequence and checked on report sequences, and it is meant for sequences nobody has run, so this script pools the
paired differences (same sequence, same seed) over every result directory it is given, and reports how many pairs
and how many sequences are on each side, with a sign test over the pairs. It also reports, per variant, how many runs
learned every task in its own stage (scored at least ``--learned`` right after it): where a task was never learned,
its forgetting is not measured and the final average mostly reflects the miss. Where the runs record how many samples
of each task they replayed in each stage, it reports how much of the variant's replay went elsewhere than the base's:
the share of its replays beyond the base's count in their (stage, task) cell, a lower bound on the picks a rule moved
(for two rules that draw from the same stream, the picks the variant's weights moved). Two runs that record
different CPU models (``machine``) are not paired: training is deterministic on one CPU model only.

    .venv/bin/python bench/pooled.py bench/results/retention/S-gen? --pair recommended:er \
        --out bench/results/retention/S-gen

writes ``pooled.md`` and ``pooled.json`` into ``--out`` and prints the Markdown.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

METRICS = ("final_average", "average_forgetting")
# Differences within this of 0 are ties: scores are means over evaluation examples, and two equal means computed in a
# different order differ by rounding (e.g. 5.96 / 6 against 5.96 / 6 summed otherwise: 1e-16).
TIE = 1e-9


def load_runs(directory: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """``(variant, seed) -> {metric: value}`` of the run records in ``directory/runs``; besides ``METRICS``,
    ``just_learned``: the lowest score of a task right after its own stage (the matrix's diagonal), and
    ``replays``: the replayed samples per ``"stage/task"`` (``calibration.replays_by_stage_task``), if recorded, and
    ``machine``: the CPU model the run trained on, if recorded."""
    out = {}
    for path in sorted((directory / "runs").glob("*.json")):
        record = json.loads(path.read_text())
        values: dict[str, Any] = {m: float(record["metrics"][m]) for m in METRICS}
        values["just_learned"] = min(float(row[i]) for i, row in enumerate(record["matrix"]))
        values["replays"] = (record.get("calibration") or {}).get("replays_by_stage_task")
        values["machine"] = record.get("machine")  # None for runs recorded before the field
        out[(record["variant"], int(record["seed"]))] = values
    return out


def placed_elsewhere(replays: dict[str, int], base: dict[str, int]) -> float:
    r"""The share of ``replays`` (samples per ``"stage/task"``) beyond ``base``'s count in the same cell:
    $\sum_c \max(0, r_c - b_c) / \sum_c r_c$; 0 when both put every replay in the same cells, 0 for no replays."""
    total = sum(replays.values())
    return sum(max(0, n - base.get(cell, 0)) for cell, n in replays.items()) / total if total else 0.0


def learned(runs: dict[str, dict[tuple[str, int], dict[str, float]]], threshold: float) -> dict[str, dict[str, Any]]:
    """Per variant: how many runs there are, how many learned every task in its own stage (scored ``>= threshold``
    right after it), and the lowest such score."""
    out: dict[str, dict[str, Any]] = {}
    for records in runs.values():
        for (variant, _), values in records.items():
            row = out.setdefault(variant, {"runs": 0, "learned": 0, "lowest": math.inf})
            row["runs"] += 1
            row["learned"] += int(values["just_learned"] >= threshold)
            row["lowest"] = min(row["lowest"], values["just_learned"])
    return dict(sorted(out.items()))


def sign_test(positive: int, negative: int) -> float:
    """Two-sided sign test: the probability, with ties dropped and each sign equally likely, of a split at least as
    uneven as ``positive`` against ``negative``."""
    n = positive + negative
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(max(positive, negative), n + 1)) / 2**n
    return min(1.0, 2 * tail)


def same_machine(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two runs can be paired: made on one CPU model, or at least one of them does not record its own."""
    return a.get("machine") is None or b.get("machine") is None or a["machine"] == b["machine"]


def pooled_pairs(runs: dict[str, dict[tuple[str, int], dict[str, float]]], variant: str, base: str) -> dict[str, Any]:
    """``variant`` minus ``base`` on every (sequence, seed) that has both, per metric: the pairs, their mean and
    standard error, how many are above and below 0, the sign test, and each sequence's mean difference. Two runs
    made on different CPU models are not a pair (their training differs by more than the rule); they are counted
    in ``other_machine``."""
    out: dict[str, Any] = {"variant": variant, "base": base}
    matched = [  # (sequence, the variant's run, the base's run of the same seed)
        (sequence, values, records[(base, seed)])
        for sequence, records in sorted(runs.items())
        for (name, seed), values in sorted(records.items())
        if name == variant and (base, seed) in records
    ]
    pairs = [(sequence, a, b) for sequence, a, b in matched if same_machine(a, b)]
    out["other_machine"] = len(matched) - len(pairs)
    for metric in METRICS:
        per_sequence: dict[str, list[float]] = {}
        for sequence, values, base_values in pairs:
            per_sequence.setdefault(sequence, []).append(values[metric] - base_values[metric])
        diffs = [d for ds in per_sequence.values() for d in ds]
        means = {s: statistics.fmean(ds) for s, ds in per_sequence.items()}
        positive, negative = sum(d > TIE for d in diffs), sum(d < -TIE for d in diffs)
        out[metric] = {
            "pairs": len(diffs),
            "mean": statistics.fmean(diffs) if diffs else math.nan,
            "stderr": statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else math.nan,
            "positive": positive,
            "negative": negative,
            "sign_test_p": sign_test(positive, negative),
            "sequences_positive": sum(m > TIE for m in means.values()),
            "sequences_negative": sum(m < -TIE for m in means.values()),
            "per_sequence": means,
        }
    moved = [
        placed_elsewhere(values["replays"], base_values["replays"])
        for _, values, base_values in pairs
        if values["replays"] and base_values["replays"]
    ]
    out["placed_elsewhere"] = {
        "pairs": len(moved),
        "mean": statistics.fmean(moved) if moved else math.nan,
        "min": min(moved, default=math.nan),
        "max": max(moved, default=math.nan),
        "none": sum(m == 0 for m in moved),
    }
    return out


def markdown(
    results: list[dict[str, Any]], sequences: list[str], learned_rows: dict[str, dict[str, Any]], threshold: float
) -> str:
    lines = [
        f"Pooled over {len(sequences)} sequences ({', '.join(sequences)}), paired by sequence and seed.",
        "",
        "| comparison | metric | pairs | mean difference ± s.e. | pairs above / below | sign test p "
        "| sequences above / below |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for metric in METRICS:
            m = r[metric]
            lines.append(
                f"| `{r['variant']}` − `{r['base']}` | {metric} | {m['pairs']} | {m['mean']:+.4f} ± {m['stderr']:.4f} "
                f"| {m['positive']} / {m['negative']} | {m['sign_test_p']:.2f} "
                f"| {m['sequences_positive']} / {m['sequences_negative']} |"
            )
    skipped = [r for r in results if r["other_machine"]]
    if skipped:
        lines += ["", "Not paired, because the two runs were made on different CPU models: " + ", ".join(
            f"`{r['variant']}` − `{r['base']}` {r['other_machine']}" for r in skipped) + "."]  # fmt: skip
    lines += ["", "Per sequence, mean difference of the final average:", ""]
    lines.append("| comparison | " + " | ".join(sequences) + " |")
    lines.append("|---|" + "---:|" * len(sequences))
    for r in results:
        per = r["final_average"]["per_sequence"]
        cells = [f"{per[s]:+.3f}" if s in per else "" for s in sequences]
        lines.append(f"| `{r['variant']}` − `{r['base']}` | " + " | ".join(cells) + " |")
    moved = [r for r in results if r["placed_elsewhere"]["pairs"]]
    if moved:
        lines += ["", "Share of the variant's replays beyond the base's count in their (stage, task) cell:", ""]
        lines += ["| comparison | pairs | mean | range | pairs with none |", "|---|---:|---:|---:|---:|"]
        for r in moved:
            m = r["placed_elsewhere"]
            lines.append(
                f"| `{r['variant']}` − `{r['base']}` | {m['pairs']} | {m['mean']:.1%} | {m['min']:.1%}-{m['max']:.1%} "
                f"| {m['none']} |"
            )
    lines += ["", f"Runs that learned every task in its own stage (scored at least {threshold:g} right after it):", ""]
    lines += ["| variant | runs | learned every task | lowest score right after a task's stage |"]
    lines += ["|---|---:|---:|---:|"]
    for variant, row in learned_rows.items():
        lines.append(f"| `{variant}` | {row['runs']} | {row['learned']} | {row['lowest']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="+", type=Path, help="result directories of bench/retention.py (one per sequence)")
    p.add_argument("--pair", nargs="+", required=True, metavar="VARIANT:BASE", help="e.g. recommended:er")
    p.add_argument("--out", type=Path, required=True, help="directory for pooled.md and pooled.json")
    p.add_argument("--learned", type=float, default=0.8, help="score that counts as learned (default 0.8)")
    a = p.parse_args(argv)
    runs = {d.name: load_runs(d) for d in a.dirs}
    pairs = []
    for item in a.pair:
        variant, sep, base = item.partition(":")
        if not sep or not variant or not base:
            raise SystemExit(f"--pair {item}: expected VARIANT:BASE, e.g. recommended:er")
        pairs.append((variant, base))
    results = [pooled_pairs(runs, variant, base) for variant, base in pairs]
    learned_rows = learned(runs, a.learned)
    text = markdown(results, sorted(runs), learned_rows, a.learned)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "pooled.md").write_text(text)
    summary = {"sequences": sorted(runs), "results": results, "learned_threshold": a.learned, "learned": learned_rows}
    (a.out / "pooled.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(text, end="")
    return text


if __name__ == "__main__":
    main()
