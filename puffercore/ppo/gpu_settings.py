"""What a run on a GPU was given, said at its start: the GPU preset's settings in force
(config.GPU_PRESETS, which `PPOConfig.for_env` applies for a cuda device), and, where
the run is too small to keep a GPU busy, that the CPU is likely faster and how to run
there.

    for line in settings_note("cartpole", config, parameters=2434, workers=16):
        print(line)

A GPU step costs a few kernel launches whatever its size, so a GPU pays where each step
holds enough arithmetic: the envs of one collection step times the policy's parameters
(each row's forward is about one multiply-add a parameter). Below `GPU_MIN_WORK` the
launches dominate: cartpole's CPU preset, 128 envs of a 2.4 k-parameter net (0.3 M),
ran 12x slower on an H200 than on its 16-core CPU, where snake's preset (512 envs, 64 k
parameters: 33 M) and cartpole's GPU preset (4096 envs: 10 M) ran faster on the GPU.
"""

from __future__ import annotations

import dataclasses

import torch

from puffercore.flags import setting_name
from puffercore.logger import format_number
from puffercore.ppo.config import GPU_PRESETS, PPOConfig, preset_for

GPU_MIN_WORK = 1 << 22  # envs x parameters per collection step from which a GPU run is worth it

_FIELDS = {field.name: field for field in dataclasses.fields(PPOConfig)}


def _shown(value) -> str:
    return format_number(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def settings_note(env, config: PPOConfig, parameters: int, workers: int | None) -> list[str]:
    """The lines a run of `config` on `env` (the name a trainer resolved), with a policy
    of `parameters` numbers and `workers` env workers (its vector's; None: stepped in
    the main process), prints at its start: none
    off cuda; the GPU preset's fields in force (with the CPU preset's values they
    replace) or that the env has none; and, for too little work a step, the CPU note."""
    if torch.device(config.device).type != "cuda":
        return []
    gpu = GPU_PRESETS.get(env, {}) if isinstance(env, str) else {}
    cpu = {**dataclasses.asdict(PPOConfig()), **preset_for(env)}
    if gpu:
        kept = [name for name, value in gpu.items() if getattr(config, name) == value != cpu[name]]
        changed = ", ".join(f"{setting_name(_FIELDS[name])} {_shown(gpu[name])} (CPU preset {_shown(cpu[name])})"
                            for name in kept)
        given = [setting_name(_FIELDS[name]) for name, value in gpu.items() if getattr(config, name) != value]
        lines = [f"settings for cuda: {env}'s GPU preset: {changed or 'none of its settings'}"
                 + (f"; yours: {', '.join(given)}" if given else "")
                 + f"; {config.num_envs} envs, {config.backend} backend, {workers or 1} worker(s)"]
    else:
        lines = [f"settings for cuda: {env if isinstance(env, str) else 'this env'} has no GPU preset; its settings "
                 f"are the CPU's"]
    work = config.num_envs * parameters
    if work < GPU_MIN_WORK:
        lines.append(f"note: the CPU is likely faster for this run: each step runs a {format_number(parameters)}-"
                     f"parameter net on {config.num_envs} envs, too little arithmetic to repay a GPU's kernel "
                     f"launches (cartpole's CPU preset ran 12x slower on an H200 than on its 16-core CPU); "
                     f"--device cpu trains on the CPU, or give more envs (--vec.num-envs)")
    return lines

