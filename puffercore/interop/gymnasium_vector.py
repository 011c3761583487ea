"""A puffercore vector env as a `gymnasium.vector.VectorEnv` (same-step autoreset).

    envs = GymnasiumVectorEnv(puffercore.vector.make(CartPole, 64, backend="threads", seed=0))
    obs, infos = envs.reset(seed=1)
    obs, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())
    if "episode" in infos:    # CleanRL's loop: the statistics of the episodes that ended
        returns = infos["episode"]["r"][infos["_episode"]]

Rows are the gymnasium envs (`num_envs` = the puffercore vector's rows, one per agent of
a multi-agent env). `metadata["autoreset_mode"]` is SAME_STEP, puffercore's own
semantics: an env that ends resets within the step; its last observation is in
`infos["final_obs"]` (an object array, `infos["_final_obs"]` the mask), as gymnasium's
SyncVectorEnv delivers it in that mode. Episode statistics come as gymnasium's
RecordEpisodeStatistics reports them, with no wrapper: `infos["episode"]` holds "r" (the
return: the sum of the rewards this env returned), "l" (the length in steps) and "t"
(seconds since the episode began) for every row, nonzero where an episode ended, and
`infos["_episode"]` marks those rows. (`episode_statistics=False` leaves them out, for
code that adds gymnasium's wrapper itself: the wrapper refuses an info that has them.)
Structured (Dict/Tuple) observations come back
nested as the env defined them, each leaf a batched view. gymnasium's wrappers that need
NEXT_STEP (its NormalizeObservation) refuse this mode; use `puffercore.transforms.Normalize`
on the puffercore vector instead.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from puffercore.interop.structures import adapted, copy_structure, row_of, unflatten


class GymnasiumVectorEnv(VectorEnv):
    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, vec, episode_statistics: bool = True):
        self.tree, self.single_observation_space = adapted(vec, "GymnasiumVectorEnv")
        self.episode_statistics = episode_statistics
        self.vec = vec
        self.num_envs = vec.num_agents
        self.single_action_space = vec.single_action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.render_mode = getattr(vec, "render_mode", None)
        self.metadata = {**getattr(vec, "metadata", {}), "autoreset_mode": AutoresetMode.SAME_STEP}
        self._restart_episodes()

    def _restart_episodes(self) -> None:
        self._returns = np.zeros(self.num_envs)
        self._lengths = np.zeros(self.num_envs, dtype=int)
        self._starts = np.full(self.num_envs, time.perf_counter())

    def reset(self, *, seed: int | list | None = None, options: dict | None = None):
        if isinstance(seed, (list, tuple)):
            raise ValueError("seed must be an int or None: puffercore seeds sub-env i from (seed, i)")
        observations, _ = self.vec.reset(seed=seed, options=options)
        self._restart_episodes()
        return self._observations(observations), {}

    def step(self, actions):
        observations, rewards, terminals, truncations, _ = self.vec.step(np.asarray(actions))
        infos: dict[str, Any] = {}
        ended = np.flatnonzero(terminals | truncations)
        if ended.size:
            finals = self._observations(self.vec.final_observations)
            for row in ended:
                final = row_of(finals, row)
                infos = self._add_info(infos, {"final_obs": final, "final_info": {}}, int(row))
        if self.episode_statistics:
            self._count_episodes(rewards, terminals | truncations, infos)
        return (copy_structure(self._observations(observations)), rewards.astype(np.float64), terminals.copy(),
                truncations.copy(), infos)

    def _count_episodes(self, rewards: np.ndarray, done: np.ndarray, infos: dict) -> None:
        """RecordEpisodeStatistics in SAME_STEP mode: every step counts toward the episode
        it ends; the rows that ended start their next episode at once."""
        self._returns += rewards
        self._lengths += 1
        if not done.any():
            return
        now = time.perf_counter()
        infos["episode"] = {"r": np.where(done, self._returns, 0.0), "l": np.where(done, self._lengths, 0),
                            "t": np.where(done, np.round(now - self._starts, 6), 0.0)}
        infos["_episode"] = done.copy()
        self._returns[done], self._lengths[done], self._starts[done] = 0.0, 0, now

    def render(self):
        return self.vec.render()

    def close_extras(self, **kwargs) -> None:
        self.vec.close()

    def _observations(self, rows: np.ndarray):
        return unflatten(self.tree, rows)


__all__ = ["GymnasiumVectorEnv"]
