"""Atomic checkpoints: a dict of tensors, arrays and plain data saved so that a crash
mid-write never leaves a truncated file where a good one was.

    checkpoint.save(path, {"model": model.state_dict(), "update": 7})
    state = checkpoint.load(path)
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import torch


def save(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Write `state` to a temporary file beside `path`, flush it to disk, then rename it
    over `path` (os.replace is atomic on POSIX and Windows within one filesystem)."""
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict, got {type(state).__name__}")
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".pt", dir=directory)
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(state, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def load(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by `save`. Checkpoints hold RNG states and config dicts
    besides tensors, so they are loaded with weights_only=False: load only files you trust."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no checkpoint at {path}")
    state = torch.load(path, map_location=map_location, weights_only=False)
    if not isinstance(state, dict):
        raise ValueError(f"{path} is not a puffercore checkpoint (expected a dict, got {type(state).__name__})")
    return state
