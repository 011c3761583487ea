"""The puffercore env interface: a batch of agent rows that step together.

Every env that puffercore can vectorize or train on -- ocean C envs, the gymnasium and
PettingZoo adapters, and the vector envs themselves -- is a `PufferEnv`:

- `single_observation_space` / `single_action_space`: the spaces of ONE row (a Box for
  observations, flat `(size,)` except a numba env's, which keeps the shape it declared;
  Discrete, MultiDiscrete or Box for actions). Structured spaces are flattened by
  `puffercore.emulation`, which keeps the tree for policies.
- `num_envs`: independent sub-environments; `num_agents`: rows (>= num_envs; a
  multi-agent sub-env owns several consecutive rows).
- Buffers (`Buffers`), one row per agent, owned by the env or handed in by a vector
  engine as slices of shared memory. `step` writes them in place and returns them.
- `reset(seed=None)` -> (observations, info)
  `step(actions)` -> (observations, rewards, terminals, truncations, info)
  `close()` is idempotent.

Contracts the whole project relies on:

- Same-step autoreset: when an episode ends, `step` sets terminals/truncations for
  the transition that ended it, resets that sub-env, and the row of `observations`
  holds the FIRST observation of the next episode. `final_observations` holds the
  last observation of the ended episode (for terminals and truncations alike, so a
  trainer can bootstrap V(final obs) on truncation and a single-env view can report
  it).
- Seeding is per sub-env index: sub-env j is seeded from (seed, env_index_base + j).
  A vector backend sets `env_index_base` to the global index of the env's first
  sub-env, so one seed gives the same trajectories whatever the backend or workers.
  `reset(seed=None)` continues the current random streams.
- `masks[i]` is False for padding rows of multi-agent envs (no agent lives there);
  their observations are zero and their rewards, terminals and truncations are
  meaningless.
- `info` is a dict of floats: means of episode statistics over the episodes that
  finished since the last call, plus `"episodes"`, their count. Empty when none did.
  `EpisodeMeans` is its arithmetic (adding episodes, merging infos), used everywhere.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium
import numpy as np

from puffercore.checks import check_int
from puffercore.seeding import check_seed, derive_seed  # noqa: F401 (part of this module's API)


@dataclasses.dataclass
class Buffers:
    """The shared arrays of a PufferEnv, row = agent. Layouts are fixed (C-contiguous):

    observations, final_observations: [rows, *obs_shape], float32 or uint8
    actions: [rows] int32 (Discrete), [rows, k] int32 (MultiDiscrete),
             [rows, *shape] float32 (Box)
    rewards: [rows] float32; terminals, truncations, masks: [rows] bool (1 byte,
    read as uint8 by C)
    """

    observations: np.ndarray
    final_observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminals: np.ndarray
    truncations: np.ndarray
    masks: np.ndarray

    @classmethod
    def allocate(
        cls,
        num_agents: int,
        observation_space: gymnasium.Space,
        action_space: gymnasium.Space,
    ) -> "Buffers":
        num_agents = check_int(num_agents, "num_agents", 1)
        obs_shape = (num_agents, *observation_space.shape)
        return cls(
            observations=np.zeros(obs_shape, dtype=observation_space.dtype),
            final_observations=np.zeros(obs_shape, dtype=observation_space.dtype),
            actions=np.zeros((num_agents, *action_space.shape), dtype=action_dtype(action_space)),
            rewards=np.zeros(num_agents, dtype=np.float32),
            terminals=np.zeros(num_agents, dtype=np.bool_),
            truncations=np.zeros(num_agents, dtype=np.bool_),
            masks=np.ones(num_agents, dtype=np.bool_),
        )

    def rows(self, start: int, stop: int) -> "Buffers":
        """Views of rows [start, stop): what a vector engine hands one sub-env."""
        return Buffers(**{f.name: getattr(self, f.name)[start:stop] for f in dataclasses.fields(self)})

    def check_compatible(
        self, num_agents: int, observation_space: gymnasium.Space, action_space: gymnasium.Space
    ) -> None:
        """Raise if buffers handed in by a caller do not fit the env."""
        expected = Buffers.allocate(num_agents, observation_space, action_space)
        for field in dataclasses.fields(self):
            got, want = getattr(self, field.name), getattr(expected, field.name)
            if not isinstance(got, np.ndarray):
                raise TypeError(f"buffers.{field.name} must be a numpy array, got {type(got).__name__}")
            if got.shape != want.shape or got.dtype != want.dtype:
                raise ValueError(
                    f"buffers.{field.name} must have shape {want.shape} and dtype {want.dtype}, "
                    f"got shape {got.shape} and dtype {got.dtype}"
                )
            if not got.flags.c_contiguous or not got.flags.writeable:
                raise ValueError(f"buffers.{field.name} must be C-contiguous and writeable")


def action_dtype(action_space: gymnasium.Space) -> np.dtype:
    if isinstance(action_space, (gymnasium.spaces.Discrete, gymnasium.spaces.MultiDiscrete)):
        return np.dtype(np.int32)
    if isinstance(action_space, gymnasium.spaces.Box):
        return np.dtype(np.float32)
    raise TypeError(
        "action space must be Discrete, MultiDiscrete or Box (flatten Dict/Tuple spaces with "
        f"puffercore.emulation first), got {action_space}"
    )


def check_actions(actions: Any, action_space: gymnasium.Space, num_agents: int) -> np.ndarray:
    """Validate a batch of actions for `num_agents` rows and return it as an array of
    the buffer dtype. Raises a ValueError/TypeError naming `actions` otherwise, so that
    native code never sees an out-of-range index or a NaN."""
    if hasattr(actions, "detach"):  # torch tensor
        actions = actions.detach().cpu().numpy()
    actions = np.asarray(actions)
    expected_shape = (num_agents, *action_space.shape)
    if actions.shape != expected_shape:
        raise ValueError(f"actions must have shape {expected_shape}, got {actions.shape}")

    if isinstance(action_space, (gymnasium.spaces.Discrete, gymnasium.spaces.MultiDiscrete)):
        if actions.dtype.kind not in "iu":
            raise TypeError(f"actions must be integers for {action_space}, got dtype {actions.dtype}")
        if isinstance(action_space, gymnasium.spaces.Discrete):
            low, high = action_space.start, action_space.start + action_space.n - 1
        else:
            low, high = action_space.start, action_space.start + action_space.nvec - 1
        if actions.size and ((actions < low).any() or (actions > high).any()):
            bad = np.argwhere((actions < low) | (actions > high))[0]
            raise ValueError(
                f"actions out of range for {action_space}: actions[{', '.join(map(str, bad))}] = "
                f"{actions[tuple(bad)]}"
            )
        return actions.astype(np.int32, copy=False)

    if isinstance(action_space, gymnasium.spaces.Box):
        if actions.dtype.kind not in "fiu":
            raise TypeError(f"actions must be numbers for {action_space}, got dtype {actions.dtype}")
        actions = actions.astype(np.float32, copy=False)
        if not np.isfinite(actions).all():
            bad = np.argwhere(~np.isfinite(actions))[0]
            raise ValueError(f"actions must be finite, got actions[{', '.join(map(str, bad))}] = {actions[tuple(bad)]}")
        return actions
    raise TypeError(f"unsupported action space {action_space}")


class EpisodeMeans:
    """The arithmetic of `info` (see the module docstring): episode-weighted means of
    episode statistics, the one implementation behind every place that reports or logs
    them -- an adapter adding its env's ended episodes, a vector merging its sub-envs'
    infos (`vector.merge_infos`), the PPO trainer's log rows and torchrun ranks, and the
    SB3 adapter's per-episode infos. Each statistic's mean covers the episodes that
    reported it; `episodes` counts them all.

        means.add({"episodes": 3.0, "episode_return": 2.0})   # an info: means of 3 episodes
        means.add_episode({"episode_return": 5.0})             # one episode
        means.drain()   # {"episodes": 4.0, "episode_return": 2.75}; {} when none ended
    """

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        self.episodes = 0.0
        self.sums: dict[str, float] = {}  # statistic -> sum of its value over the episodes that reported it
        self.weights: dict[str, float] = {}  # statistic -> those episodes

    def add(self, info: dict) -> None:
        """An info dict: the means of `info["episodes"]` episodes (nothing without it)."""
        episodes = info.get("episodes", 0.0)
        if not episodes:
            return
        self.episodes += episodes
        for key, value in info.items():
            if key != "episodes":
                self.sums[key] = self.sums.get(key, 0.0) + float(value) * episodes
                self.weights[key] = self.weights.get(key, 0.0) + episodes

    def add_episode(self, stats: dict[str, float]) -> None:
        """The statistics of one ended episode."""
        self.add({**stats, "episodes": 1.0})

    def merge(self, other: "EpisodeMeans") -> None:
        """Everything `other` holds (another rank's, say) added to this."""
        self.episodes += other.episodes
        for key, total in other.sums.items():
            self.sums[key] = self.sums.get(key, 0.0) + total
            self.weights[key] = self.weights.get(key, 0.0) + other.weights[key]

    def drain(self) -> dict[str, float]:
        """The info of everything added since the last drain, emptying this; {} when no
        episode ended."""
        if not self.episodes:
            return {}
        info = {"episodes": self.episodes, **{key: total / self.weights[key] for key, total in self.sums.items()}}
        self.clear()
        return info


class PufferEnv:
    """Base class of every puffercore env (see the module docstring for the contract).

    Subclasses set the spaces and counts, call `_init_buffers(buffers)`, and implement
    `reset` and `step`. They may call `check_actions` themselves or use `_write_actions`.
    """

    single_observation_space: gymnasium.spaces.Box
    single_action_space: gymnasium.Space
    num_envs: int
    num_agents: int
    env_index_base: int = 0
    render_mode: str | None = None
    metadata: dict = {"render_modes": []}

    def _init_buffers(self, buffers: Buffers | None) -> None:
        if buffers is None:
            buffers = Buffers.allocate(self.num_agents, self.single_observation_space, self.single_action_space)
        else:
            buffers.check_compatible(self.num_agents, self.single_observation_space, self.single_action_space)
        self.buffers = buffers
        self.observations = buffers.observations
        self.final_observations = buffers.final_observations
        self.actions = buffers.actions
        self.rewards = buffers.rewards
        self.terminals = buffers.terminals
        self.truncations = buffers.truncations
        self.masks = buffers.masks

    def _write_actions(self, actions: Any) -> None:
        np.copyto(self.actions, check_actions(actions, self.single_action_space, self.num_agents))

    @property
    def observation_space(self) -> gymnasium.Space:
        return gymnasium.vector.utils.batch_space(self.single_observation_space, self.num_agents)

    @property
    def action_space(self) -> gymnasium.Space:
        return gymnasium.vector.utils.batch_space(self.single_action_space, self.num_agents)

    def reset(self, seed: int | None = None, options: dict | None = None):
        raise NotImplementedError

    def step(self, actions):
        raise NotImplementedError

    def render(self):
        return None

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class GymnasiumView(gymnasium.Env):
    """A single-env gymnasium view of a one-row PufferEnv, for `check_env` and for users
    who want the classic API. On episode end it returns the final observation (kept by
    the env in `final_observations`) and the next `reset` starts the episode that the
    env already began by autoreset."""

    def __init__(self, env: PufferEnv):
        if env.num_agents != 1:
            raise ValueError(f"GymnasiumView needs an env with exactly one row, got num_agents={env.num_agents}")
        self.env = env
        self.observation_space = env.single_observation_space
        self.action_space = env.single_action_space
        self.render_mode = env.render_mode
        self.metadata = env.metadata
        self._pending_first_obs = False

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None or not self._pending_first_obs:
            obs, info = self.env.reset(seed=seed)
        else:
            obs, info = self.env.observations, {}
        self._pending_first_obs = False
        return obs[0].copy(), dict(info)

    def step(self, action):
        action = np.asarray(action)[None]
        obs, rew, term, trunc, info = self.env.step(action)
        done = bool(term[0] or trunc[0])
        self._pending_first_obs = done
        out = self.env.final_observations[0] if done else obs[0]
        return out.copy(), float(rew[0]), bool(term[0]), bool(trunc[0]), dict(info)

    def render(self):
        return self.env.render()

    def close(self):
        self.env.close()
