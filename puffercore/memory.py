"""Memory: a PufferEnv that only an agent with memory can solve, for testing recurrent
policies.

Each episode shows a cue (left or right, one-hot) on its first observation, then `delay`
blank observations, the last with a query flag set. The action taken at the query step
is rewarded +1 if it names the cue and -1 otherwise; the episode then terminates. Actions
before the query earn nothing. A memoryless policy sees identical query observations for
both cues, so its best expected return is 0; a policy that remembers the cue earns 1.

Observation: float32 [cue_left, cue_right, query]; action: Discrete(2).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from puffercore.emulation import EpisodeStats
from puffercore.env import PufferEnv, check_seed, derive_seed


class Memory(PufferEnv):
    def __init__(self, num_envs: int = 1, delay: int = 4, seed: int | None = None, buffers=None):
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        if isinstance(delay, bool) or not isinstance(delay, (int, np.integer)) or delay < 1:
            raise ValueError(f"delay must be a positive int (steps between cue and query), got {delay!r}")
        self.num_envs = self.num_agents = int(num_envs)
        self.delay = int(delay)
        self.single_observation_space = spaces.Box(0.0, 1.0, (3,), np.float32)
        self.single_action_space = spaces.Discrete(2)
        self._init_buffers(buffers)
        self._default_seed = check_seed(seed)
        self._rngs: list[np.random.Generator] | None = None
        self._cues = np.zeros(self.num_envs, np.int64)
        self._steps = np.zeros(self.num_envs, np.int64)
        self._stats = EpisodeStats()

    def reset(self, seed: int | None = None, options: dict | None = None):
        seed = check_seed(seed)
        if seed is None and self._rngs is None:
            seed = self._default_seed
        if seed is not None or self._rngs is None:
            self._rngs = [
                np.random.default_rng(None if seed is None else derive_seed(seed, self.env_index_base + j))
                for j in range(self.num_envs)
            ]
        self.rewards[:], self.terminals[:], self.truncations[:] = 0, False, False
        self._stats = EpisodeStats()
        self._start(np.arange(self.num_envs))
        return self.observations, {}

    def _start(self, envs: np.ndarray) -> None:
        for j in envs:
            self._cues[j] = self._rngs[j].integers(2)
        self._steps[envs] = 0
        self.observations[envs] = 0
        self.observations[envs, self._cues[envs]] = 1

    def step(self, actions):
        if self._rngs is None:
            raise RuntimeError("step() called before reset(); call reset() first")
        self._write_actions(actions)
        self._steps += 1
        queried = self._steps > self.delay
        self.rewards[:] = np.where(queried, np.where(self.actions == self._cues, 1.0, -1.0), 0.0)
        self.terminals[:] = queried
        self.truncations[:] = False
        self.observations[:] = 0
        self.observations[self._steps == self.delay, 2] = 1
        done = np.flatnonzero(queried)
        if done.size:
            self.final_observations[done] = self.observations[done]
            for j in done:
                self._stats.add({"episode_return": float(self.rewards[j]), "episode_length": self.delay + 1})
            self._start(done)
        return self.observations, self.rewards, self.terminals, self.truncations, self._stats.drain()
