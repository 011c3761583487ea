"""Vector-env transforms: normalization of observations and rewards, in place on the
buffers (`Normalize`), and frame stacking (`FrameStack`).

    vec = Normalize(puffercore.vector.make(...), observations=True, rewards=True, gamma=0.99)
    obs, info = vec.reset()                      # normalized, statistics updated
    obs, rew, term, trunc, info = vec.step(actions)
    vec.freeze()                                 # evaluation: statistics fixed
    state = vec.state_dict(); other.load_state_dict(state)

`Normalize` wraps any puffercore vector env (every backend, sync and staggered) and
keeps its API: `step`/`recv` return the env's own views, normalized in place, and the
final observations of the rows a batch ended are normalized with the same statistics
(a truncated episode bootstraps V(final observation), which must see what the policy
sees). Infos are untouched, so episode returns stay in the env's units.

Neither transform touches an action mask (the `action_mask` leaf of the vector's
`observation_tree`, found by `spaces.mask_columns`): Normalize computes and applies its
statistics over the other columns only, and FrameStack stacks the other columns and
puts the newest mask beside them.

- Observations (as gymnasium's NormalizeObservation): running mean and variance over the
  live rows of every batch, float64 accumulators, then (obs - mean) / sqrt(var + eps),
  clipped to [-clip, clip].
- Rewards (as gymnasium's NormalizeReward): each row keeps a discounted return
  G = gamma * G + r, whose running variance scales the rewards (divided by its std,
  then clipped); G restarts after an episode ends, by termination or truncation.
  gymnasium's vector wrapper computes G = gamma * (1 - terminated) * G + r, so on a
  terminal step its G is the reward alone; here it is the episode's discounted return
  like on every other step. Without terminations both give the same numbers.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium
import numpy as np

from puffercore.checks import check_int
from puffercore.spaces import SpaceTree, action_mask_leaf, mask_columns


class RunningMeanStd:
    """Mean and variance of everything `update` saw (Chan et al.'s parallel update), in
    float64, starting from one pseudo-sample at mean 0, variance 1 as gymnasium's does."""

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = epsilon

    def update(self, batch: np.ndarray) -> None:
        if len(batch) == 0:
            return
        self.update_from_moments(batch.mean(0, dtype=np.float64), batch.var(0, dtype=np.float64), len(batch))

    def update_from_moments(self, batch_mean, batch_var, batch_count: float) -> None:
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        self.var = (self.var * self.count + batch_var * batch_count + delta ** 2 * self.count * batch_count / total) / total
        self.count = total

    def moments(self) -> np.ndarray:
        """[count, count * mean..., count * E[x^2]...]: sums, which add across processes."""
        return np.concatenate([[self.count], (self.mean * self.count).ravel(),
                               ((self.var + self.mean ** 2) * self.count).ravel()])

    def set_moments(self, moments: np.ndarray) -> None:
        count, size = float(moments[0]), self.mean.size
        self.mean = (moments[1: 1 + size] / count).reshape(self.mean.shape)
        self.var = np.maximum(moments[1 + size:] / count - self.mean.ravel() ** 2, 0.0).reshape(self.var.shape)
        self.count = count

    def state_dict(self) -> dict[str, Any]:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": float(self.count)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if np.size(state["mean"]) != self.mean.size:
            raise ValueError(f"statistics of {np.size(state['mean'])} values do not fit these of {self.mean.size} "
                             f"(of an observation row's columns other than an action mask's)")
        self.mean = np.array(state["mean"], np.float64).reshape(self.mean.shape)
        self.var = np.array(state["var"], np.float64).reshape(self.var.shape)
        self.count = float(state["count"])


class VectorWrapper:
    """A vector env in front of `vec`: what a transform does not change (send, close,
    every attribute it does not set) is the wrapped env's. Not copyable: it holds a
    running vector env's workers and buffers (`copy_hint` says what to do instead)."""

    vec: Any
    copy_hint = "wrap a new vector env in a new {name}"

    def __getattr__(self, name: str) -> Any:
        if name == "vec" or name.startswith("__"):  # not set yet (an unpickled shell), or copy/pickle probing
            raise AttributeError(name)
        return getattr(self.vec, name)

    def __reduce_ex__(self, protocol):
        name = type(self).__name__
        raise TypeError(f"a {name} cannot be copied or pickled: it wraps a running vector env; "
                        + self.copy_hint.format(name=name))

    def send(self, actions) -> None:
        self.vec.send(actions)

    def close(self) -> None:
        self.vec.close()


# Added to the variance before its square root: Normalize's default, and what a deployed
# policy (puffercore.ppo.deploy) folds in with a run's statistics.
NORMALIZE_EPSILON = 1e-8


class Normalize(VectorWrapper):
    """A vector env whose observations and/or rewards are normalized (see the module
    docstring). Attributes other than the stepping API are the wrapped env's."""

    copy_hint = ("wrap a new vector env in a new {name} and give it these statistics: "
                 "new.load_state_dict(old.state_dict())")

    def __init__(self, vec, observations: bool = True, rewards: bool = True, gamma: float = 0.99,
                 clip_observations: float | None = 10.0, clip_rewards: float | None = 10.0,
                 epsilon: float = NORMALIZE_EPSILON):
        if not (observations or rewards):
            raise ValueError("Normalize needs observations=True or rewards=True")
        if observations and vec.single_observation_space.dtype.kind != "f":
            raise ValueError(f"observation normalization needs float observations, got "
                             f"{vec.single_observation_space.dtype} (byte rows of a structured space or images)")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
        for name, clip in (("clip_observations", clip_observations), ("clip_rewards", clip_rewards)):
            if clip is not None and not clip > 0:
                raise ValueError(f"{name} must be positive or None, got {clip!r}")
        self.vec, self.gamma, self.epsilon = vec, gamma, epsilon
        self.clip_observations, self.clip_rewards = clip_observations, clip_rewards
        # The columns normalized: all but an action mask's, which policies read as the env wrote it.
        self.columns = mask_columns(getattr(vec, "observation_tree", None)).others
        kept_shape = np.empty(vec.single_observation_space.shape)[..., self.columns].shape
        self.observation_stats = RunningMeanStd(kept_shape) if observations else None
        self.return_stats = RunningMeanStd() if rewards else None
        self.discounted_returns = np.zeros(vec.num_agents, np.float64)
        self.frozen = False
        # Moments at the last synchronize (the same on every process), to add only news.
        self._synced = {name: stats.moments() for name, stats in self._statistics()}


    def freeze(self, frozen: bool = True) -> None:
        """Stop (or resume) updating the statistics, e.g. for evaluation."""
        self.frozen = frozen

    # ---- the stepping API ------------------------------------------------------------
    def reset(self, seed: int | None = None, options: dict | None = None):
        observations, info = self.vec.reset(seed=seed, options=options)
        self.discounted_returns[:] = 0.0
        self._observations(observations, self.vec.masks)
        return observations, info

    def async_reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.vec.async_reset(seed=seed, options=options)
        self.discounted_returns[:] = 0.0

    def step(self, actions):
        observations, rewards, terminals, truncations, info = self.vec.step(actions)
        self._transform(slice(None), observations, rewards, terminals, truncations, self.vec.masks,
                        self.vec.final_observations)
        return observations, rewards, terminals, truncations, info

    def recv(self):
        batch = self.vec.recv()
        observations, rewards, terminals, truncations, _, _, masks = batch
        self._transform(batch.rows, observations, rewards, terminals, truncations, masks, batch.final_observations)
        return batch


    # ---- state -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The statistics (not the rows' running returns, which restart with the envs)."""
        state: dict[str, Any] = {}
        if self.observation_stats is not None:
            state["observations"] = self.observation_stats.state_dict()
        if self.return_stats is not None:
            state["returns"] = self.return_stats.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, stats in (("observations", self.observation_stats), ("returns", self.return_stats)):
            if (stats is None) != (name not in state):
                raise ValueError(f"normalization state {'has' if name in state else 'lacks'} {name} statistics "
                                 f"and this Normalize {'does not use' if stats is None else 'needs'} them")
            if stats is not None:
                stats.load_state_dict(state[name])
                self._synced[name] = stats.moments()

    def synchronize(self, sum_over_processes: Callable[[np.ndarray], np.ndarray]) -> None:
        """Every process's updates since the last call merged into the same statistics
        everywhere (data-parallel training): `sum_over_processes` adds a float64 array
        over processes (an all-reduce). Each process contributes what it added since the
        last synchronize, so nothing is counted twice."""
        for name, stats in self._statistics():
            merged = self._synced[name] + sum_over_processes(stats.moments() - self._synced[name])
            stats.set_moments(merged)
            self._synced[name] = merged

    def _statistics(self):
        return [(name, stats) for name, stats in (("observations", self.observation_stats),
                                                   ("returns", self.return_stats)) if stats is not None]

    def metrics(self) -> dict[str, float]:
        """Scalars worth logging: the reward scale and the observation statistics' spread."""
        scalars = {}
        if self.return_stats is not None:
            scalars["normalize/return_std"] = float(np.sqrt(self.return_stats.var + self.epsilon))
        if self.observation_stats is not None:
            scalars["normalize/observation_std_mean"] = float(np.sqrt(self.observation_stats.var).mean())
        return scalars

    # ---- the transforms --------------------------------------------------------------
    def _transform(self, rows, observations, rewards, terminals, truncations, masks, final_observations) -> None:
        """In place on a batch's arrays (`rows`: its rows of the vector, for the running
        returns; `final_observations`: the batch's, views or gathered copies)."""
        ended = terminals | truncations
        if self.observation_stats is not None:
            self._observations(observations, masks)
            if ended.any():  # their final observations, with the same statistics
                finals = final_observations[ended]
                self._normalize(finals)
                final_observations[ended] = finals
        if self.return_stats is not None:
            returns = self.discounted_returns[rows] * self.gamma + rewards
            if not self.frozen:
                self.return_stats.update(returns[masks])
            self.discounted_returns[rows] = np.where(ended, 0.0, returns)
            normalized = rewards / np.sqrt(self.return_stats.var + self.epsilon)
            if self.clip_rewards is not None:
                np.clip(normalized, -self.clip_rewards, self.clip_rewards, out=normalized)
            rewards[...] = normalized

    def _observations(self, observations: np.ndarray, masks: np.ndarray) -> None:
        if self.observation_stats is None:
            return
        if not self.frozen:
            self.observation_stats.update(observations[masks][..., self.columns])
        self._normalize(observations)

    def _normalize(self, observations: np.ndarray) -> None:
        """In place on `self.columns` of `observations`; the other columns stay as they are."""
        stats = self.observation_stats
        normalized = (observations[..., self.columns] - stats.mean) / np.sqrt(stats.var + self.epsilon)
        if self.clip_observations is not None:
            np.clip(normalized, -self.clip_observations, self.clip_observations, out=normalized)
        observations[..., self.columns] = normalized


class FrameStack(VectorWrapper):
    """Each row's last `frames` observations, oldest first, as one flat row
    [frames * obs] (gymnasium's FrameStackObservation with reset padding, for vector envs):
    an episode starts with its first observation repeated, and the final observation of
    an ended episode is stacked onto that episode's frames. Works on every backend, sync
    and staggered; a batch's stacks are views of this wrapper's buffer when its rows are
    one block. A row with an action mask becomes Dict(action_mask: the newest mask,
    frames: the stacked rest) in `observation_tree`: a policy masks with the legal
    actions of now."""

    def __init__(self, vec, frames: int):
        frames = check_int(frames, "frames", 2)
        space = vec.single_observation_space
        tree = getattr(vec, "observation_tree", None)
        if len(space.shape) != 1 or (tree is not None and tree.is_bytes):
            raise ValueError(f"frame stacking needs flat observation rows of one dtype (no mixed-dtype structure), "
                             f"got {space}")
        self.vec, self.frames = vec, int(frames)
        self.mask, self.columns = mask_columns(tree)
        low, high = space.low[self.columns], space.high[self.columns]
        self.width = len(low)
        stacked = gymnasium.spaces.Box(np.tile(low, self.frames), np.tile(high, self.frames), dtype=space.dtype)
        if self.mask is None:
            self.single_observation_space, self.observation_tree = stacked, None  # a stacked row is flat
            self.stacked_columns = slice(None)
        else:
            self.observation_tree = SpaceTree(gymnasium.spaces.Dict(
                {"action_mask": action_mask_leaf(tree).space, "frames": stacked}))
            self.single_observation_space = self.observation_tree.flat_space
            frames_leaf, mask_leaf = self.observation_tree.leaf("frames"), self.observation_tree.leaf("action_mask")
            self.stacked_columns = slice(frames_leaf.start, frames_leaf.stop)
            self.stacked_mask = slice(mask_leaf.start, mask_leaf.stop)
        self.stacks = np.zeros((vec.num_agents, self.single_observation_space.shape[0]), space.dtype)
        self.final_stacks = self.final_observations = np.zeros_like(self.stacks)  # the vector's, stacked
        self.fresh = np.ones(vec.num_agents, np.bool_)  # rows whose next observation starts an episode


    def reset(self, seed: int | None = None, options: dict | None = None):
        observations, info = self.vec.reset(seed=seed, options=options)
        self.fresh[:] = True
        self._advance(slice(None), observations, np.zeros(len(observations), np.bool_), None)
        return self.stacks, info

    def async_reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.vec.async_reset(seed=seed, options=options)
        self.fresh[:] = True

    def step(self, actions):
        observations, rewards, terminals, truncations, info = self.vec.step(actions)
        self._advance(slice(None), observations, terminals | truncations, self.vec.final_observations)
        return self.stacks, rewards, terminals, truncations, info

    def recv(self):
        from puffercore.vector.common import Batch

        batch = self.vec.recv()
        rows = batch.rows
        self._advance(rows, batch.observations, batch.terminals | batch.truncations, batch.final_observations)
        stacked = tuple.__new__(Batch, (self.stacks[rows], *batch[1:]))
        stacked.final_observations, stacked.rows = self.final_stacks[rows], rows
        return stacked


    def _advance(self, rows, observations: np.ndarray, ended: np.ndarray, finals: np.ndarray | None) -> None:
        """Shift the rows' frames, append their new observations; an ended row's final
        stack takes its episode's frames plus the final observation, and a row starting
        an episode is filled with its first observation. Masks are copied, not stacked."""
        # A copy for index rows or beside a mask, else a view.
        stack = self.stacks[rows, self.stacked_columns].reshape(-1, self.frames, self.width)
        stack[:, :-1] = stack[:, 1:].copy()
        if ended.any():
            final = stack[ended].copy()
            final[:, -1] = finals[ended][:, self.columns]
            ended_rows = np.arange(len(self.stacks))[rows][ended]
            self.final_stacks[ended_rows, self.stacked_columns] = final.reshape(len(final), -1)
            if self.mask is not None:
                self.final_stacks[ended_rows, self.stacked_mask] = finals[ended][:, self.mask]
        starting = ended | self.fresh[rows]
        latest = observations[:, self.columns]
        stack[:, -1] = latest
        stack[starting] = latest[starting][:, None, :]
        self.stacks[rows, self.stacked_columns] = stack.reshape(len(stack), -1)
        if self.mask is not None:
            self.stacks[rows, self.stacked_mask] = observations[:, self.mask]
        self.fresh[rows] = False
