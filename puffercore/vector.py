"""Vector envs: many sub-envs stepped as one PufferEnv over one set of buffers.

    vec = puffercore.vector.make(env_creator, num_envs, backend="serial", seed=0)
    obs, info = vec.reset()                          # synchronous (batch_size == num_envs)
    obs, rew, term, trunc, info = vec.step(actions)
    vec.async_reset(); obs, rew, term, trunc, info, env_ids, masks = vec.recv()
    vec.send(actions)                                # actions for the rows recv returned

`env_creator(**env_kwargs)` returns a PufferEnv (called again with `buffers=` so it
writes straight into the vector's buffers), a gymnasium Env (wrapped in GymnasiumEnv)
or a PettingZoo ParallelEnv (wrapped in PettingZooEnv). Every creator call is one
"env" of the vector: `env_ids` and `batch_size` count them, and its rows are
contiguous. (`num_envs` of the vector, as of any PufferEnv, counts independent
sub-envs, which differs when a creator returns a multi-env PufferEnv.)

Staggered batching: with `batch_size = N < num_envs = M` (N divides M, so every batch is
a contiguous block of rows and results stay zero-copy views), `recv` returns the rows of
the next N envs in round-robin order; `send` steps exactly the envs of the last `recv`.
Results are views into the vector's buffers, valid until the next `send`/`step`.

Backends register in `BACKENDS`; each takes the arguments of `make` (minus `backend`).
"""

from __future__ import annotations

import collections
import functools
from typing import Any, Callable

import gymnasium
import numpy as np

from puffercore.emulation import Adapter, GymnasiumEnv, PettingZooEnv
from puffercore.env import PufferEnv, check_actions, check_seed


def make(
    env_creator: Callable[..., Any],
    num_envs: int,
    backend: str = "serial",
    num_workers: int | None = None,
    batch_size: int | None = None,
    seed: int = 0,
    **env_kwargs,
) -> PufferEnv:
    """A vector of `num_envs` envs from `env_creator(**env_kwargs)` on `backend`.
    `seed` seeds the first `reset()`/`async_reset()` that is given no seed."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {sorted(BACKENDS)}, got {backend!r}")
    return BACKENDS[backend](
        env_creator, num_envs, num_workers=num_workers, batch_size=batch_size, seed=seed, **env_kwargs
    )


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


def _check_count(value: Any, name: str) -> int:
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


class Serial(PufferEnv):
    """The reference backend: every env stepped in turn on the calling thread. Given
    `buffers` (rows of a bigger vector), it is itself a sub-env that vectors can nest."""

    def __init__(self, env_creator, num_envs, num_workers=None, batch_size=None, seed=0, buffers=None, **env_kwargs):
        if not callable(env_creator):
            raise TypeError(f"env_creator must be callable, got {env_creator!r}")
        num_envs = _check_count(num_envs, "num_envs")
        batch_size = num_envs if batch_size is None else _check_count(batch_size, "batch_size")
        if num_envs % batch_size:
            raise ValueError(f"batch_size must divide num_envs={num_envs}, got {batch_size}")
        if num_workers not in (None, 1):
            raise ValueError(f"num_workers must be None or 1 for the serial backend, got {num_workers!r}")
        self._default_seed = check_seed(seed)
        self.batch_size = batch_size
        self._closed = False
        self.envs: list[PufferEnv] = []
        try:
            self._create_envs(env_creator, num_envs, buffers, env_kwargs)
        except BaseException:
            self.close()
            raise
        # Batch b is envs [b*N, (b+1)*N): rows [b*N*k, (b+1)*N*k) for k rows per env.
        rows_per_batch = batch_size * self.envs[0].num_agents
        self._batch_rows = [slice(b * rows_per_batch, (b + 1) * rows_per_batch) for b in range(num_envs // batch_size)]
        self._batch_env_ids = [np.arange(b * batch_size, (b + 1) * batch_size) for b in range(num_envs // batch_size)]
        self._ready: collections.deque[int] = collections.deque()  # batches recv may return
        self._batch_infos: dict[int, list[dict]] = {}
        self._awaiting_actions: int | None = None  # batch returned by the last recv
        self._has_reset = False

    def _create_envs(self, env_creator, num_envs, buffers, env_kwargs) -> None:
        first = env_creator(**env_kwargs)
        if isinstance(first, PufferEnv):
            # The probe tells the spaces and rows; the envs are created again on views of
            # the shared buffers, since a PufferEnv may bind its buffers at construction.
            def create(buffers):
                try:
                    return env_creator(buffers=buffers, **env_kwargs)
                except TypeError as error:
                    if "buffers" in str(error):
                        raise TypeError("env_creator returns a PufferEnv, so it must accept buffers=") from error
                    raise

            probe, pending = first, []
            probe.close()
        else:
            wrapper = _wrapper_for(first)
            probe = wrapper(first)
            pending = [first]

            def create(buffers):
                return wrapper(pending.pop() if pending else env_creator(**env_kwargs), buffers=buffers)

        self.single_observation_space = probe.single_observation_space
        self.single_action_space = probe.single_action_space
        self.observation_tree = getattr(probe, "observation_tree", None)
        self.action_tree = getattr(probe, "action_tree", None)
        self.render_mode = probe.render_mode
        self.metadata = probe.metadata
        rows, sub_envs = probe.num_agents, probe.num_envs
        self.num_agents, self.num_envs = num_envs * rows, num_envs * sub_envs
        self._init_buffers(buffers)
        self._sub_envs_per_env = sub_envs
        for index in range(num_envs):
            self.envs.append(create(self.buffers.rows(index * rows, (index + 1) * rows)))
        # send() validates the whole batch, so the adapters this vector made skip their
        # own check; a PufferEnv from the creator gets its actions through step().
        self._steppers = [
            env.step_written if isinstance(env, Adapter) else functools.partial(env.step, env.actions)
            for env in self.envs
        ]

    def async_reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self._check_open("async_reset")
        seed = check_seed(seed)
        if seed is None and not self._has_reset:
            seed = self._default_seed
        self._ready = collections.deque(range(len(self._batch_rows)))
        self._batch_infos = {batch: [] for batch in self._ready}
        for index, env in enumerate(self.envs):
            env.env_index_base = self.env_index_base + index * self._sub_envs_per_env
            self._batch_infos[index // self.batch_size].append(env.reset(seed=seed, options=options)[1])
        self._awaiting_actions = None
        self._has_reset = True

    def send(self, actions: Any) -> None:
        self._check_stepping("send")
        if self._awaiting_actions is None:
            raise RuntimeError("send() needs a recv() first: send the actions for the rows the last recv() returned")
        batch = self._awaiting_actions
        rows = self._batch_rows[batch]
        np.copyto(self.actions[rows], check_actions(actions, self.single_action_space, rows.stop - rows.start))
        self._awaiting_actions = None
        first_env = batch * self.batch_size
        for step in self._steppers[first_env : first_env + self.batch_size]:
            self._batch_infos[batch].append(step()[4])
        self._ready.append(batch)

    def recv(self):
        self._check_open("recv")
        if not self._ready:
            raise RuntimeError("recv() called with nothing pending; call async_reset() or send() first")
        batch = self._ready.popleft()
        self._awaiting_actions = batch
        rows = self._batch_rows[batch]
        info = merge_infos(self._batch_infos[batch])
        self._batch_infos[batch] = []
        return (
            self.observations[rows],
            self.rewards[rows],
            self.terminals[rows],
            self.truncations[rows],
            info,
            self._batch_env_ids[batch],
            self.masks[rows],
        )

    def reset(self, seed: int | None = None, options: dict | None = None):
        self._check_synchronous("reset")
        self.async_reset(seed, options)
        observations, _, _, _, info, _, _ = self.recv()
        return observations, info

    def step(self, actions):
        self._check_synchronous("step")
        self._check_stepping("step")
        self.send(actions)
        return self.recv()[:5]

    def _check_synchronous(self, method: str) -> None:
        if self.batch_size != len(self.envs):
            raise RuntimeError(
                f"{method}() needs batch_size == num_envs; with batch_size={self.batch_size} use "
                "async_reset()/send()/recv()"
            )

    def _check_open(self, method: str) -> None:
        if self._closed:
            raise RuntimeError(f"{method}() called on a closed vector env")

    def _check_stepping(self, method: str) -> None:
        self._check_open(method)
        if not self._has_reset:
            raise RuntimeError(f"{method}() called before reset(); call reset() or async_reset() first")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for env in self.envs:
                env.close()


BACKENDS: dict[str, type[PufferEnv]] = {"serial": Serial}
