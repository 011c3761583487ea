"""What machine this is, in the terms every result record and bug report uses.

    machine()                 # {"cpu": ..., "isa": "AVX2", "cores": 2, "gpu": ""}
    machine_label(machine())  # 'AMD EPYC (AVX2), 2 cores'
"""

from __future__ import annotations

import os
import platform

# The instruction-set classes puffercore's native paths and torch's kernels differ by,
# best first: /proc/cpuinfo flags each class needs.
_X86_CLASSES = (("AVX-512 + AMX", ("avx512f", "amx_tile")), ("AVX-512", ("avx512f",)), ("AVX2", ("avx2",)))


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
            for line in file:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux names them (empty where unknown)."""
    info = _cpuinfo()
    return frozenset((info.get("flags") or info.get("Features") or "").split())


def isa() -> str:
    """The CPU's instruction-set class: 'AVX-512 + AMX', 'AVX-512', 'AVX2', 'NEON' or the
    architecture's name."""
    flags = cpu_flags()
    arch = platform.machine().lower()
    if arch in ("x86_64", "amd64"):
        for name, needs in _X86_CLASSES:
            if all(flag in flags for flag in needs):
                return name
        return "x86-64 (no AVX2)"
    if arch in ("aarch64", "arm64"):
        return "NEON"  # Advanced SIMD is part of every AArch64 CPU
    return arch


def cpu_model() -> str:
    info = _cpuinfo()
    return info.get("model name") or info.get("Model") or platform.processor() or platform.machine()


def cores() -> int:
    """The cores this process may run on (its affinity mask, as a scheduler sets it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def gpu() -> str:
    """The first CUDA device's name, or '' where torch sees none."""
    try:
        import torch
    except ImportError:
        return ""
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else ""


def machine() -> dict:
    """The machine a measurement ran on: CPU model, ISA class, cores, GPU ('' for none)."""
    return {"cpu": cpu_model(), "isa": isa(), "cores": cores(), "gpu": gpu()}


def machine_label(machine: dict) -> str:
    """One line naming a machine() record: 'AMD EPYC (AVX2), 2 cores[, NVIDIA H100]'."""
    label = f"{machine['cpu']} ({machine['isa']}), {machine['cores']} cores"
    return label + (f", {machine['gpu']}" if machine.get("gpu") else "")
