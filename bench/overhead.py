"""Step time, peak memory and forward passes of MSSRTrainer against plain SFTTrainer and fixed replay.

Same model, data and steps for every configuration; runs interleaved (A B C D E, A B C D E, ...), each in a fresh
subprocess (so peak RSS is per run), median over rounds. Configurations:

- ``sft``: trl.SFTTrainer on the current task (no replay, no memory);
- ``none``: MSSRTrainer, no replay (per-sample memory tracking only);
- ``fixed``: fixed replay at the *same steps* as mssr_full (every ``replay_first_interval`` would differ), constant
  ratio, uniform selection: the paper's Table tab:overhead baseline;
- ``er``: classical experience replay (a fraction of every batch, uniform);
- ``mssr_full``: MSSR defaults, intervals scaled to the run length.

    .venv/bin/python bench/overhead.py                 # defaults: 5 rounds x 60 steps, ~20 minutes on 2 cores
    .venv/bin/python bench/overhead.py --rounds 3 --steps 30

Writes bench/results/overhead.json and bench/results/overhead.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/common.py, also when this file is loaded by path
from common import ROOT, cpu_model, tiny_model_dir  # noqa: E402

CONFIGS = ("sft", "none", "fixed", "er", "mssr_full")
THREADS = 2
# A 3.7M-parameter Llama (saved once by `prepare`, loaded by every run).
MODEL = dict(vocab_size=2048, hidden_size=256, layers=4, intermediate_size=768, heads=8, kv_heads=4, max_positions=256)


def task_rows(n: int, seed: int, op: str) -> list[dict]:
    import random

    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        value = {"+": a + b, "-": a - b, "*": a * b}[op]
        words = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "omega"]) for _ in range(rng.randint(8, 24)))
        rows.append({"prompt": f"{words}. Compute {a} {op} {b} =", "completion": f" {value}. {words}."})
    return rows


def single_run(config: str, steps: int, bank_size: int, workdir: Path) -> dict:
    """One training run in this process; returns its measurements."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from mssr_hf.mssr_config import MSSRConfig
    from mssr_hf.mssr_trainer import MSSRTrainer
    from mssr_hf.scheduler import interval_steps

    torch.set_num_threads(THREADS)
    tokenizer = AutoTokenizer.from_pretrained(model_dir(workdir))
    model = AutoModelForCausalLM.from_pretrained(model_dir(workdir))
    forwards = []
    model.register_forward_hook(lambda *a: forwards.append(1))
    task = Dataset.from_list(task_rows(4096, 1, "-"))
    common = dict(output_dir=str(workdir / f"out-{config}"), report_to=[], bf16=False, use_cpu=True,
                  gradient_checkpointing=False, per_device_train_batch_size=8, gradient_accumulation_steps=2,
                  max_steps=steps, learning_rate=5e-4, max_length=128, logging_steps=10, save_strategy="no",
                  disable_tqdm=True, seed=0, dataloader_num_workers=0)  # fmt: skip
    first = max(1, steps // 20)
    if config == "sft":
        trainer = SFTTrainer(model, SFTConfig(**common), train_dataset=task, processing_class=tokenizer)
    else:
        bank = Dataset.from_list(task_rows(bank_size, 2, "+"))
        mssr_steps = ",".join(str(t) for t in interval_steps(first, 0.5, 0.05, steps + 1))
        replay = {
            "none": dict(replay_strategy="none"),
            "fixed": dict(replay_strategy="mssr_sch", replay_interval_pattern=mssr_steps, replay_beta_r=0.0,
                          replay_lambda_min=0.3),  # same steps as mssr_full, constant ratio, uniform: fixed replay
            "er": dict(replay_strategy="fixed", replay_fixed_interval=1),
            "mssr_full": dict(replay_strategy="mssr_full", replay_first_interval=first),
        }[config]  # fmt: skip
        args = MSSRConfig(**common, **replay, replay_refresh_interval=max(1, steps // 8), replay_staleness_cap=steps)
        trainer = MSSRTrainer(model, args, train_dataset=task, replay_dataset=bank if config != "none" else None,
                              processing_class=tokenizer)  # fmt: skip
        if config == "none":  # memory over task + bank like the others, so its size matches
            trainer.memory.extend(bank_size, step=0)

    step_times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            step_times.append(time.perf_counter() - self.start)

    trainer.add_callback(Timer())
    forwards.clear()
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    warm = step_times[3:] if len(step_times) > 6 else step_times
    counters = getattr(trainer, "counters", {})
    return {
        "config": config, "steps": len(step_times), "median_step_ms": 1000 * statistics.median(warm),
        "mean_step_ms": 1000 * statistics.fmean(warm), "train_seconds": wall, "forward_passes": len(forwards),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "replayed_samples": counters.get("replayed_samples", 0),
        # MSSRTrainer's own work (gather + memory update, schedule, buffer refresh, hazard update, plans), in-process
        "bookkeeping_ms_per_step": 1000 * counters.get("bookkeeping_seconds", 0.0) / max(len(step_times), 1),
        "parameters": sum(p.numel() for p in model.parameters()),
    }  # fmt: skip


def model_dir(workdir: Path) -> Path:
    return workdir / "model-h{hidden_size}-l{layers}".format(**MODEL)


def prepare(workdir: Path) -> None:
    corpus = lambda: [r["prompt"] + r["completion"] for op in "+-" for r in task_rows(2000, 3, op)]
    tiny_model_dir(model_dir(workdir), corpus, seed=0, **MODEL)


def measure(args: argparse.Namespace) -> list[dict]:
    """Every configuration, ``args.rounds`` times interleaved, each in a fresh subprocess; one record per run."""
    args.workdir.mkdir(parents=True, exist_ok=True)
    prepare(args.workdir)
    env = {**os.environ, "OMP_NUM_THREADS": str(THREADS), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    runs: list[dict] = []
    for r in range(args.rounds):
        for config in CONFIGS:
            cmd = [sys.executable, __file__, "--single", config, "--steps", str(args.steps), "--bank-size",
                   str(args.bank_size), "--workdir", str(args.workdir)]  # fmt: skip
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            run = json.loads(done.stdout.strip().splitlines()[-1])
            run["round"] = r
            runs.append(run)
            print(f"[overhead] round {r} {config}: {run['median_step_ms']:.1f} ms/step, "
                  f"{run['peak_rss_mb']:.0f} MB, {run['forward_passes']} forwards", flush=True)  # fmt: skip
    return runs


def render(runs: list[dict], args: argparse.Namespace, command: str) -> str:
    """Medians and targets of ``runs``; writes overhead.json and overhead.md into ``args.out``, returns the latter."""
    med = {c: {k: statistics.median(r[k] for r in runs if r["config"] == c)
               for k in ("median_step_ms", "train_seconds", "peak_rss_mb", "forward_passes", "replayed_samples",
                         "bookkeeping_ms_per_step")}
           for c in CONFIGS}  # fmt: skip
    ratio = lambda a, b, k: med[a][k] / med[b][k]  # noqa: E731
    targets = [
        ("mssr_full / fixed step time", ratio("mssr_full", "fixed", "median_step_ms"), 1.02),
        ("mssr_full / sft step time (no replay)", ratio("mssr_full", "sft", "median_step_ms"), 1.03),
        ("mssr_full / fixed peak memory", ratio("mssr_full", "fixed", "peak_rss_mb"), 1.02),
    ]
    forwards_equal = len({med[c]["forward_passes"] for c in CONFIGS}) == 1
    import torch
    import transformers
    import trl

    cpu = cpu_model()
    machine = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "threads": THREADS,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "date": time.strftime("%Y-%m-%d"),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "overhead.json").write_text(json.dumps(
        {"command": command, "machine": machine, "steps": args.steps, "rounds": args.rounds,
         "bank_size": args.bank_size, "medians": med, "runs": runs}, indent=1))  # fmt: skip
    lines = ["# Overhead benchmark: MSSRTrainer vs SFTTrainer and fixed replay", "", "Produced by (repository root):",
             "", "```", command, "```", "",
             f"{machine['date']} · {cpu} ({machine['cores']} cores) · torch {machine['torch']} · transformers "
             f"{machine['transformers']} · trl {machine['trl']} · {THREADS} threads · {args.rounds} rounds x "
             f"{args.steps} steps · Llama {runs[0]['parameters'] / 1e6:.1f}M params, batch 8 x 2 accumulation, "
             f"<= 128 tokens · replay bank {args.bank_size} samples", "",
             "| config | median step ms | MSSR bookkeeping ms/step | train s | peak RSS MB | forward passes | "
             "replayed samples |", "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for c in CONFIGS:
        m = med[c]
        lines.append(f"| {c} | {m['median_step_ms']:.1f} | {m['bookkeeping_ms_per_step']:.2f} | "
                     f"{m['train_seconds']:.1f} | {m['peak_rss_mb']:.0f} | {m['forward_passes']:.0f} | "
                     f"{m['replayed_samples']:.0f} |")  # fmt: skip
    spread = {c: (min(r["median_step_ms"] for r in runs if r["config"] == c),
                  max(r["median_step_ms"] for r in runs if r["config"] == c)) for c in CONFIGS}  # fmt: skip
    lines += [
        "",
        "Run-to-run range of the per-run median step time (ms): "
        + ", ".join(f"{c} {lo:.0f}-{hi:.0f}" for c, (lo, hi) in spread.items()),
        "",
        'MSSR bookkeeping = `trainer.counters["bookkeeping_seconds"]` per step: the time MSSRTrainer spends in its '
        "own work (gather + memory update of each micro-batch's losses; schedule, buffer refresh, hazard update and "
        "plans after each step; the stage start), measured in-process, so run-to-run noise does not hide it. Its "
        "ratio to the `sft` step time is the overhead MSSR adds.",
        "",
    ]
    bookkeeping_ratio = 1 + med["mssr_full"]["bookkeeping_ms_per_step"] / med["sft"]["median_step_ms"]
    targets.append(("1 + mssr_full bookkeeping / sft step time", bookkeeping_ratio, 1.03))
    lines += ["| target | measured | limit | result |", "|---|---:|---:|---|"]
    for name, value, limit in targets:
        lines.append(f"| {name} | {value:.3f} | {limit} | {'PASS' if value <= limit else 'FAIL'} |")
    lines.append(f"| forward passes equal across configs | {'yes' if forwards_equal else 'no'} | equal | "
                 f"{'PASS' if forwards_equal else 'FAIL'} |")  # fmt: skip
    markdown = "\n".join(lines) + "\n"
    (args.out / "overhead.md").write_text(markdown)
    return markdown


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--bank-size", type=int, default=50_000)
    p.add_argument("--single", choices=CONFIGS, help=argparse.SUPPRESS)
    p.add_argument("--workdir", type=Path, default=ROOT / "bench" / ".overhead_work")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = p.parse_args()
    if args.single:
        print(json.dumps(single_run(args.single, args.steps, args.bank_size, args.workdir)))
        return
    runs = measure(args)
    command = shlex.join([".venv/bin/python", "bench/overhead.py", *sys.argv[1:]])
    print(render(runs, args, command))


if __name__ == "__main__":
    main()
