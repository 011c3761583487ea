"""Pieces every vector backend shares: building sub-envs from a user's creator,
argument checks, and merging infos."""

from __future__ import annotations

import functools
import os
from typing import Any, Callable

import gymnasium
import numpy as np

from puffercore.emulation import Adapter, GymnasiumEnv, PettingZooEnv
from puffercore.env import Buffers, PufferEnv


def merge_infos(infos: list[dict]) -> dict[str, float]:
    """Episode-weighted means of sub-env infos (each a dict of means plus `episodes`)."""
    sums: dict[str, float] = {}
    weights: dict[str, float] = {}
    for info in infos:
        episodes = info.get("episodes", 0.0)
        for key, value in info.items():
            if key != "episodes":
                sums[key] = sums.get(key, 0.0) + value * episodes
                weights[key] = weights.get(key, 0.0) + episodes
    merged = {key: total / weights[key] for key, total in sums.items() if weights[key]}
    episodes = sum(info.get("episodes", 0.0) for info in infos)
    if episodes:
        merged["episodes"] = episodes
    return merged


def check_count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def _wrapper_for(env: Any) -> Callable[..., PufferEnv]:
    """How to turn what a creator returned into a PufferEnv writing into given buffers."""
    if isinstance(env, gymnasium.Env):
        return GymnasiumEnv
    try:
        from pettingzoo import ParallelEnv
    except ImportError:  # PettingZoo is optional
        ParallelEnv = ()
    if isinstance(env, ParallelEnv):
        return PettingZooEnv
    raise TypeError(
        "env_creator must return a puffercore PufferEnv, a gymnasium.Env or a PettingZoo ParallelEnv, "
        f"got {type(env).__name__}"
    )


class EnvFactory:
    """Builds the envs of a vector from a user's `env_creator(**env_kwargs)`: each call
    returns a PufferEnv writing into the buffers it is given. A creator that returns a
    PufferEnv must accept `buffers=`; a gymnasium Env or PettingZoo ParallelEnv is wrapped
    in its adapter. Picklable when the creator is, so worker processes build their own.

    `probe` is one env built on its own buffers, which tells the spaces and row counts;
    the caller closes it."""

    def __init__(self, env_creator: Callable[..., Any], env_kwargs: dict):
        if not callable(env_creator):
            raise TypeError(f"env_creator must be callable, got {env_creator!r}")
        self.env_creator, self.env_kwargs = env_creator, env_kwargs
        first = env_creator(**env_kwargs)
        self.wrapper = None if isinstance(first, PufferEnv) else _wrapper_for(first)
        self.probe = first if self.wrapper is None else self.wrapper(first)

    def __call__(self, buffers: Buffers | None = None) -> PufferEnv:
        if self.wrapper is not None:
            return self.wrapper(self.env_creator(**self.env_kwargs), buffers=buffers)
        try:
            return self.env_creator(buffers=buffers, **self.env_kwargs)
        except TypeError as error:
            if "buffers" in str(error):
                raise TypeError("env_creator returns a PufferEnv, so it must accept buffers=") from error
            raise

    def __getstate__(self):
        return {**self.__dict__, "probe": None}


def stepper(env: PufferEnv) -> Callable[[], tuple]:
    """Step `env` on the actions already in its buffer. The vector validated the whole
    batch, so adapters skip their own check; other PufferEnvs get them through step()."""
    if isinstance(env, Adapter):
        return env.step_written
    return functools.partial(env.step, env.actions)


def default_workers(num_envs: int) -> int:
    """The most workers, up to one per core, that split `num_envs` evenly."""
    cores = os.cpu_count() or 1
    return max(w for w in range(1, min(cores, num_envs) + 1) if num_envs % w == 0)
