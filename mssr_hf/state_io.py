"""Write and read nested state dicts without pickle: tensors go to ``NAME.safetensors``, everything else (ints,
floats, strings, bools, None, lists, dicts) to ``NAME.json``, with each tensor's place in the tree recorded."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

_TENSOR = "__tensor__"


def _split(value: Any, path: str, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        tensors[path] = value.detach().cpu().contiguous()
        return {_TENSOR: path}
    if isinstance(value, dict):
        return {str(k): _split(v, f"{path}/{k}", tensors) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_split(v, f"{path}/{i}", tensors) for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(
        f"state at {path or '/'} holds a {type(value).__name__}; only tensors and JSON primitives are saved"
    )


def _join(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, dict):
        if set(value) == {_TENSOR}:
            return tensors[value[_TENSOR]]
        return {k: _join(v, tensors) for k, v in value.items()}
    if isinstance(value, list):
        return [_join(v, tensors) for v in value]
    return value


def save_state(directory: str | os.PathLike, name: str, state: dict[str, Any]) -> None:
    """Write ``state`` as ``directory/name.safetensors`` + ``directory/name.json``; each file is written to a
    temporary name first and renamed, so an interrupted save never leaves a half-written file behind."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    tree = _split(state, "", tensors)
    tmp_tensors, tmp_json = directory / f".{name}.safetensors.tmp", directory / f".{name}.json.tmp"
    save_file(tensors, str(tmp_tensors))
    tmp_json.write_text(json.dumps(tree, indent=1))
    os.replace(tmp_tensors, directory / f"{name}.safetensors")
    os.replace(tmp_json, directory / f"{name}.json")


def load_state(directory: str | os.PathLike, name: str) -> dict[str, Any]:
    """Read what :func:`save_state` wrote."""
    directory = Path(directory)
    tree = json.loads((directory / f"{name}.json").read_text())
    return _join(tree, load_file(str(directory / f"{name}.safetensors")))


def has_state(directory: str | os.PathLike, name: str) -> bool:
    directory = Path(directory)
    return (directory / f"{name}.json").is_file() and (directory / f"{name}.safetensors").is_file()
