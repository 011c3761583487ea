"""Atomic checkpoints that load without running code: a dict of tensors, NumPy arrays and
plain data (dicts, lists, tuples, str, numbers, None).

    checkpoint.save(path, {"model": model.state_dict(), "rng": np.random.get_state(), "update": 7})
    state = checkpoint.load(path, required=("model", "update"))

Saving writes a temporary file beside `path` (`.tmp-NAME-*.pt`), flushes it to disk and
renames it over `path`, so a crash mid-write never leaves a truncated file where a good
one was; temporary files that a killed save left behind are removed by the next save of
the same path. A state holding a NaN or inf in any floating tensor or array is refused
(`puffercore.finite.NonFiniteError`, naming it) and the file at `path` is left as it was;
`load` refuses such a file too (a save never writes one: it was altered or corrupted).
Loading uses `torch.load(weights_only=True)`: a file carrying a pickled callable (the
classic `os.system` payload) is refused, never run. NumPy arrays and scalars, which
that loader does not accept, are stored as tensors with their dtype and restored on
load, so `load(save(state))` gives `state` back.

    check_weights(lambda: Net(width=config.width), state["model"], path)   # before building Net for real

`check_weights` compares a network's tensors with a checkpoint's by name and shape with
the network built on torch's meta device, which allocates nothing: a config that says a
layer is a million wide is refused in a line, not after asking for terabytes.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pickle
import tempfile
from typing import Any, Callable, Iterable

import numpy as np
import torch

from puffercore.finite import NonFiniteError

ARRAY_KEY = "__puffercore_ndarray__"
# Unsigned arrays wider than a byte (NumPy's RNG state is uint32) as the signed integers
# of their bits, with their dtype: torch before 2.4 cannot save uint16/32/64 tensors.
UNSIGNED_KEY = "__puffercore_unsigned__"
UNSIGNED = {"<u2": "<i2", "<u4": "<i4", "<u8": "<i8"}
# puffercore's kinds of checkpoint, each by a key only it holds, and what plays one: a
# file of another kind than a loader requires is named as what it is.
KINDS = {"alphazero_config": ("an AlphaZero run's", "puffercore play GAME --checkpoint RUN"),
         "model": ("a PPO run's", "puffercore eval --checkpoint RUN")}


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


def load(path: str | os.PathLike, map_location: Any = "cpu", required: Iterable[str] = (),
         kind: str = "a checkpoint of this kind") -> dict[str, Any]:
    """The state a `save` wrote to `path`. FileNotFoundError if there is none;
    CheckpointError (a ValueError) naming the file for anything unreadable, truncated,
    carrying code, holding NaN or inf, not a dict or missing one of the `required` keys
    (then "not `kind`", and what it is when it is another of puffercore's KINDS)."""
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
        detail = str(error).split(". ")[0].splitlines()[0] if str(error) else "no detail"  # torch's first sentence
        raise CheckpointError(f"{path} is not a readable checkpoint (truncated or corrupt: "
                              f"{type(error).__name__}: {detail})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} is not a puffercore checkpoint (expected a dict, got {type(state).__name__})")
    missing = [key for key in required if key not in state]
    if missing:
        other = next((other for key, other in KINDS.items() if key in state), None)
        raise CheckpointError(f"{path} is not {kind}: it lacks {missing}"
                              + (f"; it is {other[0]} checkpoint (`{other[1]}` plays it)" if other else ""))
    try:
        return _decode(state, "state")
    except NonFiniteError as error:
        raise CheckpointError(f"{path}: {error}, which no checkpoint holds (save refuses them): the file was altered "
                              f"or corrupted") from None


def check_weights(build: Callable[[], torch.nn.Module], weights: Any, where: str) -> None:
    """ValueError naming `where` unless `weights` (a state dict read from it) holds a
    tensor of the same shape for each of the tensors of the network `build()` makes,
    and nothing else; `build` runs on torch's meta device (no memory, no values)."""
    with torch.device("meta"):
        expected = {name: tuple(tensor.shape) for name, tensor in build().state_dict().items()}
    if not isinstance(weights, dict):
        raise CheckpointError(f"{where}: the weights are not a dict of tensors (got {type(weights).__name__})")
    problems = [f"{name!r} is missing" for name in expected if name not in weights]
    problems += [f"{name!r} is not a tensor of the network" for name in weights if name not in expected]
    for name, shape in expected.items():
        value = weights.get(name)
        if name in weights and not isinstance(value, torch.Tensor):
            problems.append(f"{name!r} is a {type(value).__name__}, not a tensor")
        elif name in weights and tuple(value.shape) != shape:
            problems.append(f"{name!r} is {list(value.shape)} in the file but {list(shape)} in the network")
    if problems:
        more = f" (and {len(problems) - 2} more)" if len(problems) > 2 else ""
        raise CheckpointError(f"{where}: the weights do not fit the network its config describes: "
                              f"{'; '.join(problems[:2])}{more}")


def _encode(value: Any, where: str) -> Any:
    if isinstance(value, torch.Tensor):
        _check_finite(value, where)
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise TypeError(f"{where}: object arrays can't be checkpointed (they would need unpickling)")
        if value.dtype.str in UNSIGNED:  # stored as the signed integers of the same bits
            return {ARRAY_KEY: torch.from_numpy(np.ascontiguousarray(value).view(UNSIGNED[value.dtype.str]).copy()),
                    UNSIGNED_KEY: value.dtype.str}
        tensor = torch.from_numpy(np.ascontiguousarray(value).copy())
        _check_finite(tensor, where)
        return {ARRAY_KEY: tensor}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {key: _encode(item, f"{where}[{key!r}]") for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_encode(item, f"{where}[{index}]") for index, item in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    return value


def _decode(value: Any, where: str) -> Any:
    if isinstance(value, torch.Tensor):
        _check_finite(value, where)
        return value
    if isinstance(value, dict):
        if len(value) == 1 and ARRAY_KEY in value and isinstance(value[ARRAY_KEY], torch.Tensor):
            _check_finite(value[ARRAY_KEY], where)
            return value[ARRAY_KEY].numpy()
        if set(value) == {ARRAY_KEY, UNSIGNED_KEY} and isinstance(value[ARRAY_KEY], torch.Tensor) \
                and value[ARRAY_KEY].numpy().dtype.str == UNSIGNED.get(value[UNSIGNED_KEY]):
            return value[ARRAY_KEY].numpy().view(value[UNSIGNED_KEY])
        return {key: _decode(item, f"{where}[{key!r}]") for key, item in value.items()}
    if isinstance(value, list):
        return [_decode(item, f"{where}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, tuple):
        return tuple(_decode(item, f"{where}[{index}]") for index, item in enumerate(value))
    return value


def _check_finite(tensor: torch.Tensor, where: str) -> None:
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        raise NonFiniteError(f"{where} holds NaN or inf")
