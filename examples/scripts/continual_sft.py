"""Continual SFT over a task sequence with MSSR replay: YAML + flags -> MSSRConfig, TRL's ModelConfig and the
runner's arguments, then ContinualRunner. It is `mssr-hf train` as a script (`accelerate launch -m mssr_hf.cli train`
runs the same); the YAML file's `tasks` may declare tasks of your own next to built-in names
(examples/configs/cpu_own_tasks.yaml).

One GPU:
    accelerate launch --config_file examples/accelerate_configs/single_gpu.yaml examples/scripts/continual_sft.py \
        examples/configs/paper_3_qwen2.5-7b.yaml

Eight GPUs (same effective batch of 256):
    accelerate launch --config_file examples/accelerate_configs/multi_gpu.yaml examples/scripts/continual_sft.py \
        examples/configs/paper_11_llama-3.1-8b.yaml --gradient_accumulation_steps 8

A baseline instead of MSSR (any field can be overridden the same way):
    accelerate launch --config_file examples/accelerate_configs/single_gpu.yaml examples/scripts/continual_sft.py \
        examples/configs/paper_3_qwen2.5-7b.yaml --replay_strategy fixed --output_dir runs/paper_3_qwen_fixed

Two CPU processes (gloo), a tiny model:
    accelerate launch --config_file examples/accelerate_configs/cpu_ddp.yaml examples/scripts/continual_sft.py \
        examples/configs/cpu_tiny.yaml --model_name_or_path PATH_TO_TINY_MODEL

Offline on one CPU with SmolLM2-135M-Instruct:
    python examples/scripts/continual_sft.py examples/configs/cpu_smollm2_demo.yaml
"""

import sys

from mssr_hf.cli import build_runner, parse_train_args
from mssr_hf.report import format_results


def main(argv: list[str]) -> None:
    runner_args, training_args, model_args = parse_train_args(argv)
    runner = build_runner(runner_args, training_args, model_args)
    results = runner.run()
    if runner.state.is_main_process:
        print(format_results(results))


if __name__ == "__main__":
    main(sys.argv[1:])
