"""Small pure-Python PufferEnvs with known behaviour, for tests, benchmarks and for
users checking a backend: they live in the package so worker processes can import them."""

from __future__ import annotations

import time

import gymnasium
import numpy as np

from puffercore.env import Buffers, PufferEnv, check_seed, derive_seed


class CountingEnv(PufferEnv):
    """One row. Observation = [step count, last action, random draw]; the episode ends
    after `episode_length` steps (terminal) and the random draw comes from the env's own
    seeded generator, so trajectories reveal the seeding. Optional `step_cost` seconds
    (a float, or a (low, high) range drawn per step) makes stepping slow or uneven, and
    `fail_at_step` makes step raise, for fault tests."""

    def __init__(self, episode_length=5, step_cost=0.0, fail_at_step=None, buffers: Buffers | None = None):
        self.single_observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.single_action_space = gymnasium.spaces.Discrete(4)
        self.num_envs = self.num_agents = 1
        self.episode_length = episode_length
        self.step_cost = step_cost
        self.fail_at_step = fail_at_step
        self._init_buffers(buffers)
        self._rng = np.random.default_rng(0)
        self._steps = self._total_steps = 0
        self._return = 0.0
        self._finished: list[tuple[float, int]] = []

    def _observe(self, action: int) -> None:
        self.observations[0] = (self._steps, action, self._rng.random())

    def reset(self, seed: int | None = None, options: dict | None = None):
        seed = check_seed(seed)
        if seed is not None:
            self._rng = np.random.default_rng(derive_seed(seed, self.env_index_base))
        self._steps, self._return = 0, 0.0
        self._observe(-1)
        return self.observations, {}

    def step(self, actions):
        self._write_actions(actions)
        self._total_steps += 1
        if self.fail_at_step is not None and self._total_steps >= self.fail_at_step:
            raise ValueError(f"CountingEnv failed on purpose at step {self._total_steps}")
        if self.step_cost:
            low, high = self.step_cost if isinstance(self.step_cost, tuple) else (self.step_cost, self.step_cost)
            deadline = time.perf_counter() + self._rng.uniform(low, high)
            while time.perf_counter() < deadline:  # busy wait: sleep() is far too coarse
                pass
        action = int(self.actions[0])
        self._steps += 1
        self.rewards[0] = action
        self._return += action
        self.terminals[0] = self._steps >= self.episode_length
        self.truncations[0] = False
        self._observe(action)
        info = {}
        if self.terminals[0]:
            self.final_observations[0] = self.observations[0]
            info = {"episodes": 1.0, "episode_return": self._return, "episode_length": float(self._steps)}
            self._steps, self._return = 0, 0.0
            self._observe(-1)
        return self.observations, self.rewards, self.terminals, self.truncations, info
