"""Emulation: structured gymnasium/PettingZoo envs as fixed-shape rows.

- Rows and trees: `SpaceTree` and `ActionTree` (in `puffercore.spaces`, re-exported here).
- `GymnasiumEnv` and `PettingZooEnv` are PufferEnvs (see `puffercore.env`) wrapping one
  gymnasium env / one PettingZoo ParallelEnv.

Action masks: a PettingZoo env whose observations are Dicts with an `action_mask` leaf
keeps that leaf in the flat row. A policy reads it as
`env.observation_tree.unflatten(observations)["action_mask"]` (a view, shape
`[rows, n]`); any leaf is reachable the same way by its path in the tree.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium
import numpy as np

from puffercore.env import Buffers, EpisodeMeans, PufferEnv, check_seed, derive_seed
from puffercore.spaces import ActionTree, SpaceTree  # noqa: F401 (re-exported: the emulation API)


def _numeric_items(info: dict) -> dict[str, float]:
    """The scalar numbers of a gymnasium info dict (e.g. `is_success`), as episode stats."""
    return {
        key: float(value)
        for key, value in info.items()
        if isinstance(value, (int, float, np.number, np.bool_)) or (isinstance(value, np.ndarray) and value.shape == ())
    }


def env_name(env: Any) -> str:
    """How messages name a wrapped env: its registered id, else its class."""
    return getattr(getattr(env, "spec", None), "id", None) or type(getattr(env, "unwrapped", env)).__name__


def _instantiate(env_or_creator: Any, kind: type, argument: str, kind_name: str) -> Any:
    env = env_or_creator if isinstance(env_or_creator, kind) else None
    if env is None and callable(env_or_creator):
        env = env_or_creator()
    if not isinstance(env, kind):
        raise TypeError(f"{argument} must be a {kind_name} or a function returning one, got {env_or_creator!r}")
    return env


class Adapter(PufferEnv):
    """What the adapters share: the wrapped env, its space trees, stats, render, close."""

    def _wrap(self, env, observation_space, action_space, num_agents: int, buffers: Buffers | None) -> None:
        self.env = env
        self.observation_tree = SpaceTree(observation_space)
        self.action_tree = ActionTree(action_space)
        self.single_observation_space = self.observation_tree.flat_space
        self.single_action_space = self.action_tree.flat_space
        self.num_envs, self.num_agents = 1, num_agents
        self.render_mode = getattr(env, "render_mode", None)
        self.metadata = getattr(env, "metadata", {"render_modes": []})
        self._init_buffers(buffers)
        self._stats = EpisodeMeans()
        self._needs_reset = True
        self._closed = False

    def _begin(self, seed: Any) -> int | None:
        """Clear the per-step buffers and stats for a reset; the env's own seed."""
        seed = check_seed(seed)
        self.rewards[:] = 0
        self.terminals[:] = False
        self.truncations[:] = False
        self._stats.clear()
        self._needs_reset = False
        return None if seed is None else derive_seed(seed, self.env_index_base)

    def step(self, actions):
        if self._needs_reset:
            raise RuntimeError("step() called before reset(); call reset() first")
        self._write_actions(actions)
        return self.step_written()

    def step_written(self):
        """Step with the actions already in `self.actions`, validated by the caller: the
        serial vector checks a whole batch once instead of once per sub-env."""
        raise NotImplementedError

    def render(self):
        return self.env.render()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.env.close()


class GymnasiumEnv(Adapter):
    """One gymnasium env (any nested spaces) as a one-row PufferEnv with same-step
    autoreset. `observation_tree`/`action_tree` convert between flat rows and the env's
    structures. Info: mean `episode_return`, `episode_length` and the scalar numbers of
    the env's info at the last step of each episode (they override the first two; an
    info with `episode_continues` true marks an end for the learner only, no stats)."""

    def __init__(self, env_or_creator: gymnasium.Env | Callable[[], gymnasium.Env], buffers: Buffers | None = None):
        env = _instantiate(env_or_creator, gymnasium.Env, "env_or_creator", "gymnasium.Env")
        self._wrap(env, env.observation_space, env.action_space, 1, buffers)
        owner = f"env {env_name(env)}: "
        self._write_observation = self.observation_tree.writer(self.observations[0], owner)
        self._write_final_observation = self.observation_tree.writer(self.final_observations[0], owner)

    def reset(self, seed: int | None = None, options: dict | None = None):
        observation, _ = self.env.reset(seed=self._begin(seed), options=options)
        self._write_observation(observation)
        self._episode_return, self._episode_length = 0.0, 0
        return self.observations, {}

    def step_written(self):
        observation, reward, terminal, truncation, info = self.step_action(self.action_tree.unflatten(self.actions[0]))
        self._write_observation(observation)
        self.rewards[0], self.terminals[0], self.truncations[0] = reward, terminal, truncation
        return self.observations, self.rewards, self.terminals, self.truncations, info

    def step_action(self, action: Any) -> tuple[Any, Any, Any, Any, dict]:
        """Step the env on `action` (the env's action, checked by the caller) with
        same-step autoreset. Returns what the row must hold (the observation: the next
        episode's first after an end), the reward, terminal, truncation and the info;
        the caller writes the row (vectors write a whole batch at once)."""
        observation, reward, terminal, truncation, info = self.env.step(action)
        self._episode_return += float(reward)
        self._episode_length += 1
        if not (terminal or truncation):
            return observation, reward, terminal, truncation, {}
        self._write_final_observation(observation)  # now: reset may reuse the env's array
        # `episode_continues`: the learner's episode ended but the env's goes on (Atari's
        # episodic life: a lost life); its stats are logged, whole, when it really ends.
        if not info.get("episode_continues"):
            # The env's own statistics win: Atari's `episode_return` is the game's raw score.
            self._stats.add_episode(
                {"episode_return": self._episode_return, "episode_length": self._episode_length, **_numeric_items(info)}
            )
            self._episode_return, self._episode_length = 0.0, 0
        observation, _ = self.env.reset()
        return observation, reward, terminal, truncation, self._stats.drain()


class PettingZooEnv(Adapter):
    """One PettingZoo ParallelEnv as a PufferEnv of `max_agents` rows (default: one per
    possible agent). Agent `possible_agents[i]` always lives in row i; other rows are
    padding. All agents must share one observation space and one action space.

    After each step `masks[i]` says whether row i holds a live agent (one that acts next
    step); rows without one have zero observations. The reward, terminal and truncation
    of row i describe the transition of the agent that was live there before the step
    (so a trainer pairs them with the previous step's masks). An agent that is done
    this step leaves its last observation in `final_observations`. When no agent is left
    the env resets in the same step. Info: mean `episode_return` (per agent, averaged
    over the agents of the episode) and `episode_length` (env steps).
    """

    def __init__(self, parallel_env: Any, max_agents: int | None = None, buffers: Buffers | None = None):
        from pettingzoo import ParallelEnv

        env = _instantiate(parallel_env, ParallelEnv, "parallel_env", "PettingZoo ParallelEnv")
        self.possible_agents = list(getattr(env, "possible_agents", None) or [])
        if not self.possible_agents:
            raise ValueError("parallel_env must define a non-empty possible_agents list")
        if max_agents is None:
            max_agents = len(self.possible_agents)
        if isinstance(max_agents, bool) or not isinstance(max_agents, (int, np.integer)) or max_agents < len(self.possible_agents):
            raise ValueError(
                f"max_agents must be an int >= len(possible_agents) = {len(self.possible_agents)}, got {max_agents!r}"
            )
        first = self.possible_agents[0]
        for agent in self.possible_agents[1:]:
            for name in ("observation_space", "action_space"):
                if getattr(env, name)(agent) != getattr(env, name)(first):
                    raise ValueError(f"all agents must share one {name}: {agent!r} differs from {first!r}")
        self._wrap(env, env.observation_space(first), env.action_space(first), int(max_agents), buffers)
        self._row = {agent: row for row, agent in enumerate(self.possible_agents)}
        name = env_name(env)
        self._row_writers = [self.observation_tree.writer(self.observations[row], f"env {name}, agent {agent!r}: ")
                             for agent, row in self._row.items()]

    def reset(self, seed: int | None = None, options: dict | None = None):
        self._start_episode(seed=self._begin(seed), options=options)
        return self.observations, {}

    def _start_episode(self, **reset_kwargs) -> None:
        observations, _ = self.env.reset(**reset_kwargs)
        self.observations[:] = 0
        self._write_observations(observations)
        self._set_masks(self.env.agents)
        self._episode_returns: dict[str, float] = {}
        self._episode_length = 0

    def _write_observations(self, observations: dict) -> None:
        for agent, observation in observations.items():
            self._row_writers[self._agent_row(agent)](observation)

    def _agent_row(self, agent) -> int:
        if agent not in self._row:
            raise ValueError(f"agent {agent!r} is not in possible_agents {self.possible_agents}")
        return self._row[agent]

    def _set_masks(self, live_agents) -> None:
        self.masks[:] = False
        for agent in live_agents:
            self.masks[self._agent_row(agent)] = True

    def step_written(self):
        env_actions = {agent: self.action_tree.unflatten(self.actions[self._row[agent]]) for agent in self.env.agents}
        observations, rewards, terminals, truncations, _ = self.env.step(env_actions)

        self.rewards[:] = 0
        self.terminals[:] = False
        self.truncations[:] = False
        for agent, reward in rewards.items():
            self.rewards[self._agent_row(agent)] = reward
            self._episode_returns[agent] = self._episode_returns.get(agent, 0.0) + float(reward)
        for agent in terminals:
            self.terminals[self._agent_row(agent)] = terminals[agent]
        for agent in truncations:
            self.truncations[self._agent_row(agent)] = truncations[agent]
        self._write_observations(observations)
        self._episode_length += 1

        done = self.terminals | self.truncations
        self.final_observations[done] = self.observations[done]
        live = [agent for agent in self.env.agents if not done[self._row[agent]]]
        if live:
            self._set_masks(live)
            self.observations[~self.masks] = 0
        else:
            returns = list(self._episode_returns.values()) or [0.0]
            self._stats.add_episode({"episode_return": float(np.mean(returns)), "episode_length": self._episode_length})
            self._start_episode()
        return self.observations, self.rewards, self.terminals, self.truncations, self._stats.drain()
