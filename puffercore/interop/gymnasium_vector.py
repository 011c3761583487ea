"""A puffercore vector env as a `gymnasium.vector.VectorEnv` (same-step autoreset).

    envs = GymnasiumVectorEnv(puffercore.vector.make(CartPole, 64, backend="threads", seed=0))
    envs = gymnasium.wrappers.vector.RecordEpisodeStatistics(envs)
    obs, infos = envs.reset(seed=1)
    obs, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())

Rows are the gymnasium envs (`num_envs` = the puffercore vector's rows, one per agent of
a multi-agent env). `metadata["autoreset_mode"]` is SAME_STEP, puffercore's own
semantics: an env that ends resets within the step; its last observation is in
`infos["final_obs"]` (an object array, `infos["_final_obs"]` the mask), as gymnasium's
SyncVectorEnv delivers it in that mode. Structured (Dict/Tuple) observations come back
nested as the env defined them, each leaf a batched view. gymnasium's wrappers that need
NEXT_STEP (its NormalizeObservation) refuse this mode; use `puffercore.transforms.Normalize`
on the puffercore vector instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from puffercore.interop.structures import adapted, copy_structure, row_of, unflatten


class GymnasiumVectorEnv(VectorEnv):
    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, vec):
        self.tree, self.single_observation_space = adapted(vec, "GymnasiumVectorEnv")
        self.vec = vec
        self.num_envs = vec.num_agents
        self.single_action_space = vec.single_action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.render_mode = getattr(vec, "render_mode", None)
        self.metadata = {**getattr(vec, "metadata", {}), "autoreset_mode": AutoresetMode.SAME_STEP}

    def reset(self, *, seed: int | list | None = None, options: dict | None = None):
        if isinstance(seed, (list, tuple)):
            raise ValueError("seed must be an int or None: puffercore seeds sub-env i from (seed, i)")
        observations, _ = self.vec.reset(seed=seed, options=options)
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
        return (copy_structure(self._observations(observations)), rewards.astype(np.float64), terminals.copy(),
                truncations.copy(), infos)

    def render(self):
        return self.vec.render()

    def close_extras(self, **kwargs) -> None:
        self.vec.close()

    def _observations(self, rows: np.ndarray):
        return unflatten(self.tree, rows)


__all__ = ["GymnasiumVectorEnv"]
