"""``mssr-hf train`` from the model's side: model_init_kwargs, attn_implementation, dtype / torch_dtype and 4-bit
loading reach ``from_pretrained``; bad input is one line, anything unexpected its traceback; importing the package
leaves bitsandbytes alone until a quantized model is loaded."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from mssr_hf.cli import build_runner, main, parse_train_args
from mssr_hf.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
TINY_CONFIG = ROOT / "examples" / "configs" / "cpu_tiny.yaml"


def runner_for(config, tiny_model_dir, tmp_path, *flags):
    parsed = parse_train_args([str(config), "--model_name_or_path", tiny_model_dir, "--output_dir",
                               str(tmp_path / "run"), *flags])  # fmt: skip
    return build_runner(*parsed)


def test_model_settings_reach_from_pretrained(tiny_model_dir, tmp_path):
    """attn_implementation and torch_dtype (the older name of dtype) from flags, and model_init_kwargs from the YAML
    file, load the model; two values for one setting are refused."""
    config = tmp_path / "cfg.yaml"
    config.write_text(TINY_CONFIG.read_text() + "model_init_kwargs: {low_cpu_mem_usage: true}\n")
    runner = runner_for(config, tiny_model_dir, tmp_path, "--attn_implementation", "eager", "--torch_dtype",
                        "bfloat16")  # fmt: skip
    assert runner.model_init_kwargs == {"low_cpu_mem_usage": True, "dtype": torch.bfloat16,
                                        "attn_implementation": "eager", "revision": "main"}  # fmt: skip
    model = runner._model_after(-1)  # the base model, as the first stage loads it
    assert model.config._attn_implementation == "eager" and next(model.parameters()).dtype == torch.bfloat16

    config.write_text(TINY_CONFIG.read_text() + "model_init_kwargs: {revision: v1, torch_dtype: float16}\n")
    runner = runner_for(config, tiny_model_dir, tmp_path)  # model_revision and dtype at their defaults give way
    assert runner.model_init_kwargs == {"revision": "v1", "dtype": torch.float16}

    config.write_text(TINY_CONFIG.read_text() + "model_init_kwargs: {attn_implementation: sdpa}\n")
    with pytest.raises(InputError, match="attn_implementation='eager' and model_init_kwargs attn_implementation="):
        runner_for(config, tiny_model_dir, tmp_path, "--attn_implementation", "eager")
    with pytest.raises(InputError, match="torch_dtype='bfloat16' and dtype='float16' disagree"):
        runner_for(TINY_CONFIG, tiny_model_dir, tmp_path, "--torch_dtype", "bfloat16", "--dtype", "float16")


def test_qlora_example_config_asks_for_4bit_nf4(tiny_model_dir, tmp_path):
    """examples/configs/qlora_paper_3_qwen2.5-7b.yaml loads the base model in 4-bit NF4 with nested quantization,
    bfloat16 compute and SDPA attention (read with the tiny model in place of Qwen, which is not on this machine)."""
    config = ROOT / "examples" / "configs" / "qlora_paper_3_qwen2.5-7b.yaml"
    runner = runner_for(config, tiny_model_dir, tmp_path, "--bf16", "false", "--use_cpu", "true")
    quantization = runner.model_init_kwargs["quantization_config"]
    assert quantization.load_in_4bit and quantization.bnb_4bit_quant_type == "nf4"
    assert quantization.bnb_4bit_use_double_quant and quantization.bnb_4bit_compute_dtype == torch.bfloat16
    assert runner.model_init_kwargs["dtype"] == torch.bfloat16
    assert runner.model_init_kwargs["attn_implementation"] == "sdpa" and runner.peft_config.r == 8


@pytest.mark.slow
def test_train_loads_a_4bit_model_and_trains_its_adapter(tiny_model_dir, tmp_path):
    """`mssr-hf train --load_in_4bit true --use_peft true`: the base model's layers are bitsandbytes 4-bit layers
    under the adapter, which trains and is saved. (A model of hidden size 64: bitsandbytes' CPU kernel generates
    only from layers of at least its 64-value block.)"""
    from transformers import AutoTokenizer, TrainerCallback

    from mssr_hf.tiny_model import build_tiny_model

    model_dir = tmp_path / "model64"
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    build_tiny_model(tokenizer, hidden_size=64).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)

    class BaseLayer(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self.layer = type(model.get_base_model().model.layers[0].self_attn.q_proj.base_layer).__name__

    runner = runner_for(TINY_CONFIG, str(model_dir), tmp_path, "--load_in_4bit", "true", "--use_peft", "true",
                        "--lora_target_modules", "q_proj", "v_proj", "--tasks", "rg_addition", "--max_steps", "2",
                        "--train_size", "16", "--eval_size", "2")  # fmt: skip
    seen = BaseLayer()
    runner.callbacks.append(seen)
    results = runner.run()
    assert seen.layer == "Linear4bit" and len(results["matrix"]) == 1
    assert (tmp_path / "run" / "stage-00-rg_addition" / "adapter_model.safetensors").is_file()


def test_quantization_needs_bitsandbytes_and_an_adapter(tiny_model_dir, tmp_path, monkeypatch, capsys):
    argv = ["train", str(TINY_CONFIG), "--model_name_or_path", tiny_model_dir, "--output_dir", str(tmp_path / "r"),
            "--load_in_4bit", "true"]  # fmt: skip
    assert main(argv) == 2
    assert "a quantized model trains LoRA adapters, not its own weights: set use_peft: true" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # as if not installed
    assert main([*argv, "--use_peft", "true"]) == 2
    error = capsys.readouterr().err.strip()
    assert error == ('mssr-hf: error: load_in_4bit / load_in_8bit quantize the model with bitsandbytes: '
                     'pip install "mssr-hf[qlora]"')  # fmt: skip
    assert not (tmp_path / "r").exists()


def test_a_bad_task_is_one_line_before_the_model_loads(tmp_path, capsys):
    """A declared task with an unknown key fails while the arguments are read: the model path does not even exist."""
    config = tmp_path / "cfg.yaml"
    raw = yaml.safe_load(TINY_CONFIG.read_text())
    raw["tasks"] = ["rg_addition", {"name": "mine", "dataset": "org/data", "prompt": "{q}", "completion_field": "a"}]
    config.write_text(yaml.safe_dump(raw))
    code = main(["train", str(config), "--model_name_or_path", str(tmp_path / "no-model"), "--output_dir",
                 str(tmp_path / "run")])  # fmt: skip
    error = capsys.readouterr().err.strip()
    assert code == 2 and error.startswith("mssr-hf: error: tasks[1] ('mine'): 'prompt' is not a task key")
    assert len(error.splitlines()) == 1 and not (tmp_path / "run").exists()


def test_an_unexpected_error_keeps_its_traceback(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """Only bad input is cut to one line: any other exception leaves main() whole (the console shows its traceback,
    every line of its message)."""
    from mssr_hf.continual import ContinualRunner

    def fails(self):
        raise ValueError("shapes do not match\nsecond line of the message")

    monkeypatch.setattr(ContinualRunner, "run", fails)
    with pytest.raises(ValueError, match="shapes do not match\nsecond line"):
        main(["train", str(TINY_CONFIG), "--model_name_or_path", tiny_model_dir, "--output_dir", str(tmp_path)])
    assert "mssr-hf: error" not in capsys.readouterr().err


def test_importing_the_package_leaves_bitsandbytes_until_a_4bit_model_loads(tiny_model_dir):
    """``import mssr_hf`` does not import bitsandbytes (whose CPU import logs "Failed to load CPU gemm_4bit_forward");
    loading a 4-bit model does, and peft then wraps its layers as bitsandbytes layers."""
    script = (
        "import sys, torch, mssr_hf\n"
        "print('imported', 'bitsandbytes' in sys.modules, file=sys.stderr, flush=True)\n"
        "from peft import LoraConfig, get_peft_model\n"
        "from transformers import AutoModelForCausalLM, BitsAndBytesConfig\n"
        "quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.float32)\n"
        f"model = AutoModelForCausalLM.from_pretrained({tiny_model_dir!r}, quantization_config=quant)\n"
        "model = get_peft_model(model, LoraConfig(r=2, target_modules=['q_proj']))\n"
        "layer = model.base_model.model.model.layers[0].self_attn.q_proj\n"
        "print('loaded', 'bitsandbytes' in sys.modules, type(layer).__module__, type(layer).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    before_load = done.stderr.split("imported", 1)[0]
    assert "imported False" in done.stderr and "gemm_4bit" not in before_load
    assert done.stdout.strip() == "loaded True peft.tuners.lora.bnb Linear4bit"
