"""Precisions of the networks puffercore runs: the names every config takes and what
"auto" means on this machine.

    dtype = resolve_precision("auto", "cpu", convolutional=True)   # bf16 where the CPU computes it natively

"auto" is bfloat16 for convolutional networks on CPUs with native bf16 arithmetic (AMX
or AVX512-BF16, where oneDNN runs bf16 convolutions several times faster than float32)
and float32 elsewhere: an MLP's small matmuls pay more for the casts than they gain
(`bench/bench_inference.py`). On a CUDA device "auto" is bfloat16 for every network:
tensor cores take it, and the casts are a kernel each, not a CPU's conversion pass.
"float32" and "bfloat16" force one. bf16 keeps 8 bits of
mantissa: policies and values move by about 1e-3 (`bench/bench_inference.py` prints the
error).
"""

from __future__ import annotations

import torch

from puffercore.info import forced_isa

PRECISIONS = ("auto", "float32", "bfloat16")


def native_bf16() -> bool:
    """Does this CPU compute bfloat16 natively (AMX tiles or AVX512-BF16)? Not in AVX2 mode
    (PUFFERCORE_ISA=avx2, puffercore.info), which keeps oneDNN off both."""
    if forced_isa():
        return False
    cpu = getattr(torch, "cpu", None)
    checks = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    return any(getattr(cpu, name, lambda: False)() for name in checks)


def resolve_precision(precision: str, device: torch.device | str = "cpu", *, convolutional: bool) -> torch.dtype:
    """The dtype of `precision` ("auto": bf16 on a CUDA device, and where the CPU
    computes it natively for convolutional networks; see the module docstring)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "auto":
        if torch.device(device).type == "cuda":
            return torch.bfloat16
        native = torch.device(device).type == "cpu" and native_bf16()
        return torch.bfloat16 if native and convolutional else torch.float32
    return torch.bfloat16 if precision == "bfloat16" else torch.float32
