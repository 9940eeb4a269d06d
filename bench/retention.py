"""Retention benchmark: every replay strategy on one task sequence, everything else equal.

Each strategy trains the same model on the same tasks, with the same steps per stage, seeds, data order and
evaluation sets; only ``replay_strategy`` (or, for an ablation, one MSSR setting) changes. Per strategy it reports,
as mean and standard deviation over seeds: final average score, average forgetting (Eq. 1), backward transfer, the
average normalised score, each task's final score, replayed samples, training wall time and the extra evaluation /
probe time, the times relative to ``fixed``.

Tiers:

- ``S`` (synthetic): a tiny Llama (hidden 128, 2 layers) trained from scratch (full fine-tuning) on five generated
  letter-string tasks (``mssr_hf.tasks.synthetic``) that share inputs and outputs, so they interfere; 500 steps a
  stage, so that every task is learned in its own stage whatever the strategy; 5 seeds, 200 evaluation examples.
- ``S6``: the same on a six-task sequence (a second report sequence; the development sequence is S's).
- ``R`` (real, under 90 minutes): SmolLM2-135M-Instruct with LoRA (r=8, alpha=16, q_proj/v_proj) on three
  reasoning-gym tasks (``demo_3``, 30 steps per stage, seed 0); 1 seed.

Every tier has a development sequence (``--dev``), on which the settings below were chosen, and a report sequence
(the default), which is what BENCHMARKS.md publishes. ``--config FILE.yaml`` runs any other sequence and settings.

Besides the seven strategies it runs ``er`` (classical experience replay: ``fixed`` every step, ratio lambda0),
``er_budget`` (uniform replay at a constant rate set so that it replays as many samples as ``mssr_full`` did with
the same seed: a strategy that replays less and forgets more has not won, so both equal-steps and equal-budget
comparisons are shown) and ``er_mssr`` (``mssr_spl`` every step: MSSR's memory-weighted sampler at ``er``'s budget,
which isolates the sampler).

Every run also records how well the memory model predicts forgetting (:class:`ExposureLog`): at each replay, the
memory's ``-log m`` against the sample's loss rise since its task was learned.

Ablations of ``mssr_full`` (the paper's Section 4.3), ``--ablation``: ``lambda0`` (0.05, 0.1, 0.2, 0.3),
``buffer`` (512, 1024, 2048, 4096), ``interval`` (expanding, fixed, geometric, ebbinghaus, and the memory-strength
``threshold`` trigger of App. B).

    .venv/bin/python bench/retention.py --tier S                      # 10 strategies x 5 seeds
    .venv/bin/python bench/retention.py --tier S --dev --strategies none er --frontier 0.1 0.3  # budget frontier
    .venv/bin/python bench/retention.py --tier S --ablation lambda0   # one ablation
    .venv/bin/python bench/retention.py --tier R                      # SmolLM2 + LoRA, 1 seed, ~60 min
    .venv/bin/python bench/retention.py --tier S --dev                # the development sequence
    .venv/bin/python bench/retention.py --config my_sequence.yaml     # any sequence (keys: see TIERS)
    .venv/bin/python bench/retention.py --tier S --dev --set replay_zeta=0.5   # a development experiment
    .venv/bin/python bench/retention.py --tier S --variant mssr_full_z0=mssr_full,replay_zeta=0   # an extra row

Each run writes ``bench/results/retention/<name>/runs/<variant>-seed<k>.json`` (a finished run is not repeated:
delete its file to redo it); the summary goes to ``summary.json``, ``summary.md`` and ``retention.png`` next to
them. Training checkpoints go to ``--workdir`` (not committed). A run records the CPU model it trained on
(``machine``): training is deterministic on one CPU model but not across two (rounding differs, and a small
difference grows over the stages until a task survives a stage on one and not on the other), so a run is reused
under another name only on the machine that made it, and ``bench/pooled.py`` pairs runs of one machine only.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import math
import os
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/common.py, also when a test loads this file by path
import frontier  # noqa: E402
from common import ROOT, cpu_model, machine_line, tiny_model_dir  # noqa: E402

STRATEGIES = ("none", "fixed", "loss", "accuracy", "mssr_sch", "mssr_spl", "mssr_full")
EXTRA = ("er", "er_budget", "er_mssr", "recommended")
ABLATIONS: dict[str, tuple[str, list]] = {
    "lambda0": ("replay_lambda0", [0.05, 0.1, 0.2, 0.3]),
    "buffer": ("replay_buffer_size", [512, 1024, 2048, 4096]),
    "interval": ("replay_interval_pattern", ["expanding", "fixed", "geometric", "ebbinghaus", "threshold"]),
}
# Which samples a run draws, for a given seed and resolved config. Bumped when a library change alters the draws
# (2: stratified_choice, the `forgotten` weighting's sampler, draws through uniform_choice when every weight is equal:
# common random numbers with the uniform rules; 3: with a task tilt (replay_task_gap_weight > 0) it regroups a
# uniform draw's picks, drawing the moves from a side generator, so the stream stays the uniform rules' at every
# step; 4: unequal weights within a task (zeta > 0) move the uniform draw's picks too, pick by pick, instead of
# drawing Gumbel keys), so that a run is reused under another variant's name only if it was drawn the same way.
DRAWS = 4
METRICS = ("final_average", "average_forgetting", "backward_transfer", "normalized_score")

# fmt: off
TIERS: dict[str, dict[str, Any]] = {
    "S": dict(
        tasks=["syn_swap", "syn_sort", "syn_copy", "syn_mirror", "syn_reverse"],
        dev_tasks=["syn_reverse", "syn_shift", "syn_sort", "syn_rotate", "syn_copy"],
        model="tiny", hidden_size=128, layers=2, peft=False, seeds=[0, 1, 2, 3, 4], steps=500, batch_size=32,
        learning_rate=1e-3, max_length=32, train_size=1600, eval_size=200, eval_batch_size=200, threads=1,
        mssr={},
    ),
    # The second synthetic report sequence: six tasks, same model and settings, the same development sequence.
    "S6": dict(
        tasks=["syn_rotate", "syn_mirror", "syn_swap", "syn_copy", "syn_shift", "syn_sort"],
        dev_tasks=["syn_reverse", "syn_shift", "syn_sort", "syn_rotate", "syn_copy"],
        model="tiny", hidden_size=128, layers=2, peft=False, seeds=[0, 1, 2, 3, 4], steps=500, batch_size=32,
        learning_rate=1e-3, max_length=32, train_size=1600, eval_size=200, eval_batch_size=200, threads=1,
        mssr={},
    ),
    "R": dict(
        tasks=["rg_word_reversal", "rg_addition", "rg_syllogism"],  # demo_3
        dev_tasks=["rg_family_relationships", "rg_word_reversal", "rg_letter_counting"],
        model="smollm2", peft=True, seeds=[0, 1, 2], steps=30, batch_size=8, learning_rate=2e-3, max_length=128,
        train_size=400, eval_size=100, eval_batch_size=50, threads=1, mssr={},
    ),
}
# fmt: on


# ----------------------------------------------------------------------------------------------------------- runs


def variants(ablation: str | None, strategies: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """(variant name, replay_strategy, MSSRConfig overrides) to run."""
    if ablation is None:
        out = []
        # Classical experience replay draws uniformly from the whole bank: no staleness cap (which would put the
        # longest-unreviewed samples first, whatever the rule).
        # (replay_lambda_min, unused by `fixed`, is 0 as in the frontier's uniform rule: the same run.)
        every_step = {"replay_staleness_cap": 0}
        for name in strategies:
            if name == "er":
                out.append(("er", "fixed", {**every_step, "replay_fixed_interval": 1, "replay_lambda_min": 0.0}))
            elif name == "recommended":  # MSSRConfig(replay_preset="recommended"), every other field the tier's
                out.append(("recommended", "mssr_full", {"replay_preset": "recommended"}))
            elif name == "er_budget":  # ratio set from mssr_full's run
                out.append(("er_budget", "fixed", {**every_step, "replay_fixed_interval": 1}))
            elif name == "er_mssr":  # MSSR's memory-weighted sampler at er's budget: a fraction of every batch
                out.append(("er_mssr", "mssr_spl", {**every_step, "replay_first_interval": 1}))
            else:
                out.append((name, name, {}))
        return out
    field, values = ABLATIONS[ablation]
    return [(f"mssr_full-{ablation}={v}", "mssr_full", {field: v}) for v in values]


def parse_variant(text: str) -> tuple[str, str, dict[str, Any]]:
    """``NAME=STRATEGY,FIELD=VALUE,...`` -> (name, strategy, overrides); values are read as YAML scalars."""
    import yaml

    name, sep, rest = text.partition("=")
    strategy, *settings = rest.split(",")
    if not sep or not name or strategy not in STRATEGIES:
        raise SystemExit(f"--variant {text}: expected NAME=STRATEGY[,FIELD=VALUE...] with STRATEGY in {STRATEGIES}")
    overrides = {}
    for item in settings:
        field, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--variant {text}: {item!r} is not FIELD=VALUE")
        overrides[field] = yaml.safe_load(value)
    return name, strategy, overrides


def build_model(tier: dict[str, Any], tasks, seed: int, workdir: Path):
    """(model path or id, tokenizer, peft_config) for a tier."""
    from transformers import AutoTokenizer

    if tier["model"] == "tiny":
        path = workdir / f"tiny-model-h{tier['hidden_size']}-l{tier['layers']}-seed{seed}"
        corpus = lambda: [e["prompt"] + e["completion"] for t in tasks for e in t.load(200, 0)[0]]
        model = str(tiny_model_dir(path, corpus, hidden_size=tier["hidden_size"], layers=tier["layers"], seed=seed))
    elif tier["model"] == "smollm2":
        from mssr_hf.smollm2 import smollm2_dir

        model = str(smollm2_dir())
    else:
        model = tier["model"]
    peft_config = None
    if tier["peft"]:
        from peft import LoraConfig

        peft_config = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])
    return model, AutoTokenizer.from_pretrained(model), peft_config


class ExposureLog:
    """Calibration of the memory model: at every exposure of an earlier task's sample (a replay), what the memory
    predicted just before it and how much the sample had actually been forgotten.

    Predicted: the forgetting ``-log m`` (what ``eq:prob_weight`` ranks by), the steps since the sample's last review,
    its EMA loss and its stability. Observed: its loss at the replay (measured on the forward the trainer runs
    anyway) minus its loss when its task's stage ended (one extra forward over the stage's samples, run by
    :meth:`callback` at the end of each stage, timed in :attr:`seconds` so the caller can leave it out of the
    training time). :meth:`record` is the trainer's exposure listener (``exposure_listeners=[log.record]``).

    Args:
        task_bounds (`list[int]`): the first id of each task after the first (ids are given task by task).
        stage_steps (`int`): optimizer steps per stage (a step's stage is ``(step - 1) // stage_steps``).
    """

    def __init__(self, task_bounds: list[int], stage_steps: int):
        import torch

        self.bounds = torch.tensor(task_bounds, dtype=torch.int64)
        self.stage_steps = stage_steps
        self.learned_loss = torch.zeros(0, dtype=torch.float64)  # per id: loss at the end of its task's stage
        # per exposure call: (neg_log_m, elapsed, ema, stability, rise, task, stage, loss, predicted rise,
        # predicted gap, gap: loss above the sample's best loss)
        self.rows: list[Any] = []
        self.stages_done = 0
        self.seconds = 0.0

    def record(self, memory, ids, losses, step: int) -> None:
        """Called by the trainer right before ``memory.expose(ids, losses, step)``."""
        import torch

        ids = torch.as_tensor(ids, dtype=torch.int64).reshape(-1)
        losses = torch.as_tensor(losses, dtype=torch.float64).reshape(-1)
        known = ids < self.learned_loss.numel()
        learned = torch.full_like(losses, float("nan"))
        learned[known] = self.learned_loss[ids[known]]
        replay = torch.isfinite(losses) & ~torch.isnan(learned)
        if bool(replay.any()):
            r = ids[replay]
            stage = (step - 1) // self.stage_steps
            self.rows.append(torch.stack([
                -memory.log_strength(r, step), (step - memory.last_review[r]).double(), memory.ema_loss[r],
                memory.stability[r], losses[replay] - learned[replay],
                torch.bucketize(r, self.bounds, right=True).double(),
                torch.full((r.numel(),), float(stage), dtype=torch.float64), losses[replay],
                memory.predicted_rise(r, step), memory.predicted_gap(r, step),
                losses[replay] - memory.best_loss[r],
            ], dim=1))  # fmt: skip

    def callback(self):
        """A TrainerCallback that measures each task's per-sample losses when its stage ends."""
        from transformers import TrainerCallback

        log = self

        class StageEndLosses(TrainerCallback):
            def on_train_end(self, args, state, control, model=None, train_dataloader=None, **kwargs):
                log.measure_stage(model, train_dataloader, args.replay_id_column)

        return StageEndLosses()

    def measure_stage(self, model, dataloader, id_column: str) -> None:
        import torch

        start = time.perf_counter()
        stage = self.stages_done
        self.stages_done += 1
        lo = 0 if stage == 0 else int(self.bounds[stage - 1])
        hi = int(self.bounds[stage]) if stage < self.bounds.numel() else None
        if hi is None:
            return  # the last task is never replayed
        dataset = dataloader.dataset
        rows = [i for i, sid in enumerate(dataset[id_column]) if lo <= sid < hi]
        if self.learned_loss.numel() < hi:
            pad = torch.full((hi - self.learned_loss.numel(),), float("nan"), dtype=torch.float64)
            self.learned_loss = torch.cat([self.learned_loss, pad])
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for i in range(0, len(rows), 16):
                batch = dataloader.collate_fn([dataset[r] for r in rows[i : i + 16]])
                ids = batch.pop(id_column)
                labels = batch["labels"][:, 1:]  # (B, T-1)
                logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits[:, :-1].float()
                nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels, reduction="none")  # (B, T-1)
                mask = labels != -100
                self.learned_loss[ids] = ((nll * mask).sum(1) / mask.sum(1).clamp(min=1)).double()
        model.train(was_training)
        self.seconds += time.perf_counter() - start

    def summary(self) -> dict[str, Any] | None:
        """Spearman correlation of each predictor with the observed loss rise, and the lift of the memory's
        ranking: the mean rise of the fifth of replayed samples it rated most forgotten (highest -log m)."""
        import torch

        if not self.rows:
            return None
        rows = torch.cat(self.rows).numpy()
        rise = rows[:, 4]
        top = rows[:, 0] >= np.quantile(rows[:, 0], 0.8)
        return {
            "exposures": int(rows.shape[0]),
            "mean_rise": float(rise.mean()),
            "share_risen": float((rise > 0).mean()),
            "spearman_forgetting": spearman(rows[:, 0], rise),
            "spearman_elapsed": spearman(rows[:, 1], rise),
            "spearman_ema_loss": spearman(rows[:, 2], rise),
            "spearman_task_age": spearman(rows[:, 6] - rows[:, 5], rise),
            "spearman_forgetting_loss": spearman(rows[:, 0], rows[:, 7]),  # against the loss itself
            "spearman_predicted": spearman(rows[:, 8], rise),  # the fitted forgetting model's prediction
            "top20_rise": float(rise[top].mean()),
            "spearman_gap": spearman(rows[:, 9], rows[:, 10]),  # the gap model's prediction against the gap
            "mean_gap": float(rows[:, 10].mean()),
            # replayed samples per (stage, task): how a rule spread its budget
            "replays_by_stage_task": {
                f"{int(st)}/{int(tk)}": int(((rows[:, 6] == st) & (rows[:, 5] == tk)).sum())
                for st in np.unique(rows[:, 6])
                for tk in np.unique(rows[:, 5])
            },
        }


def spearman(x, y) -> float:
    """Spearman rank correlation (average ranks for ties); NaN when either side is constant."""
    rx, ry = _ranks(np.asarray(x, float)), _ranks(np.asarray(y, float))
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(values):
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values))
    uniq, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / counts)[inverse]


def run_settings(tier: dict[str, Any], overrides: dict[str, Any], seed: int) -> dict[str, Any]:
    """The MSSRConfig settings of one run besides ``output_dir`` and ``replay_strategy``: the tier's training
    settings, the paper's step counts scaled to the tier's stages (except those a preset sets), the tier's MSSR
    settings, then ``overrides``."""
    from mssr_hf.mssr_config import scaled_replay_settings

    steps = tier["steps"]
    preset = overrides.get("replay_preset", tier["mssr"].get("replay_preset"))
    return {
        **dict(
            max_steps=steps, per_device_train_batch_size=tier["batch_size"], gradient_accumulation_steps=1,
            learning_rate=tier["learning_rate"], lr_scheduler_type="cosine", warmup_steps=0.05, weight_decay=0.01,
            max_length=tier["max_length"], logging_steps=max(1, steps // 10), save_strategy="no", seed=seed,
            data_seed=seed, report_to=[], bf16=False, use_cpu=True, disable_tqdm=True,
        ),
        **scaled_replay_settings(steps, preset),
        **tier["mssr"],
        **overrides,
    }  # fmt: skip


def resolved_replay_settings(tier: dict[str, Any], strategy: str, overrides: dict[str, Any], seed: int) -> dict:
    """Every replay and memory field of the run's MSSRConfig after presets: two variants with equal ones train the
    same run (e.g. ``er`` and ``uniform@0.3``)."""
    from mssr_hf.mssr_config import MSSRConfig

    return replay_fields(
        MSSRConfig(output_dir="unused", replay_strategy=strategy, **run_settings(tier, overrides, seed))
    )


def replay_fields(args) -> dict[str, Any]:
    """The replay and memory fields of an MSSRConfig, after its preset (the preset's name itself left out)."""
    return {
        k: v for k, v in sorted(vars(args).items()) if k.startswith(("replay_", "memory_")) and k != "replay_preset"
    }


def run_one(
    tier, tasks, variant: str, strategy: str, overrides: dict, seed: int, workdir: Path, callbacks=()
) -> dict[str, Any]:
    """Train and evaluate the whole sequence once; returns the run's record. ``callbacks`` (TrainerCallbacks) join
    every stage's trainer."""
    import shutil

    import torch

    from mssr_hf.continual import ContinualRunner
    from mssr_hf.mssr_config import MSSRConfig

    torch.set_num_threads(tier["threads"])
    model, tokenizer, peft_config = build_model(tier, tasks, seed, workdir)
    steps = tier["steps"]
    out = workdir / "runs" / f"{variant}-seed{seed}"
    shutil.rmtree(out, ignore_errors=True)
    settings = run_settings(tier, overrides, seed)
    args = MSSRConfig(output_dir=str(out), replay_strategy=strategy, **settings)
    sizes = [len(t.load(tier["train_size"], tier["eval_size"])[0]) for t in tasks]
    log = ExposureLog(list(itertools.accumulate(sizes))[:-1], steps)
    runner = ContinualRunner(
        model, tasks, args, tokenizer=tokenizer, peft_config=peft_config, eval_size=tier["eval_size"],
        train_size=tier["train_size"], eval_batch_size=tier["eval_batch_size"],
        callbacks=[*callbacks, *([log.callback()] if strategy != "none" else [])], exposure_listeners=[log.record],
    )  # fmt: skip
    start = time.perf_counter()
    results = runner.run()
    wall = time.perf_counter() - start - log.seconds
    stages = results["stages"]
    record = {
        "variant": variant, "strategy": strategy, "seed": seed, "overrides": overrides,
        "tasks": [t.name for t in tasks], "matrix": results["matrix"], "metrics": results["metrics"],
        "final_scores": dict(zip([t.name for t in tasks], results["matrix"][-1])),
        "replayed_samples": sum(s["replayed_samples"] for s in stages),
        "replay_steps": sum(s["replay_steps"] for s in stages),
        "train_seconds": sum(s["train_seconds"] for s in stages) - log.seconds,  # without the calibration forwards
        "extra_seconds": sum(s["probe_seconds"] + s["eval_seconds"] for s in stages),
        "replay_share": sum(s["replayed_samples"] for s in stages[1:])
        / max(1, sum(s["steps"] for s in stages[1:]) * tier["batch_size"]),
        "wall_seconds": wall, "calibration": log.summary(),
        "settings": {k: v for k, v in settings.items() if k.startswith("replay_") or k in ("max_steps", "seed")},
        "resolved": replay_fields(args),  # the config this run trained with: no second MSSRConfig
        "draws": DRAWS,
        "machine": cpu_model(),  # training is deterministic on one CPU model, not across: pairs stay on one
    }  # fmt: skip
    shutil.rmtree(out, ignore_errors=True)  # adapters/checkpoints of every stage: not needed once scored
    return record


# -------------------------------------------------------------------------------------------------------- summary


def mean_std(values: list[float]) -> tuple[float, float]:
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def summarize(records: list[dict[str, Any]], order: list[str]) -> dict[str, Any]:
    """Mean and std over seeds of every reported quantity, per variant; times relative to ``fixed``."""
    by_variant: dict[str, list[dict]] = {}
    for r in records:
        by_variant.setdefault(r["variant"], []).append(r)
    reference = by_variant.get("fixed")
    ref_train = statistics.fmean(r["train_seconds"] for r in reference) if reference else None
    summary = {}
    for variant in [v for v in order if v in by_variant]:
        runs = by_variant[variant]
        row: dict[str, Any] = {"seeds": sorted(r["seed"] for r in runs)}
        for m in METRICS:
            row[m] = mean_std([r["metrics"][m] for r in runs])
        tasks = runs[0]["tasks"]
        row["final_scores"] = {t: mean_std([r["final_scores"][t] for r in runs]) for t in tasks}
        for key in ("replayed_samples", "replay_share", "train_seconds", "extra_seconds", "wall_seconds"):
            row[key] = mean_std([r.get(key) for r in runs])
        calibrations = [r["calibration"] for r in runs if r.get("calibration")]
        if calibrations:
            keys = [
                k
                for k, v in calibrations[0].items()
                if isinstance(v, (int, float)) and all(k in c for c in calibrations)
            ]
            row["calibration"] = {k: mean_std([c[k] for c in calibrations]) for k in keys}
        if ref_train:
            row["train_time_vs_fixed"] = row["train_seconds"][0] / ref_train
            row["extra_time_vs_fixed_train"] = row["extra_seconds"][0] / ref_train
        summary[variant] = row
    return summary


def _pm(pair, digits: int = 3, scale: float = 1.0) -> str:
    mean, std = pair
    if math.isnan(mean):
        return "n/a"
    return f"{mean * scale:.{digits}f} ± {std * scale:.{digits}f}"


def markdown(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    tasks = meta["tasks"]
    lines = [
        f"# Retention: {meta['name']}", "",
        f"Command: `{meta['command']}`", "",
        f"Tasks (in training order): {', '.join(tasks)}. Model: {meta['model']}. {meta['steps']} steps per stage, "
        f"batch {meta['batch_size']}, lr {meta['learning_rate']}; seeds {meta['seeds']}; {meta['eval_size']} "
        f"evaluation examples per task. Machine: {meta['machines']}.", "",
        "Scores are exact match (0-1), mean ± std over the row's seeds. Forgetting: lower is better. Replay share: "
        "replayed samples / samples trained in the stages that can replay (all but the first). Train time: wall time "
        "of `trainer.train()` over all stages, which includes the probe forwards and evaluations of `loss` and "
        "`accuracy`; extra: that probe/evaluation time alone; both relative to `fixed`'s train time.", "",
        "| strategy | seeds | final avg | forgetting | BWT | norm. score | replayed | replay share | train time "
        "| vs fixed | extra vs fixed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for variant, row in summary.items():
        lines.append(
            f"| `{variant}` | {len(row['seeds'])} | {_pm(row['final_average'])} | {_pm(row['average_forgetting'])} | "
            f"{_pm(row['backward_transfer'])} | {_pm(row['normalized_score'])} | {row['replayed_samples'][0]:.0f} | "
            f"{row['replay_share'][0]:.1%} | {row['train_seconds'][0]:.0f} s | "
            f"{row.get('train_time_vs_fixed', math.nan):.2f} | {row.get('extra_time_vs_fixed_train', math.nan):.2f} |"
        )
    lines += ["", "Final score per task:", "", "| strategy | " + " | ".join(tasks) + " |",
              "|---|" + "---:|" * len(tasks)]  # fmt: skip
    for variant, row in summary.items():
        lines.append(f"| `{variant}` | " + " | ".join(_pm(row["final_scores"][t], 2) for t in tasks) + " |")
    calibrated = {v: row["calibration"] for v, row in summary.items() if "calibration" in row}
    if calibrated:
        lines += [
            "", "Calibration of the memory model on replayed samples (see `ExposureLog`): Spearman correlation of "
            "each predictor with the observed loss rise since the sample's task was learned (its loss when that "
            "stage ended); `top 20%`: mean rise of the fifth the memory rates most forgotten (highest -log m), "
            "against the mean rise; the last column correlates -log m with the replayed sample's loss itself (high: "
            "forgotten or never learned). Only uniform selections (`fixed`, `loss`, `accuracy`, `mssr_sch`, `er`, "
            "`er_budget`) sample the bank without bias.", "",
            "| strategy | replays seen | mean rise | risen | rho(-log m) | rho(elapsed) | rho(EMA loss) | "
            "rho(task age) | top 20% rise | rho(-log m, loss now) | rho(fitted model) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]  # fmt: skip
        nan = (math.nan, math.nan)
        for variant, c in calibrated.items():
            lines.append(
                f"| `{variant}` | {c['exposures'][0]:.0f} | {_pm(c['mean_rise'], 2)} | {c['share_risen'][0]:.0%} | "
                f"{_pm(c['spearman_forgetting'], 2)} | {_pm(c['spearman_elapsed'], 2)} | "
                f"{_pm(c['spearman_ema_loss'], 2)} | {_pm(c['spearman_task_age'], 2)} | {_pm(c['top20_rise'], 2)} | "
                f"{_pm(c.get('spearman_forgetting_loss', nan), 2)} | {_pm(c.get('spearman_predicted', nan), 2)} |"
            )
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summary)
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 1.1 * len(names) + 4), 3.8))
    labels = ("final average (higher is better)", "average forgetting (lower is better)")
    for ax, metric, label in zip(axes, ("final_average", "average_forgetting"), labels):
        means = [summary[n][metric][0] for n in names]
        stds = [summary[n][metric][1] for n in names]
        colors = ["tab:red" if n.startswith("mssr_full") else "tab:gray" if n == "none" else "tab:blue" for n in names]
        ax.bar(range(len(names)), means, yerr=stds, color=colors, capsize=3)
        ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
        ax.set_title(label, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------------------------------------- main


def load_config(path: Path) -> dict[str, Any]:
    """A YAML sequence/settings file: any key of a tier (``tier: S`` or ``R`` picks the base, default S)."""
    import yaml

    with open(path) as f:
        config = yaml.safe_load(f) or {}
    if not isinstance(config, dict):
        raise SystemExit(f"--config {path}: expected a mapping of settings, got {type(config).__name__}")
    base = config.pop("tier", "S")
    if base not in TIERS:
        raise SystemExit(f"--config {path}: tier must be one of {list(TIERS)}, got {base!r}")
    unknown = sorted(set(config) - set(TIERS[base]) - {"name"})
    if unknown:
        raise SystemExit(f"--config {path}: unknown keys {unknown}; known: {sorted(TIERS[base])}")
    return {**TIERS[base], **config}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tier", choices=list(TIERS), default="S")
    p.add_argument("--config", type=Path, help="YAML file with a sequence (tasks: [...]) and settings")
    p.add_argument("--dev", action="store_true", help="run the tier's development sequence")
    p.add_argument("--ablation", choices=list(ABLATIONS))
    p.add_argument("--strategies", nargs="*", default=[*STRATEGIES, *EXTRA], choices=[*STRATEGIES, *EXTRA])
    p.add_argument(
        "--frontier",
        nargs="*",
        type=float,
        metavar="SHARE",
        help="the budget frontier: every selection rule replaying this share of every batch (default shares: "
        f"{' '.join(map(str, frontier.SHARES))})",
    )
    p.add_argument(
        "--selection",
        nargs="+",
        default=[],
        metavar="NAME=STRATEGY[,FIELD=VALUE...]",
        help="extra selection rules for --frontier, e.g. power_z0.1=mssr_spl,replay_zeta=0.1",
    )
    p.add_argument(
        "--rules",
        nargs="+",
        metavar="NAME",
        help="run only these selection rules of --frontier (default: every built-in and --selection rule)",
    )
    p.add_argument("--seeds", nargs="+", type=int)
    p.add_argument("--steps", type=int, help="steps per stage (default: the tier's)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "retention")
    p.add_argument("--workdir", type=Path, default=ROOT / "bench" / ".retention_work")
    p.add_argument("--summary-only", action="store_true", help="re-render the summary from the saved runs")
    p.add_argument(
        "--variant", nargs="+", default=[], metavar="NAME=STRATEGY[,FIELD=VALUE...]",
        help="extra rows, e.g. mssr_full_nocap=mssr_full,replay_staleness_cap=0",
    )  # fmt: skip
    p.add_argument(
        "--set", nargs="+", default=[], metavar="FIELD=VALUE",
        help="MSSRConfig settings for every variant (e.g. replay_zeta=0.5); they are added to the run's name",
    )  # fmt: skip
    return p.parse_args(argv)


def resolve_tier(a: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The tier's settings after ``--config``, ``--dev``, ``--seeds``, ``--steps``, ``--set``, and the run's name."""
    import yaml

    tier = load_config(a.config) if a.config else dict(TIERS[a.tier])
    if a.dev:
        tier["tasks"] = tier["dev_tasks"]
    if a.seeds:
        tier["seeds"] = a.seeds
    if a.steps:
        tier["steps"] = a.steps
    name = tier.get("name") or (a.config.stem if a.config else f"{a.tier}-{'dev' if a.dev else 'report'}")
    if a.ablation:
        name += f"-ablation-{a.ablation}"
    for item in a.set:
        field, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set {item}: expected FIELD=VALUE")
        tier["mssr"] = {**tier["mssr"], field: yaml.safe_load(value)}
        name += f"+{field}={value}"
    return tier, name


def run_missing(plan, tier: dict[str, Any], tasks, name: str, out: Path, workdir: Path) -> None:
    """Train every (variant, seed) of ``plan`` that has no ``out/runs/<variant>-seed<k>.json`` yet, and write it."""
    here = cpu_model()
    for seed in tier["seeds"]:
        for variant, strategy, overrides in plan:
            path = out / "runs" / f"{variant}-seed{seed}.json"
            if path.is_file():
                continue
            if variant == "er_budget":
                overrides = {**overrides, **budget_settings(out, seed, tier, len(tasks))}
            resolved = resolved_replay_settings(tier, strategy, overrides, seed)
            same = [r for r in map(json.loads, map(Path.read_text, (out / "runs").glob(f"*-seed{seed}.json")))
                    if r.get("resolved") == resolved and r["seed"] == seed and r.get("draws", 1) == DRAWS
                    and r.get("machine", here) == here]  # fmt: skip
            if same:  # the same run under another name: training is deterministic, so it is not repeated
                record = {**same[0], "variant": variant, "same_run_as": same[0]["variant"], "overrides": overrides}
                path.write_text(json.dumps(record, indent=1) + "\n")
                print(f"[{name}] {variant} seed {seed}: the same run as {same[0]['variant']}", flush=True)
                continue
            print(f"[{name}] {variant} seed {seed}: {' -> '.join(t.name for t in tasks)}", flush=True)
            record = run_one(tier, tasks, variant, strategy, overrides, seed, workdir)
            path.write_text(json.dumps(record, indent=1) + "\n")
            m = record["metrics"]
            print(f"[{name}] {variant} seed {seed}: final {m['final_average']:.3f} forgetting "
                  f"{m['average_forgetting']:.3f} replayed {record['replayed_samples']} "
                  f"train {record['train_seconds']:.0f} s", flush=True)  # fmt: skip


def render(
    records: list[dict[str, Any]], plan, tier: dict[str, Any], tasks, name: str, out: Path, command: str, machine: str
):
    """Write ``summary.json``, ``summary.md`` and ``retention.png`` into ``out`` from the run records; returns the
    Markdown."""
    summary = summarize(records, [v for v, _, _ in plan] + sorted({r["variant"] for r in records}))
    meta = {
        "name": name, "tasks": [t.name for t in tasks], "model": tier["model"], "steps": tier["steps"],
        "batch_size": tier["batch_size"], "learning_rate": tier["learning_rate"], "eval_size": tier["eval_size"],
        "seeds": sorted({r["seed"] for r in records}), "command": command,
        # machine: where the runs that do not record their own were made; machines: every run's, counted
        "machine": machine, "machines": machines_line(records, machine),
    }  # fmt: skip
    (out / "summary.json").write_text(json.dumps({"meta": meta, "summary": summary}, indent=1) + "\n")
    text = markdown(summary, meta)
    frontier_text = frontier.markdown(summary, records)
    if frontier_text:
        text += "\n" + frontier_text
        frontier.plot(summary, out / "frontier.png", f"{name}: retention against replay budget")
    (out / "summary.md").write_text(text)
    plot(summary, out / "retention.png", f"{name}: {' -> '.join(meta['tasks'])}")
    return text


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tier, name = resolve_tier(a)
    from mssr_hf.tasks import get_sequence

    tasks = get_sequence(tier["tasks"])
    out = a.out / name
    (out / "runs").mkdir(parents=True, exist_ok=True)
    plan = variants(a.ablation, a.strategies) + [parse_variant(text) for text in a.variant]
    if a.frontier is not None:
        selections = {**frontier.SELECTIONS, **{n: (s, o) for n, s, o in map(parse_variant, a.selection)}}
        if a.rules:
            unknown = sorted(set(a.rules) - set(selections))
            if unknown:
                raise SystemExit(f"--rules {unknown}: not a selection rule; known: {sorted(selections)}")
            selections = {n: selections[n] for n in a.rules}
        plan += frontier.frontier_variants(a.frontier or list(frontier.SHARES), selections)
    if "er_budget" in [v for v, _, _ in plan] and "mssr_full" in [v for v, _, _ in plan]:
        plan.sort(key=lambda v: v[0] == "er_budget")  # er_budget needs mssr_full's replay count of the same seed

    if not a.summary_only:
        run_missing(plan, tier, tasks, name, out, a.workdir / name)
    records = [json.loads(f.read_text()) for f in sorted((out / "runs").glob("*.json"))]
    if not records:
        print(f"no runs in {out / 'runs'}", file=sys.stderr)
        return 1
    # The command that trains these runs: a re-render (--summary-only) names it, not itself.
    run_args = [arg for arg in (argv if argv is not None else sys.argv[1:]) if arg != "--summary-only"]
    command = ".venv/bin/python bench/retention.py " + shlex.join(run_args)
    # Runs that do not record their machine were made where the summary before this one says (this machine for a
    # new directory).
    machine = machine_line()
    if (out / "summary.json").is_file():
        machine = json.loads((out / "summary.json").read_text())["meta"].get("machine", machine)
    print(render(records, plan, tier, tasks, name, out, command, machine))
    return 0


def machines_line(records: list[dict[str, Any]], unrecorded: str) -> str:
    """The machines of ``records`` for a summary: each recorded CPU model with its number of runs, and
    ``unrecorded`` (the machine line of the summary before) for runs from before runs recorded their machine."""
    counts = collections.Counter(r.get("machine") for r in records)
    if set(counts) == {None}:
        return unrecorded
    runs = {machine: f"{n} run{'s' * (n != 1)}" for machine, n in counts.items()}
    parts = [f"{machine} ({runs[machine]})" for machine in sorted(filter(None, counts))]
    if counts[None]:
        parts.append(f"{runs[None]} not recording {'its' if counts[None] == 1 else 'their'} machine: {unrecorded}")
    return "; ".join(parts)


def budget_settings(out: Path, seed: int, tier: dict[str, Any], n_tasks: int) -> dict[str, Any]:
    """Uniform replay at a constant rate that replays as many samples as ``mssr_full`` did with ``seed``: a
    fraction of every batch, or one sample every n steps when that is less than one sample per step."""
    path = out / "runs" / f"mssr_full-seed{seed}.json"
    if not path.is_file():
        raise SystemExit("er_budget needs mssr_full's run of the same seed: run mssr_full first")
    replayed = json.loads(path.read_text())["replayed_samples"]
    per_step = replayed / (tier["steps"] * (n_tasks - 1))  # no replay on the first task
    batch = tier["batch_size"]
    # `fixed` keeps its ratio constant; lambda_min (unused by it, but validated against lambda0) goes to 0.
    if per_step >= 1:
        return {"replay_fixed_interval": 1, "replay_lambda0": per_step / batch, "replay_lambda_min": 0.0}
    interval = max(1, round(1 / max(per_step, 1e-9)))
    return {"replay_fixed_interval": interval, "replay_lambda0": 1 / batch, "replay_lambda_min": 0.0}


if __name__ == "__main__":
    sys.exit(main())
