r"""How far a run moves when nothing changes but the CPU: the same variant and seed, trained on two machines.

Training is deterministic on one CPU model, not across two: the rounding differs, and in a continual sequence a
difference that small grows until one task survives a stage on one machine and not on the other. The spread of
these differences is the noise floor of every paired comparison in ``bench/pooled.py``: two rules that differ in a
few replay picks diverge the same way once their runs differ at all, so a per-seed difference smaller than this
spread says nothing about the rules, and only the mean over many pairs does.

``FIRST`` and ``SECOND`` are two ``--out`` roots of ``bench/retention.py`` (e.g. ``bench/results/retention/xeon``,
made on another machine, and ``bench/results/retention``); every sequence directory the first holds is matched with
the second's of the same name, and each of ``--variants``' runs with the same seed's:

    .venv/bin/python bench/machines.py bench/results/retention/xeon bench/results/retention --variants er \
        --out bench/results/retention/xeon/null

writes ``machines.md`` and ``machines.json`` into ``--out`` and prints the Markdown.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/pooled.py, also when a test loads this file by path
from pooled import METRICS, TIE, load_runs, sign_test  # noqa: E402


def machine_of(directory: Path, runs: dict[tuple[str, int], dict[str, Any]]) -> str:
    """The machines the runs of ``directory`` record, or its summary's machine line for runs that record none."""
    recorded = sorted({v["machine"] for v in runs.values() if v.get("machine")})
    summary = directory / "summary.json"
    line = json.loads(summary.read_text())["meta"].get("machine", "?") if summary.is_file() else "?"
    if any(not v.get("machine") for v in runs.values()):
        recorded.append(line)
    return "; ".join(recorded)


def machine_pairs(first: Path, second: Path, variants: list[str]) -> dict[str, Any]:
    """Per metric, ``first``'s run minus ``second``'s of the same sequence, variant and seed: the pairs, their mean,
    standard deviation, signs and largest absolute difference; and the machines of each side per sequence."""
    diffs: dict[str, list[tuple[str, str, int, float]]] = {m: [] for m in METRICS}
    machines = {}
    for directory in sorted(p for p in first.iterdir() if (p / "runs").is_dir()):
        other = second / directory.name
        if not (other / "runs").is_dir():
            continue
        mine, theirs = load_runs(directory), load_runs(other)
        machines[directory.name] = {"first": machine_of(directory, mine), "second": machine_of(other, theirs)}
        for (variant, seed), values in sorted(mine.items()):
            if variant in variants and (variant, seed) in theirs:
                for metric in METRICS:
                    delta = values[metric] - theirs[(variant, seed)][metric]
                    diffs[metric].append((directory.name, variant, seed, delta))
    out: dict[str, Any] = {"machines": machines}
    for metric, rows in diffs.items():
        values = [d for *_, d in rows]
        above, below = sum(d > TIE for d in values), sum(d < -TIE for d in values)
        largest = max(rows, key=lambda r: abs(r[3]), default=None)
        out[metric] = {
            "pairs": len(values),
            "mean": statistics.fmean(values) if values else float("nan"),
            "stdev": statistics.stdev(values) if len(values) > 1 else float("nan"),
            "mean_abs": statistics.fmean(abs(d) for d in values) if values else float("nan"),
            "positive": above,
            "negative": below,
            "equal": len(values) - above - below,
            "sign_test_p": sign_test(above, below),
            "largest": {"sequence": largest[0], "variant": largest[1], "seed": largest[2], "difference": largest[3]}
            if largest
            else None,
            "differences": [{"sequence": s, "variant": v, "seed": k, "difference": d} for s, v, k, d in rows],
        }
    return out


def markdown(result: dict[str, Any], first: Path, second: Path) -> str:
    lines = [f"Runs of `{first}` minus the same runs (sequence, variant, seed) of `{second}`.", ""]
    lines += ["| sequence | machines of the first | machines of the second |", "|---|---|---|"]
    lines += [f"| {name} | {m['first']} | {m['second']} |" for name, m in result["machines"].items()]
    lines += ["", "| metric | pairs | mean ± s.d. | above / below / equal | mean absolute difference | largest |"]
    lines += ["|---|---:|---:|---:|---:|---|"]
    for metric in METRICS:
        m = result[metric]
        big = m["largest"]
        where = f"{big['difference']:+.3f} ({big['sequence']} `{big['variant']}` seed {big['seed']})" if big else ""
        lines.append(
            f"| {metric} | {m['pairs']} | {m['mean']:+.4f} ± {m['stdev']:.4f} | {m['positive']} / {m['negative']} / "
            f"{m['equal']} | {m['mean_abs']:.4f} | {where} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("first", type=Path, help="a retention.py --out root (e.g. runs made on another machine)")
    p.add_argument("second", type=Path, help="the root to compare with (the same sequences' directories)")
    p.add_argument("--variants", nargs="+", required=True, help="variants to pair, e.g. er")
    p.add_argument("--out", type=Path, required=True, help="directory for machines.md and machines.json")
    a = p.parse_args(argv)
    result = machine_pairs(a.first, a.second, a.variants)
    text = markdown(result, a.first, a.second)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "machines.md").write_text(text)
    (a.out / "machines.json").write_text(json.dumps(result, indent=1) + "\n")
    print(text, end="")
    return text


if __name__ == "__main__":
    main()
