"""What machine this is and what puffercore runs on it, in the terms every result record
and bug report uses (`puffercore info` prints `report()`).

    machine()                 # {"cpu": ..., "isa": "AVX2", "cores": 2, "gpu": ""}
    machine_label(machine())  # 'AMD EPYC (AVX2), 2 cores'
    report()                  # versions, CPU, native paths and the presets' choices, as a dict
    print(format_report(report()))

AVX2 mode: PUFFERCORE_ISA=avx2 in the environment runs an x86 CPU with AVX-512 or AMX as
an AVX2 one, to measure and test the paths other CPUs take. `import puffercore` then sets
ATEN_CPU_CAPABILITY=avx2 and ONEDNN_MAX_CPU_ISA=AVX2 (torch reads them at its first CPU
op, so import puffercore before torch runs anything), puffercore's MLP kernels run 8
lanes (native/ppo/mlp.c reads the same variable) and native_bf16() is False; machine()
names the mode: "AVX2 (forced on AVX-512 + AMX)".
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys

ISA_VARIABLE = "PUFFERCORE_ISA"
# What each forced mode sets for torch (ATen's kernels) and oneDNN (its convolutions,
# matmuls and bf16 paths).
_FORCED_ENV = {"avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}}
# The instruction-set classes puffercore's native paths and torch's kernels differ by,
# best first: /proc/cpuinfo flags each class needs.
_X86_CLASSES = (("AVX-512 + AMX", ("avx512f", "amx_tile")), ("AVX-512", ("avx512f",)), ("AVX2", ("avx2",)))
# The flags `puffercore info` lists: what torch, oneDNN and puffercore's kernels pick by.
_X86_FEATURES = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")
_ARM_FEATURES = ("asimd", "sve", "bf16")  # asimd: NEON
_PACKAGES = ("torch", "numpy", "gymnasium", "cython", "numba")
_torch_ran_first = False  # torch had picked its kernels before the switch could apply


def _cpuinfo(all_processors: bool = False) -> list[dict[str, str]]:
    """/proc/cpuinfo's processors as dicts of their fields (only the first unless
    `all_processors`; [] where there is no such file)."""
    processors: list[dict[str, str]] = [{}]
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
            for line in file:
                if not line.strip():
                    if not all_processors:
                        break
                    processors.append({})
                    continue
                key, _, value = line.partition(":")
                processors[-1][key.strip()] = value.strip()
    except OSError:
        pass
    return [fields for fields in processors if fields]


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux names them (empty where unknown)."""
    info = (_cpuinfo() or [{}])[0]
    return frozenset((info.get("flags") or info.get("Features") or "").split())


def _x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def cpu_isa() -> str:
    """The CPU's own instruction-set class: 'AVX-512 + AMX', 'AVX-512', 'AVX2', 'NEON' or
    the architecture's name."""
    flags = cpu_flags()
    arch = platform.machine().lower()
    if _x86():
        for name, needs in _X86_CLASSES:
            if all(flag in flags for flag in needs):
                return name
        return "x86-64 (no AVX2)"
    if arch in ("aarch64", "arm64"):
        return "NEON"  # Advanced SIMD is part of every AArch64 CPU
    return arch


def forced_isa() -> str | None:
    """'avx2' where PUFFERCORE_ISA forces the AVX2 paths, None where it is unset or empty;
    ValueError for a value this machine cannot apply."""
    value = os.environ.get(ISA_VARIABLE, "")
    if not value:
        return None
    if value not in _FORCED_ENV:
        raise ValueError(f"{ISA_VARIABLE}={value!r}: expected avx2 (or unset, for the CPU's own instruction set)")
    if not _x86() or cpu_isa() == "x86-64 (no AVX2)":
        raise ValueError(f"{ISA_VARIABLE}={value} needs an x86-64 CPU with AVX2; this one is {cpu_isa()}")
    if _torch_ran_first:
        raise ValueError(f"{ISA_VARIABLE}={value}: torch chose its kernels before puffercore was imported; import "
                         f"puffercore first, or also set {' '.join(f'{k}={v}' for k, v in _FORCED_ENV[value].items())}")
    return value


def apply_forced_isa() -> None:
    """Sets torch's and oneDNN's variables for PUFFERCORE_ISA (`import puffercore` calls
    this). A value forced_isa() refuses changes nothing here: it raises where it is asked."""
    global _torch_ran_first
    try:
        forced = forced_isa()
    except ValueError:
        return
    if forced is None:
        return
    os.environ.update(_FORCED_ENV[forced])
    torch = sys.modules.get("torch")
    # torch reads ATEN_CPU_CAPABILITY at its first CPU op: one already run keeps its kernels.
    _torch_ran_first = torch is not None and torch.backends.cpu.get_cpu_capability() != forced.upper()


def isa() -> str:
    """The instruction-set class puffercore and torch run: cpu_isa(), or the forced mode
    and the CPU it runs on ('AVX2 (forced on AVX-512 + AMX)')."""
    own, forced = cpu_isa(), forced_isa()
    if forced is None or own == forced.upper():
        return own
    return f"{forced.upper()} (forced on {own})"


def cpu_model() -> str:
    info = (_cpuinfo() or [{}])[0]
    return info.get("model name") or info.get("Model") or platform.processor() or platform.machine()


def cores() -> int:
    """The cores this process may run on (its affinity mask, as a scheduler sets it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def physical_cores() -> int | None:
    """Distinct (package, core) pairs in /proc/cpuinfo (None where it does not say)."""
    pairs = {(fields.get("physical id"), fields.get("core id")) for fields in _cpuinfo(all_processors=True)}
    return None if not pairs or (None, None) in pairs else len(pairs)


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


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    """puffercore's, Python's, the OS's and the installed packages' versions (None: not
    installed), torch's CUDA ('' for a CPU build)."""
    found = {"puffercore": _version("puffercore"), "python": f"{platform.python_version()} "
             f"({platform.python_implementation()})", "os": platform.platform()}
    found.update({name: _version(name) for name in _PACKAGES})
    if found["torch"] is not None:
        import torch

        found["torch_cuda"] = torch.version.cuda or ""
    return found


def cpu() -> dict:
    """The CPU: machine()'s fields, the architecture, the ISA features that pick kernels,
    cores and threads, and what torch's kernels run."""
    flags = cpu_flags()
    features = _X86_FEATURES if _x86() else _ARM_FEATURES
    found = {**machine(), "arch": platform.machine(), "features": {name: name in flags for name in features},
             "physical_cores": physical_cores(), "logical_cpus": os.cpu_count()}
    try:
        import torch
    except ImportError:
        return found
    return {**found, "torch_threads": torch.get_num_threads(), "torch_cpu_capability":
            torch.backends.cpu.get_cpu_capability(), "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "")}


def _cuda_gae() -> str:
    """The CUDA GAE kernel: whether it was built, loads, and has a device to run on."""
    from puffercore import advantage

    try:
        advantage._cuda_library()
    except RuntimeError as error:
        return "not built (no nvcc at install)" if "lacks" in str(error) else f"built, does not load: {error}"
    import torch

    return f"built, loads, device {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else \
        "built, loads, no CUDA device"


def native_paths() -> dict:
    """Which of puffercore's native paths this process runs."""
    from puffercore.precision import native_bf16

    try:
        from puffercore.ppo._native import mlp
    except ImportError as error:
        lanes: int | str = f"unavailable ({error})"
    else:
        lanes = mlp.lanes()
    return {"mlp_lanes": lanes, "native_bf16": native_bf16(), "cuda_gae": _cuda_gae()}


def preset_choices() -> dict:
    """What the presets decide from this CPU: the PPO presets' precision "auto" (Snake,
    Atari), and each AlphaZero preset's inference and training precision with its
    threads, and what they are with --device cuda."""
    import torch

    from puffercore.alphazero.config import PRESETS as GAME_PRESETS, AlphaZeroConfig, cuda_settings
    from puffercore.alphazero.network import build_network
    from puffercore.ppo.config import ATARI_PRESET, PRESETS
    from puffercore.ppo.plan import precision_choice
    from puffercore.precision import resolve_precision

    ppo = {}
    for name, preset in {**PRESETS, "atari": ATARI_PRESET}.items():
        if "precision" in preset:
            choice = precision_choice(preset["precision"], torch.device("cpu"))
            ppo[name] = {"precision": preset["precision"], "chosen": choice.name, "reason": choice.reason}
    alphazero = {}
    for game in GAME_PRESETS:
        config = AlphaZeroConfig.for_game(game)
        convolutional = build_network(config).convolutional
        inference = resolve_precision(config.inference_precision, convolutional=convolutional)
        train = resolve_precision(config.train_precision, convolutional=True)  # bf16 for MLPs too (its trainer)
        on_cuda = {"inference_precision": resolve_precision(config.inference_precision, "cuda", convolutional=convolutional),
                   "train_precision": resolve_precision(config.train_precision, "cuda", convolutional=True)}
        alphazero[game] = {"inference_precision": str(inference).removeprefix("torch."),
                           "train_precision": str(train).removeprefix("torch."),
                           "self_play_threads": config.self_play_threads, "torch_threads": config.torch_threads,
                           "cuda": {**{name: str(dtype).removeprefix("torch.") for name, dtype in on_cuda.items()},
                                    "self_play_threads": cuda_settings(game).get("self_play_threads",
                                                                                 config.self_play_threads)}}
    return {"ppo": ppo, "alphazero": alphazero}


def report() -> dict:
    """Everything `puffercore info` prints."""
    return {"versions": versions(), "cpu": cpu(), "native": native_paths(), "presets": preset_choices()}


def format_report(report: dict) -> str:
    """report() as plain text for a bug report."""
    versions, cpu, native, presets = report["versions"], report["cpu"], report["native"], report["presets"]
    cuda = versions.get("torch_cuda")
    lines = [f"puffercore  {versions['puffercore'] or 'not installed'}",
             f"python      {versions['python']}, {versions['os']}",
             "torch       " + (f"{versions['torch']} (CUDA {cuda or 'none'})" if versions["torch"] else "not installed"),
             "packages    " + ", ".join(f"{name} {versions[name] or 'not installed'}" for name in _PACKAGES[1:]),
             f"CPU         {cpu['cpu']} ({cpu['arch']})",
             f"ISA         {cpu['isa']}; " + " ".join(f"{name}:{'yes' if has else 'no'}"
                                                   for name, has in cpu["features"].items()),
             f"cores       {cpu['cores']} usable, {cpu['physical_cores'] or '?'} physical, "
             f"{cpu['logical_cpus']} logical" + (f"; torch threads {cpu['torch_threads']}" if "torch_threads" in cpu
                                                 else ""),
             f"GPU         {cpu['gpu'] or 'none'}"]
    if "torch_cpu_capability" in cpu:
        lines.append(f"torch CPU   capability {cpu['torch_cpu_capability']}, oneDNN max ISA "
                     f"{cpu['onednn_max_cpu_isa'] or 'its own choice'}")
    lanes = native["mlp_lanes"]
    lines += ["native paths:",
              f"  MLP kernels        {lanes} lanes" if isinstance(lanes, int) else f"  MLP kernels        {lanes}",
              f"  bf16               {'native (AMX or AVX512-BF16)' if native['native_bf16'] else 'not native'}",
              f"  CUDA GAE kernel    {native['cuda_gae']}",
              "preset choices on this machine:"]
    for name, choice in presets["ppo"].items():
        lines.append(f"  {'PPO ' + name:<21}precision {choice['precision']} -> {choice['chosen']} ({choice['reason']})")
    for game, choice in presets["alphazero"].items():
        lines.append(f"  {'AlphaZero ' + game:<21}inference {choice['inference_precision']}, train "
                     f"{choice['train_precision']}; threads: self-play {choice['self_play_threads']}, torch "
                     f"{choice['torch_threads']}; --device cuda: inference {choice['cuda']['inference_precision']}, "
                     f"train {choice['cuda']['train_precision']}, self-play threads {choice['cuda']['self_play_threads']}")
    return "\n".join(lines)
