"""Atomic checkpoints that load without running code: a dict of tensors, NumPy arrays and
plain data (dicts, lists, tuples, str, numbers, None).

    checkpoint.save(path, {"model": model.state_dict(), "rng": np.random.get_state(), "update": 7})
    state = checkpoint.load(path, required=("model", "update"))

Saving writes a temporary file beside `path` (`.tmp-NAME-*.pt`), flushes it to disk and
renames it over `path`, so a crash mid-write never leaves a truncated file where a good
one was; temporary files that a killed save left behind are removed by the next save of
the same path. A state holding a NaN or inf in any floating tensor or array is refused
(`puffercore.finite.NonFiniteError`, naming it) and the file at `path` is left as it was.
Loading uses `torch.load(weights_only=True)`: a file carrying a pickled callable (the
classic `os.system` payload) is refused, never run. NumPy arrays and scalars, which
that loader does not accept, are stored as tensors with their dtype and restored on
load, so `load(save(state))` gives `state` back.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pickle
import tempfile
from typing import Any, Iterable

import numpy as np
import torch

from puffercore.finite import NonFiniteError

ARRAY_KEY = "__puffercore_ndarray__"


class CheckpointError(ValueError):
    """A file that is not a readable puffercore checkpoint; the message names the file."""


def save(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Write `state` atomically to `path` (see the module docstring)."""
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict, got {type(state).__name__}")
    path = os.fspath(path)
    try:
        encoded = _encode(state, "state")
    except NonFiniteError as error:
        raise NonFiniteError(f"{error}, so {path} was not written") from None
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    prefix = f".tmp-{os.path.basename(path)}-"
    for leftover in glob.glob(os.path.join(glob.escape(directory), glob.escape(prefix) + "*.pt")):
        with contextlib.suppress(FileNotFoundError):  # left by a save of this path killed mid-write
            os.remove(leftover)
    handle, temporary = tempfile.mkstemp(prefix=prefix, suffix=".pt", dir=directory)
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(encoded, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def load(path: str | os.PathLike, map_location: Any = "cpu", required: Iterable[str] = ()) -> dict[str, Any]:
    """The state a `save` wrote to `path`. FileNotFoundError if there is none;
    CheckpointError (a ValueError) naming the file for anything unreadable, truncated,
    carrying code, not a dict or missing one of the `required` keys."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        if "global" in str(error).lower():  # a callable to import: what payloads are made of
            raise CheckpointError(f"{path} is not a puffercore checkpoint: it holds pickled objects other than "
                                  f"tensors and plain data, which are never unpickled") from None
        raise CheckpointError(f"{path} is not a readable checkpoint (corrupt: not a torch save file)") from None
    except (RuntimeError, EOFError, OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise CheckpointError(f"{path} is not a readable checkpoint (truncated or corrupt: "
                              f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'no detail'})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} is not a puffercore checkpoint (expected a dict, got {type(state).__name__})")
    missing = [key for key in required if key not in state]
    if missing:
        raise CheckpointError(f"{path} is not a checkpoint of this kind: it lacks {missing}")
    return _decode(state)


def _encode(value: Any, where: str) -> Any:
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise NonFiniteError(f"{where} holds NaN or inf")
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise TypeError(f"{where}: object arrays can't be checkpointed (they would need unpickling)")
        if np.issubdtype(value.dtype, np.floating) and not np.isfinite(value).all():
            raise NonFiniteError(f"{where} holds NaN or inf")
        return {ARRAY_KEY: torch.from_numpy(np.ascontiguousarray(value).copy())}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {key: _encode(item, f"{where}[{key!r}]") for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_encode(item, f"{where}[{index}]") for index, item in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and ARRAY_KEY in value:
            return value[ARRAY_KEY].numpy()
        return {key: _decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decode(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_decode(item) for item in value)
    return value
