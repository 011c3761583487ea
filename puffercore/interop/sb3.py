"""A puffercore vector env as a stable-baselines3 `VecEnv` (imports stable-baselines3).

    venv = SB3VecEnv(puffercore.vector.make(lambda: gymnasium.make("CartPole-v1"), 8, backend="processes"))
    model = stable_baselines3.PPO("MlpPolicy", venv).learn(100_000)

As SB3's own vector envs: `dones = terminations | truncations`; an env that ended has
`infos[i]["terminal_observation"]` (its last observation; the returned one is already
the next episode's first) and `infos[i]["TimeLimit.truncated"]`; every episode the
vector's info reports gets an `infos[i]["episode"] = {"r", "l", "t"}` as SB3's Monitor
writes them, so SB3 logs returns without a Monitor wrapper. Those are the numbers
puffercore's trainer logs: the env's own `episode_return` and `episode_length` where it
reports them (Atari: a whole game in raw score, not one life's clipped rewards), and
since an info holds the means of the episodes that ended in a step, each of those
episodes gets the step's means (rows that ended first; "t" is seconds since this adapter
was made, as the Monitor's). An env that reports no episodes (a PufferEnv without
episode logs) gets none here either. Rows are the envs (one per agent of a multi-agent
env). Sub-envs may live in worker processes, so `get_attr`/`set_attr`/`env_method`
reach the puffercore vector env itself (the same value for every index).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from puffercore.interop.structures import adapted, copy_structure, row_of, unflatten


class SB3VecEnv(VecEnv):
    def __init__(self, vec):
        self.tree, observation_space = adapted(vec, "SB3VecEnv")
        self.vec = vec
        super().__init__(vec.num_agents, observation_space, vec.single_action_space)
        self._seed: int | None = None
        self._actions: np.ndarray | None = None
        self._start = time.perf_counter()

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seeds the next reset: sub-env i gets a seed derived from (seed, i)."""
        self._seed = seed
        return [seed] * self.num_envs

    def reset(self):
        observations, _ = self.vec.reset(seed=self._seed)
        self._seed = None  # used once, as SB3's vector envs do
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return self._observations(observations)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self):
        if self._actions is None:
            raise RuntimeError("step_wait() needs a step_async(actions) first")
        actions, self._actions = self._actions, None
        observations, rewards, terminals, truncations, info = self.vec.step(actions)
        dones = terminals | truncations
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        ended = np.flatnonzero(dones)
        if ended.size:
            finals = self._observations(self.vec.final_observations)
            for row in ended:
                infos[row] = {"terminal_observation": row_of(finals, row),
                              "TimeLimit.truncated": bool(truncations[row] and not terminals[row])}
        self._report_episodes(info, dones, infos)
        return (copy_structure(self._observations(observations)), rewards.astype(np.float32), dones.copy(), infos)

    def _report_episodes(self, info: dict, dones: np.ndarray, infos: list[dict[str, Any]]) -> None:
        """The `episode` infos of the episodes `info` reports, each with their means."""
        count = round(info.get("episodes", 0))
        if not count or "episode_return" not in info:
            return
        episode = {"r": float(info["episode_return"]), "l": float(info.get("episode_length", 0.0)),
                   "t": round(time.perf_counter() - self._start, 6)}
        # Episodes beyond the rows that ended (an env that ends one without a done row) go on other rows.
        rows = [*np.flatnonzero(dones), *np.flatnonzero(~dones)][:count]
        for row in rows:
            infos[row]["episode"] = dict(episode)

    def close(self) -> None:
        self.vec.close()

    def render(self, mode: str | None = None):
        return self.vec.render()

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        return [getattr(self.vec, attr_name)] * len(self._get_indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        setattr(self.vec, attr_name, value)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list[Any]:
        result = getattr(self.vec, method_name)(*method_args, **method_kwargs)
        return [result] * len(self._get_indices(indices))

    def env_is_wrapped(self, wrapper_class: type, indices=None) -> list[bool]:
        # Episode infos are what SB3's Monitor adds; no gymnasium wrapper is applied.
        return [wrapper_class.__name__ == "Monitor"] * len(self._get_indices(indices))

    def _observations(self, rows: np.ndarray):
        return unflatten(self.tree, rows)

