"""Emulation: structured gymnasium/PettingZoo envs as fixed-shape rows.

- `SpaceTree` maps a (nested Dict/Tuple) observation space to one flat row and back.
  The row has a single dtype when every leaf shares it, else it is raw uint8 bytes with
  each leaf aligned to its itemsize, so `unflatten` can reinterpret slices in place
  (`ndarray.view(dtype)` / `Tensor.view(dtype)`) and hand the policy views, not copies.
- `ActionTree` maps a (nested) action space to a flat MultiDiscrete (all leaves discrete)
  or float32 Box (all leaves continuous) and turns flat rows back into env actions.
- `GymnasiumEnv` and `PettingZooEnv` are PufferEnvs (see `puffercore.env`) wrapping one
  gymnasium env / one PettingZoo ParallelEnv.

Action masks: a PettingZoo env whose observations are Dicts with an `action_mask` leaf
keeps that leaf in the flat row. A policy reads it as
`env.observation_tree.unflatten(observations)["action_mask"]` (a view, shape
`[rows, n]`); any leaf is reachable the same way by its path in the tree.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Iterator

import gymnasium
import numpy as np
from gymnasium import spaces

from puffercore.env import Buffers, PufferEnv, check_seed, derive_seed

LEAF_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
DISCRETE_SPACES = (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One leaf of a space tree: where it lives in the structure and in the flat row.
    `start`/`stop` count elements of the row's dtype (bytes for a uint8 byte row)."""

    path: tuple
    space: gymnasium.Space
    dtype: np.dtype
    shape: tuple
    start: int
    stop: int


def _walk(space: gymnasium.Space, what: str, path: tuple = ()) -> Iterator[tuple[tuple, gymnasium.Space]]:
    """(path, leaf space) in depth-first order; raises on spaces with no fixed shape."""
    if isinstance(space, spaces.Dict):
        for key, child in space.spaces.items():
            yield from _walk(child, what, path + (key,))
    elif isinstance(space, spaces.Tuple):
        for index, child in enumerate(space.spaces):
            yield from _walk(child, what, path + (index,))
    elif isinstance(space, LEAF_SPACES):
        yield path, space
    else:
        raise TypeError(
            f"{what}{_path_str(path)} is {space}, which has no fixed shape; supported: Box, "
            "Discrete, MultiDiscrete, MultiBinary and Dict/Tuple of them"
        )


def _path_str(path: tuple) -> str:
    return "".join(f"[{key!r}]" for key in path)


def _get(structure: Any, path: tuple) -> Any:
    for key in path:
        structure = structure[key]
    return structure


def _assemble(space: gymnasium.Space, leaf_values: Iterator) -> Any:
    """Rebuild the nested structure of `space` from leaf values in `_walk` order."""
    if isinstance(space, spaces.Dict):
        return {key: _assemble(child, leaf_values) for key, child in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_assemble(child, leaf_values) for child in space.spaces)
    return next(leaf_values)


def _leaves(space: gymnasium.Space, what: str, in_bytes: bool) -> list[Leaf]:
    """Lay the leaves out one after another. With `in_bytes`, offsets count bytes and
    each leaf starts at a multiple of its itemsize; otherwise they count elements."""
    leaves, offset = [], 0
    for path, leaf_space in _walk(space, what):
        count = math.prod(leaf_space.shape)
        if in_bytes:
            itemsize = np.dtype(leaf_space.dtype).itemsize
            offset = -(-offset // itemsize) * itemsize
            count *= itemsize
        leaves.append(Leaf(path, leaf_space, np.dtype(leaf_space.dtype), leaf_space.shape, offset, offset + count))
        offset += count
    if not leaves or offset == 0:
        raise ValueError(f"{what} {space} has no elements")
    return leaves


def _bounds(space: gymnasium.Space) -> tuple[np.ndarray, np.ndarray]:
    """Flat (low, high) of one leaf, inclusive."""
    if isinstance(space, spaces.Box):
        return space.low.ravel(), space.high.ravel()
    if isinstance(space, spaces.Discrete):
        return np.array([space.start]), np.array([space.start + space.n - 1])
    if isinstance(space, spaces.MultiDiscrete):
        return space.start.ravel(), (space.start + space.nvec - 1).ravel()
    return np.zeros(space.n, np.int8).ravel(), np.ones(space.n, np.int8).ravel()


class SpaceTree:
    """A structured observation space laid out as one flat row.

    `flat_space` is the Box of one row; `leaves` lists every leaf (path, dtype, shape,
    offset). `flatten` writes observations into rows, `unflatten` reads rows back as
    nested dicts/tuples of views. Both accept any leading batch dims on the row array.
    """

    def __init__(self, space: gymnasium.Space):
        if not isinstance(space, gymnasium.Space):
            raise TypeError(f"space must be a gymnasium.Space, got {type(space).__name__}")
        self.space = space
        self.leaves = _leaves(space, "observation space", in_bytes=False)
        leaf_dtypes = {leaf.dtype for leaf in self.leaves}
        self.is_bytes = len(leaf_dtypes) > 1
        if not self.is_bytes:
            self.dtype = leaf_dtypes.pop()
            low, high = zip(*(_bounds(leaf.space) for leaf in self.leaves))
            low, high = np.concatenate(low).astype(self.dtype), np.concatenate(high).astype(self.dtype)
            self.size = self.leaves[-1].stop
            self.flat_space = spaces.Box(low, high, (self.size,), self.dtype)
        else:
            self.dtype = np.dtype(np.uint8)
            self.leaves = _leaves(space, "observation space", in_bytes=True)
            # Pad the row to the widest itemsize so every row of a batch stays aligned.
            widest = max(leaf.dtype.itemsize for leaf in self.leaves)
            self.size = -(-self.leaves[-1].stop // widest) * widest
            self.flat_space = spaces.Box(0, 255, (self.size,), np.uint8)
        self._torch_cache = None  # (row dtype, [leaf dtypes]), resolved on first torch use

    def leaf(self, *path) -> Leaf:
        """The leaf at `path` (keys of Dicts, indices of Tuples)."""
        for leaf in self.leaves:
            if leaf.path == path:
                return leaf
        raise KeyError(f"no leaf at path {path}; leaves: {[leaf.path for leaf in self.leaves]}")

    def flatten(self, observation: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Write `observation` (a structure matching the space) into `out`, a row
        `[size]` or a batch `[*batch, size]` when every leaf carries the same leading
        batch dims. Allocates a single row when `out` is None. Returns `out`."""
        if out is None:
            out = np.zeros(self.size, self.dtype)
        self.writer(out)(observation)
        return out

    def writer(self, out: np.ndarray) -> Callable[[Any], None]:
        """`flatten` into a fixed `out` with its leaf views computed once: the adapters'
        per-step path, a handful of `np.copyto` calls."""
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy array, got {type(out).__name__}")
        targets = list(zip(self.leaves, self._leaf_views(out, "out")))
        def write(observation: Any) -> None:
            for leaf, view in targets:
                try:
                    np.copyto(view, _get(observation, leaf.path), casting="same_kind")
                except (KeyError, IndexError, TypeError, ValueError) as error:
                    raise ValueError(f"observation{_path_str(leaf.path)} does not fit {leaf.space}: {error}") from error

        return write

    def unflatten(self, flat: Any) -> Any:
        """The nested structure of `flat` (NumPy array or torch tensor `[*batch, size]`),
        each leaf a view `[*batch, *leaf.shape]` sharing memory with `flat`."""
        return _assemble(self.space, iter(self._leaf_views(flat, "flat")))

    def _leaf_views(self, flat: Any, name: str) -> list:
        is_numpy = isinstance(flat, np.ndarray)
        if not is_numpy and not hasattr(flat, "untyped_storage"):
            raise TypeError(f"{name} must be a numpy array or torch tensor, got {type(flat).__name__}")
        row_dtype, leaf_dtypes = (self.dtype, [leaf.dtype for leaf in self.leaves]) if is_numpy else self._torch_dtypes()
        if flat.dtype != row_dtype or flat.ndim < 1 or flat.shape[-1] != self.size:
            raise ValueError(
                f"{name} must have shape [..., {self.size}] and dtype {row_dtype}, got {tuple(flat.shape)} {flat.dtype}"
            )
        batch = tuple(flat.shape[:-1])
        slices = [flat[..., leaf.start : leaf.stop] for leaf in self.leaves]
        if self.is_bytes:
            slices = [s.view(dtype) for s, dtype in zip(slices, leaf_dtypes)]
        if is_numpy:
            return [s.reshape(batch + leaf.shape) for s, leaf in zip(slices, self.leaves)]
        # torch: .view never copies (it raises instead), which is the guarantee we want.
        return [s.view(batch + leaf.shape) for s, leaf in zip(slices, self.leaves)]

    def _torch_dtypes(self) -> tuple:
        if self._torch_cache is None:
            import torch

            def to_torch(dtype):
                return torch.from_numpy(np.empty(0, dtype)).dtype

            self._torch_cache = (to_torch(self.dtype), [to_torch(leaf.dtype) for leaf in self.leaves])
        return self._torch_cache


class ActionTree:
    """A structured action space as one flat action row: MultiDiscrete when every leaf is
    discrete (Discrete/MultiDiscrete/MultiBinary; `start` offsets are kept so flat values
    equal env values), float32 Box when every leaf is a Box. A top-level Discrete stays
    Discrete. `unflatten(row)` gives the env action; `flatten(action)` the flat row."""

    def __init__(self, space: gymnasium.Space):
        if not isinstance(space, gymnasium.Space):
            raise TypeError(f"space must be a gymnasium.Space, got {type(space).__name__}")
        self.space = space
        self.leaves = _leaves(space, "action space", in_bytes=False)
        discrete = [isinstance(leaf.space, DISCRETE_SPACES) for leaf in self.leaves]
        if any(discrete) and not all(discrete):
            kinds = {leaf.path: type(leaf.space).__name__ for leaf in self.leaves}
            raise ValueError(
                f"action space mixes discrete and continuous leaves ({kinds}); puffercore's flat "
                "actions are either MultiDiscrete or Box. Split the action or discretize the Box."
            )
        low, high = zip(*(_bounds(leaf.space) for leaf in self.leaves))
        low, high = np.concatenate(low), np.concatenate(high)
        # The scalar type of a top-level Discrete: unflatten's fast path.
        self._discrete = space.dtype.type if isinstance(space, spaces.Discrete) else None
        if isinstance(space, spaces.Discrete):
            self.flat_space = space
        elif all(discrete):
            self.flat_space = spaces.MultiDiscrete(high - low + 1, start=low)
        else:
            self.flat_space = spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)

    def unflatten(self, row: np.ndarray) -> Any:
        """The env action of one flat row. Discrete leaves become NumPy scalars of the
        leaf's dtype, as gymnasium's own vector envs pass them (and its `Discrete.contains`
        checks them faster than Python ints, for which it builds an `np.iinfo`)."""
        if self._discrete is not None:
            return self._discrete(row)
        values = (
            leaf.dtype.type(row[leaf.start])
            if isinstance(leaf.space, spaces.Discrete)
            else row[leaf.start : leaf.stop].reshape(leaf.shape).astype(leaf.dtype)
            for leaf in self.leaves
        )
        return _assemble(self.space, values)

    def unflatten_batch(self, rows: np.ndarray) -> Any:
        """The env actions of flat rows `[k, ...]`, an iterable of k: a whole batch
        converted at once, so a plain Discrete costs one `astype` instead of k scalars."""
        if self._discrete is not None:
            return rows.astype(self.space.dtype)
        return [self.unflatten(row) for row in rows]

    def flatten(self, action: Any) -> np.ndarray:
        row = np.zeros(self.flat_space.shape, self.flat_space.dtype)
        if isinstance(self.space, spaces.Discrete):
            row[...] = action
            return row
        for leaf in self.leaves:
            row[leaf.start : leaf.stop] = np.ravel(_get(action, leaf.path))
        return row


class EpisodeStats:
    """Statistics of finished episodes, drained as the `info` dict of the env contract:
    the mean of each statistic and `episodes`, the number of episodes."""

    def __init__(self):
        self._clear()

    def _clear(self) -> None:
        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}
        self._episodes = 0

    def add(self, stats: dict[str, float]) -> None:
        self._episodes += 1
        for key, value in stats.items():
            self._sums[key] = self._sums.get(key, 0.0) + float(value)
            self._counts[key] = self._counts.get(key, 0) + 1

    def drain(self) -> dict[str, float]:
        if not self._episodes:
            return {}
        info = {key: total / self._counts[key] for key, total in self._sums.items()}
        info["episodes"] = float(self._episodes)
        self._clear()
        return info


def _numeric_items(info: dict) -> dict[str, float]:
    """The scalar numbers of a gymnasium info dict (e.g. `is_success`), as episode stats."""
    return {
        key: float(value)
        for key, value in info.items()
        if isinstance(value, (int, float, np.number, np.bool_)) or (isinstance(value, np.ndarray) and value.shape == ())
    }


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
        self._stats = EpisodeStats()
        self._needs_reset = True
        self._closed = False

    def _begin(self, seed: Any) -> int | None:
        """Clear the per-step buffers and stats for a reset; the env's own seed."""
        seed = check_seed(seed)
        self.rewards[:] = 0
        self.terminals[:] = False
        self.truncations[:] = False
        self._stats = EpisodeStats()
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
        self._write_observation = self.observation_tree.writer(self.observations[0])
        self._write_final_observation = self.observation_tree.writer(self.final_observations[0])

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
            self._stats.add(
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
        self._row_writers = [self.observation_tree.writer(self.observations[row]) for row in self._row.values()]

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
            self._stats.add({"episode_return": float(np.mean(returns)), "episode_length": self._episode_length})
            self._start_episode()
        return self.observations, self.rewards, self.terminals, self.truncations, self._stats.drain()
