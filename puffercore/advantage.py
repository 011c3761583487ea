"""Advantages for rollout rows: GAE(gamma, lambda) with optional V-trace-style importance
clipping, computed by a native kernel (threaded C++ on CPU, CUDA on GPU tensors).

    advantages, returns = puffercore.advantage.compute(
        values, rewards, terminals, truncations, final_values, gamma=0.99, lam=0.95)
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import sys
from typing import Any, NamedTuple

import numpy as np

from puffercore import _advantage_cpu
from puffercore.checks import check_int

__all__ = ["compute"]

CUDA_LIBRARY = "libpuffercore_advantage_cuda.so"

# Accepted dtypes: NumPy's dtype.char -> name (dtype.name is slow enough to show in the
# call overhead; the names are torch's too).
_FLOAT = {"f": "float32"}
_FLAG = {"?": "bool", "B": "uint8"}


def compute(
    values: Any,
    rewards: Any,
    terminals: Any,
    truncations: Any,
    final_values: Any = None,
    *,
    gamma: float = 0.99,
    lam: float = 0.95,
    ratios: Any = None,
    rho_clip: float = 1.0,
    c_clip: float = 1.0,
    advantages: Any = None,
    returns: Any = None,
    num_threads: int | None = None,
) -> tuple[Any, Any]:
    """Advantages and returns of N rollout rows of T steps each.

    Arrays are NumPy arrays or torch tensors, C-contiguous, all on the CPU or all on
    one CUDA device (CUDA tensors run the CUDA kernel on torch's current stream):

    - values: float32 [N, T + 1]; values[n, t] = V(obs of step t), values[n, T] is the
      bootstrap value V(obs after the last step).
    - rewards: float32 [N, T]; reward of transition t.
    - terminals, truncations: bool or uint8 [N, T] (nonzero = set); whether transition
      t ended its episode by termination or by truncation (time limit). A terminal
      wins when both are set.
    - final_values: float32 [N, T]; V(final observation) of a truncated transition, read
      only where truncations is set (so with same-step autoreset, where values[n, t+1]
      already belongs to the next episode). Required if any truncation is set.
    - ratios: float32 [N, T]; importance ratios pi(a|s) / mu(a|s) of the actions taken.
      None means all ones.

    For each row, backwards from advantage_T = 0 (one float32 recursion per row):

        next_value_t = 0                  if terminals[t]
                     = final_values[t]    elif truncations[t]
                     = values[t + 1]      otherwise
        continues_t  = 0 if terminals[t] or truncations[t] else 1
        rho_t = min(ratio_t, rho_clip),   c_t = min(ratio_t, c_clip)
        delta_t      = rho_t * (rewards[t] + gamma * next_value_t - values[t])
        advantage_t  = delta_t + gamma * lam * c_t * continues_t * advantage_{t+1}
        return_t     = advantage_t + values[t]

    So a terminal cuts the bootstrap, a truncation bootstraps from the final
    observation's value, and neither lets the recursion run into the next episode.
    rho_t and c_t are the truncated importance weights of V-trace (Espeholt et al.
    2018) as PufferLib applies them inside GAE; with ratios of 1 and clips >= 1 this is
    plain GAE (Schulman et al. 2016).

    advantages and returns (float32 [N, T], same kind and device as values) are written
    in place when given and allocated otherwise; they must not overlap the inputs.
    gamma and lam must lie in [0, 1]; rho_clip and c_clip must be > 0 (inf: no
    clipping). num_threads caps the CPU kernel's threads (default: all cores; small
    inputs use fewer). Returns (advantages, returns).
    """
    values_info = _inspect("values", values, _FLOAT)
    if len(values_info.shape) != 2 or values_info.shape[1] < 1:
        raise ValueError(
            f"values must have shape (N, T + 1) with the bootstrap value in the last "
            f"column, got shape {values_info.shape}"
        )
    rows, length = values_info.shape[0], values_info.shape[1] - 1
    step_shape = (rows, length)

    def step_array(name, array, dtypes, writable=False):
        info = _inspect(name, array, dtypes, writable)
        if info.shape != step_shape:
            raise ValueError(
                f"{name} must have shape (N, T) = {step_shape} to match values of shape "
                f"{values_info.shape} (T + 1 columns), got {info.shape}"
            )
        if info.device != values_info.device:
            raise ValueError(
                f"{name} is on {info.device} but values is on {values_info.device}; "
                f"all arrays must be on one device"
            )
        return info

    inputs = [
        step_array("rewards", rewards, _FLOAT),
        step_array("terminals", terminals, _FLAG),
        step_array("truncations", truncations, _FLAG),
        None if final_values is None else step_array("final_values", final_values, _FLOAT),
        None if ratios is None else step_array("ratios", ratios, _FLOAT),
    ]
    if advantages is None:
        advantages = _empty_like_steps(values, step_shape)
    if returns is None:
        returns = _empty_like_steps(values, step_shape)
    outputs = [
        step_array("advantages", advantages, _FLOAT, writable=True),
        step_array("returns", returns, _FLOAT, writable=True),
    ]
    if rows * length > 0 and outputs[0].address == outputs[1].address:
        raise ValueError("advantages and returns must be different arrays")

    gamma = _check_scalar(gamma, "gamma", 0.0, 1.0)
    lam = _check_scalar(lam, "lam", 0.0, 1.0)
    rho_clip = _check_scalar(rho_clip, "rho_clip", 0.0, math.inf, low_inclusive=False)
    c_clip = _check_scalar(c_clip, "c_clip", 0.0, math.inf, low_inclusive=False)
    if num_threads is not None:
        num_threads = check_int(num_threads, "num_threads", 1)

    addresses = [
        info.address if info is not None else 0 for info in [values_info, *inputs, *outputs]
    ]
    scalars = (rows, length, gamma, lam, rho_clip, c_clip)
    if values_info.device == "cpu":
        first_bad_row = _advantage_cpu.compute(*addresses, *scalars, num_threads or 0)
        if first_bad_row >= 0:
            raise ValueError(_missing_final_values(f"row {first_bad_row} of truncations"))
    else:
        if final_values is None and rows * length > 0 and bool(truncations.any()):
            raise ValueError(_missing_final_values("truncations"))
        _run_cuda(values, addresses, scalars)
    return advantages, returns


class _ArrayInfo(NamedTuple):
    address: int
    shape: tuple
    device: str  # "cpu" for NumPy arrays and CPU tensors, else the torch device


def _inspect(name: str, array: Any, dtypes: dict, writable: bool = False) -> _ArrayInfo:
    """Checks kind, dtype and contiguity, and returns what the kernels need."""
    if isinstance(array, np.ndarray):
        if array.dtype.char not in dtypes:
            raise _dtype_error(name, dtypes, array.dtype)
        if not array.flags.c_contiguous:
            raise ValueError(
                f"{name} must be C-contiguous (the kernel reads raw rows); "
                f"use np.ascontiguousarray({name})"
            )
        if writable and not array.flags.writeable:
            raise ValueError(f"{name} is an output and must be writeable")
        return _ArrayInfo(_advantage_cpu.data_address(array), array.shape, "cpu")
    torch = sys.modules.get("torch")  # a tensor can only exist once torch is imported
    if torch is not None and isinstance(array, torch.Tensor):
        if str(array.dtype).removeprefix("torch.") not in dtypes.values():
            raise _dtype_error(name, dtypes, array.dtype)
        if not array.is_contiguous():
            raise ValueError(
                f"{name} must be contiguous (the kernel reads raw rows); "
                f"use {name}.contiguous()"
            )
        if array.device.type not in ("cpu", "cuda"):
            raise ValueError(f"{name} must be on the CPU or a CUDA device, got {array.device}")
        return _ArrayInfo(array.data_ptr(), tuple(array.shape), str(array.device))
    raise TypeError(f"{name} must be a NumPy array or a torch tensor, got {type(array).__name__}")


def _dtype_error(name: str, dtypes: dict, got: Any) -> TypeError:
    return TypeError(f"{name} must have dtype {' or '.join(dtypes.values())}, got {got}")


def _empty_like_steps(values: Any, shape: tuple) -> Any:
    if isinstance(values, np.ndarray):
        return np.empty(shape, dtype=np.float32)
    import torch

    return torch.empty(shape, dtype=torch.float32, device=values.device)


def _check_scalar(value, name, low, high, low_inclusive=True) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r}") from None
    too_low = value < low if low_inclusive else value <= low
    if math.isnan(value) or too_low or value > high:
        interval = f"{'[' if low_inclusive else '('}{low}, {high}]"
        raise ValueError(f"{name} must lie in {interval}, got {value}")
    return value


def _missing_final_values(where: str) -> str:
    return (
        f"{where} has a truncation but final_values is None: pass final_values, the "
        f"values of the final observations, read where truncations is set"
    )


@functools.cache
def _cuda_library() -> ctypes.CDLL:
    """Loads the CUDA kernel library on first use, so that importing puffercore never
    needs it. It is linked against the static CUDA runtime, so loading needs no CUDA
    libraries at all; the NVIDIA driver is needed only to run it."""
    path = os.path.join(os.path.dirname(os.path.abspath(_advantage_cpu.__file__)), CUDA_LIBRARY)
    if not os.path.isfile(path):
        raise RuntimeError(
            f"CUDA tensors need puffercore's CUDA advantage kernel ({CUDA_LIBRARY}), which "
            f"this installation lacks: it is built only when a CUDA compiler (nvcc) is "
            f"found at install time. Reinstall puffercore with the CUDA toolkit on PATH, "
            f"or pass CPU arrays."
        )
    try:
        library = ctypes.CDLL(path)
    except OSError as error:
        raise RuntimeError(f"cannot load the CUDA advantage kernel {path}: {error}") from error
    pointer, size, real = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
    library.puffercore_advantage_cuda.argtypes = (
        [pointer] * 8 + [size, size] + [real] * 4 + [ctypes.c_int, pointer]
    )
    library.puffercore_advantage_cuda.restype = ctypes.c_int
    library.puffercore_cuda_error_string.argtypes = [ctypes.c_int]
    library.puffercore_cuda_error_string.restype = ctypes.c_char_p
    return library


def _run_cuda(values: Any, addresses: list, scalars: tuple) -> None:
    import torch

    library = _cuda_library()
    device = values.device.index if values.device.index is not None else torch.cuda.current_device()
    stream = torch.cuda.current_stream(device).cuda_stream
    error = library.puffercore_advantage_cuda(*addresses, *scalars, device, stream)
    if error:
        message = library.puffercore_cuda_error_string(error).decode()
        raise RuntimeError(f"CUDA advantage kernel failed: {message} (cudaError {error})")
