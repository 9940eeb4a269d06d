"""Write and read nested state dicts without pickle: tensors go to ``NAME.safetensors``, everything else (ints,
floats, strings, bools, None, lists, dicts) to ``NAME.json``, with each tensor's place in the tree recorded.

A folder written in several steps (a checkpoint, a finished stage) counts only once a file written last records the
size of every file in it: :func:`file_sizes` makes that record and :func:`size_problem` checks a folder against it,
so a folder whose writing was interrupted, or a file truncated later, is found before it is read.
"""

from __future__ import annotations

import hashlib
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
    """Read what :func:`save_state` wrote.

    Raises:
        `ValueError`: a file is missing, unreadable or corrupt; the message names it.
    """
    directory = Path(directory)
    tree_file, tensor_file = directory / f"{name}.json", directory / f"{name}.safetensors"
    try:
        tree = json.loads(tree_file.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{tree_file} cannot be read: {type(error).__name__}: {error}") from error
    try:
        tensors = load_file(str(tensor_file))
    except Exception as error:  # safetensors raises its own SafetensorError for a corrupt file
        raise ValueError(f"{tensor_file} cannot be read: {type(error).__name__}: {error}") from error
    try:
        return _join(tree, tensors)
    except KeyError as error:
        raise ValueError(f"{tree_file} names a tensor {tensor_file} does not hold: {error}") from error


def state_digest(state: dict[str, Any]) -> str:
    """The SHA-256 of ``state`` as :func:`save_state` would write it: its tree and every tensor's dtype, shape and
    bytes (equal states, equal digests)."""
    tensors: dict[str, torch.Tensor] = {}
    digest = hashlib.sha256(json.dumps(_split(state, "", tensors), sort_keys=True).encode())
    for path in sorted(tensors):
        tensor = tensors[path]
        digest.update(f"{path}:{tensor.dtype}:{tuple(tensor.shape)}:".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def has_state(directory: str | os.PathLike, name: str) -> bool:
    directory = Path(directory)
    return (directory / f"{name}.json").is_file() and (directory / f"{name}.safetensors").is_file()


def file_sizes(directory: str | os.PathLike, skip: tuple[str, ...] = ()) -> dict[str, int]:
    """The size in bytes of every file under ``directory`` (paths relative to it, ``/``-separated), except the
    entries named in ``skip`` (files or folders at its top level) and hidden files (temporary names)."""
    directory = Path(directory)
    sizes = {}
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory)
        if relative.parts[0] in skip or any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        sizes[relative.as_posix()] = path.stat().st_size
    return sizes


def size_problem(directory: str | os.PathLike, sizes: dict[str, int]) -> str | None:
    """What differs between the files of ``directory`` and the ``sizes`` recorded when it was complete (a file missing,
    or of another size), or None when each recorded file is there with its size."""
    directory = Path(directory)
    for relative, size in sizes.items():
        path = directory / relative
        if not path.is_file():
            return f"{path} is missing"
        if path.stat().st_size != size:
            return f"{path} holds {path.stat().st_size} bytes, {size} were written"
    return None
