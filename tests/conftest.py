import dataclasses
import functools
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


def hub_metadata_problem(folder) -> str | None:
    """What the Hub says when it refuses a commit for the model card's metadata, or None: a ``base_model`` that is
    not a model id (a local path, say) is refused with this message (the Hub also checks that the model exists)."""
    from pathlib import Path

    import yaml
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    card = Path(folder) / "README.md"
    if not card.is_file() or not card.read_text().startswith("---\n"):
        return None
    metadata = yaml.safe_load(card.read_text().split("---\n")[1]) or {}
    bases = metadata.get("base_model") or []
    for base in [bases] if isinstance(bases, str) else bases:
        try:
            validate_repo_id(base)
        except HFValidationError:
            return (f'Bad request for commit endpoint: Invalid metadata in README.md.\n- "base_model" with value '
                    f'"{base}" is not valid. Use a model id from https://hf.co/models.')  # fmt: skip
    return None


def arithmetic_rows(n: int, op: str = "+", seed: int = 0) -> list[dict]:
    """Prompt/completion rows of a small arithmetic task (distinct tasks per ``op``)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(0, 50, (n,), generator=g).tolist()
    b = torch.randint(0, 50, (n,), generator=g).tolist()
    value = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}[op]
    return [{"prompt": f"{x} {op} {y} =", "completion": f" {value(x, y)}"} for x, y in zip(a, b)]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from mssr_hf.tiny_model import save_tiny_model

    corpus = [r["prompt"] + r["completion"] for op in "+-*" for r in arithmetic_rows(200, op)]
    corpus += ["plus minus times"] * 20  # the answer words of tests/test_continual.py
    return str(save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", corpus))


@functools.cache
def _config_defaults() -> dict:
    """MSSRConfig's field defaults: the one source of the memory's and the strategies' hyperparameters."""
    from mssr_hf.mssr_config import MSSRConfig

    return {f.name: f.default for f in dataclasses.fields(MSSRConfig)}


def make_memory(num_samples: int = 0, **overrides):
    """A SampleMemory with MSSRConfig's defaults and seed 0; ``overrides`` use SampleMemory's argument names."""
    from mssr_hf.memory import SampleMemory
    from mssr_hf.mssr_config import constructor_arguments

    return SampleMemory(num_samples, **{**constructor_arguments("memory", _config_defaults()), "seed": 0, **overrides})


def make_strategy(name: str, **overrides):
    """``build_strategy(name, ...)`` with MSSRConfig's defaults; ``overrides`` use build_strategy's argument names."""
    from mssr_hf.mssr_config import constructor_arguments
    from mssr_hf.scheduler import build_strategy

    return build_strategy(**{**constructor_arguments("strategy", _config_defaults()), "name": name, **overrides})
