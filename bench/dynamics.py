"""Within-stage dynamics: the score of every earlier task every few optimizer steps, while a later task trains.

``bench/retention.py`` scores each task at stage ends only. This script runs the same sequence, model and settings
(the tiers and ``--config`` files of ``retention.py``) and, through a ``TrainerCallback`` passed to every stage's
trainer, also scores every earlier task's evaluation set every ``--every`` steps of a stage. It shows *when*
retention is lost and regained within a stage, which the stage-end matrix cannot.

Variants are named like ``retention.py``'s: a strategy (``none``, ``er``) or a budget-frontier rule at a share
(``uniform@0.1``; ``--selection NAME=STRATEGY,FIELD=VALUE`` adds rules).

    .venv/bin/python bench/dynamics.py --tier S --dev --variants none uniform@0.1 --seeds 0
    .venv/bin/python bench/dynamics.py --tier R --dev --variants none er --seeds 0 --every 3

Writes ``bench/results/dynamics/<name>/<variant>-seed<k>.json`` (a finished run is not repeated) and
``dynamics.png``, one panel per variant and seed: each earlier task's score against the global step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/common.py, also when a test loads this file by path
import frontier  # noqa: E402
import retention  # noqa: E402
from common import ROOT  # noqa: E402


def resolve_variant(name: str, selections: dict[str, tuple[str, dict[str, Any]]]) -> tuple[str, dict[str, Any]]:
    """(replay_strategy, overrides) of a variant name: a retention.py strategy, or ``RULE@SHARE``."""
    parsed = frontier.parse_name(name)
    if parsed is not None:
        rule, share = parsed
        if rule not in selections:
            raise SystemExit(f"--variants {name}: unknown rule {rule!r}; known: {sorted(selections)}")
        _, strategy, overrides = frontier.frontier_variants([share], {rule: selections[rule]})[0]
        return strategy, overrides
    plan = retention.variants(None, [name])
    return plan[0][1], plan[0][2]


def scoring_callback(tasks, evaluations, tokenizer, every: int, eval_batch_size: int, max_length: int, curve: list):
    """A TrainerCallback that appends ``{"stage", "step", "global_step", "scores"}`` to ``curve`` every ``every``
    steps of each stage after the first: the scores of the earlier tasks."""
    from transformers import TrainerCallback

    from mssr_hf.evaluation import evaluate_task

    class ScoreEarlierTasks(TrainerCallback):
        def __init__(self):
            self.stage, self.offset = -1, 0

        def on_train_begin(self, args, state, control, **kwargs):
            self.stage += 1

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if self.stage == 0 or state.global_step % every:
                return
            scores = [
                evaluate_task(model, tokenizer, task, rows, eval_batch_size, max_length)
                for task, rows in zip(tasks[: self.stage], evaluations)
            ]
            model.train()
            curve.append(
                {
                    "stage": self.stage,
                    "step": state.global_step,
                    "global_step": self.stage * args.max_steps + state.global_step,
                    "scores": scores,
                }
            )

    return ScoreEarlierTasks()


def run(tier, tasks, variant: str, strategy: str, overrides: dict, seed: int, every: int, workdir: Path) -> dict:
    from transformers import AutoTokenizer

    model, _, _ = retention.build_model(tier, tasks, seed, workdir)
    tokenizer = AutoTokenizer.from_pretrained(model)
    evaluations = [task.load(tier["train_size"], tier["eval_size"])[1] for task in tasks]
    curve: list[dict] = []
    callback = scoring_callback(tasks, evaluations, tokenizer, every, tier["eval_batch_size"], tier["max_length"],
                                curve)  # fmt: skip
    record = retention.run_one(tier, tasks, variant, strategy, overrides, seed, workdir, callbacks=[callback])
    return {"variant": variant, "seed": seed, "tasks": record["tasks"], "every": every, "steps": tier["steps"],
            "matrix": record["matrix"], "curve": curve, "overrides": overrides}  # fmt: skip


def plot(records: list[dict], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(records), 1, figsize=(9, 2.4 * len(records)), sharex=True, squeeze=False)
    for ax, record in zip(axes[:, 0], records):
        steps, tasks = record["steps"], record["tasks"]
        for i, task in enumerate(tasks[:-1]):
            points = [(c["global_step"], c["scores"][i]) for c in record["curve"] if len(c["scores"]) > i]
            stage_ends = [((i + 1) * steps, record["matrix"][i][i])]  # right after its own stage
            xs, ys = zip(*(stage_ends + points)) if points else zip(*stage_ends)
            ax.plot(xs, ys, marker=".", markersize=3, linewidth=1, label=task)
        for k in range(1, len(tasks)):
            ax.axvline(k * steps, color="gray", linewidth=0.5, linestyle=":")
        ax.set_ylim(-0.03, 1.03)
        ax.set_ylabel("score")
        ax.set_title(f"{record['variant']}, seed {record['seed']}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, ncol=len(records[0]["tasks"]), loc="lower left")
    axes[-1, 0].set_xlabel("global optimizer step (dotted: stage starts)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tier", choices=list(retention.TIERS), default="S")
    p.add_argument("--config", type=Path)
    p.add_argument("--dev", action="store_true")
    p.add_argument("--variants", nargs="+", default=["none", "uniform@0.1"])
    p.add_argument("--selection", nargs="+", default=[], metavar="NAME=STRATEGY[,FIELD=VALUE...]")
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--every", type=int, default=25, help="score the earlier tasks every this many steps")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "dynamics")
    p.add_argument("--workdir", type=Path, default=ROOT / "bench" / ".dynamics_work")
    p.add_argument("--summary-only", action="store_true", help="re-render the plot from the saved runs")
    a = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tier = retention.load_config(a.config) if a.config else dict(retention.TIERS[a.tier])
    if a.dev:
        tier["tasks"] = tier["dev_tasks"]
    name = tier.get("name") or (a.config.stem if a.config else f"{a.tier}-{'dev' if a.dev else 'report'}")
    from mssr_hf.tasks import get_sequence

    tasks = get_sequence(tier["tasks"])
    selections = {**frontier.SELECTIONS, **{n: (s, o) for n, s, o in map(retention.parse_variant, a.selection)}}
    out = a.out / name
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for seed in a.seeds:
        for variant in a.variants:
            path = out / f"{variant}-seed{seed}.json"
            if not path.is_file() and not a.summary_only:
                strategy, overrides = resolve_variant(variant, selections)
                print(f"[{name}] {variant} seed {seed}", flush=True)
                record = run(tier, tasks, variant, strategy, overrides, seed, a.every, a.workdir / name)
                path.write_text(json.dumps(record, indent=1) + "\n")
            if path.is_file():
                records.append(json.loads(path.read_text()))
    if not records:
        print(f"no runs in {out}", file=sys.stderr)
        return 1
    print(plot(records, out / "dynamics.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
