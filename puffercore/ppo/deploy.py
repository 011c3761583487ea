"""A trained PPO policy on its own: `Policy.load(run)` and `act(observations)`, without
the trainer, the vector env or the run directory's other files. `DeployedNetwork`, the
torch module behind it, is what `puffercore export` writes (`ppo.export`).

    policy = ppo.Policy.load("runs/cartpole-...")        # a run directory or its checkpoint.pt
    action = policy.act(observation)                     # one observation -> one action
    actions = policy.act(observations)                   # a batch [B, *shape] -> [B, ...]
    actions = policy.act(observations, deterministic=False)   # sampled from the distribution
    policy.reset()                                       # a recurrent policy: new episodes

Observations are the env's rows as the policy saw them in training, before
normalization: `policy.observation_space` says their shape (a `frame_stack` run's: the
stacked rows). A Dict or Tuple observation goes in as the env gives it, one (a dict of
arrays) or a batch (each leaf with a leading batch dimension), or as its flat rows
(`policy.observation_tree.flatten(observation)`). A run's observation normalization is folded in, with its statistics as the
checkpoint froze them; an action mask in the observation is honoured. Actions are the
env's: Box actions clipped to their bounds, as training sent them.

A recurrent policy keeps the state of the rows it last acted on: the first `act` starts
them at the initial state, `reset()` starts every row again (`reset(ended)`, one bool
per row, only the rows whose episode ended); a batch of another size needs a `reset()`.
`policy.state` holds it between calls.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium.spaces import Dict, Tuple
from torch import nn

from puffercore import checkpoint, run
from puffercore.config_files import saved_config
from puffercore.ppo.config import PPOConfig
from puffercore.ppo.parts import saved_policy
from puffercore.ppo.policy import ActorCritic, restart_ended
from puffercore.spaces import mask_columns
from puffercore.transforms import NORMALIZE_EPSILON


class DeployedNetwork(nn.Module):
    """`forward(observations, *state) -> (actions, params, value, *new_state)`: the
    greedy actions (before Box clipping), the distribution's parameters (masked logits
    or Gaussian means), the value, and a recurrent policy's new state; observations are
    normalized first as in training (`transforms.Normalize`, frozen statistics)."""

    def __init__(self, policy: ActorCritic, observation_statistics: dict[str, Any] | None, clip: float):
        super().__init__()
        self.policy = policy.eval()
        self.normalizes = observation_statistics is not None
        if self.normalizes:
            # Full-width rows of mean and std, in float64 as Normalize computes; the
            # columns it leaves alone (an action mask) are passed through by `kept`.
            size = policy.observation_space.shape[-1]
            columns = np.arange(size)[mask_columns(policy.observation_tree).others]
            mean, std, kept = np.zeros(size), np.ones(size), np.ones(size, np.bool_)
            mean[columns] = observation_statistics["mean"]
            std[columns] = np.sqrt(observation_statistics["var"] + NORMALIZE_EPSILON)
            kept[columns] = False
            self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float64))
            self.register_buffer("std", torch.as_tensor(std, dtype=torch.float64))
            self.register_buffer("kept", torch.as_tensor(kept))
            self.clip = float(clip)

    def normalize(self, observations: torch.Tensor) -> torch.Tensor:
        if not self.normalizes:
            return observations
        normalized = ((observations.double() - self.mean) / self.std).clamp(-self.clip, self.clip)
        return torch.where(self.kept, observations, normalized.to(observations.dtype))

    def forward(self, observations: torch.Tensor, *state: torch.Tensor):
        out = self.policy.output(self.normalize(observations), state or None)
        return (self.policy.head.greedy(out.params), out.params, out.value, *(out.state or ()))


class Policy:
    """A checkpoint's policy, ready to act (see the module docstring)."""

    def __init__(self, network: DeployedNetwork, seed: int = 0):
        self.network = network
        self.policy = network.policy
        self.observation_space = self.policy.observation_space
        self.observation_tree = self.policy.observation_tree
        self.action_space = self.policy.head.space
        self.state: tuple[torch.Tensor, ...] | None = None  # a recurrent policy's, per row of the last batch
        self.generator = torch.Generator().manual_seed(seed)  # act(deterministic=False)'s samples

    @classmethod
    def load(cls, path: str, policy: Any = None, seed: int = 0) -> "Policy":
        """The policy of a run directory or checkpoint file `path`. `policy`: the
        ActorCritic class (or module:attribute) it was trained with, when that was one of
        yours; a checkpoint names it but never imports it. `seed`: of sampled actions."""
        from puffercore.ppo.train_and_evaluate import CHECKPOINT_KEYS

        state = checkpoint.load(run.checkpoint_path(path), required=CHECKPOINT_KEYS, kind="a PPO checkpoint")
        network = saved_policy(state, policy, path)
        statistics = (state.get("normalize") or {}).get("observations")
        return cls(DeployedNetwork(network, statistics, saved_config(PPOConfig, state["config"], path).clip_obs), seed)

    @property
    def recurrent(self) -> bool:
        return self.policy.initial_state(1, "cpu") is not None

    def act(self, observations, deterministic: bool = True) -> np.ndarray:
        """Actions for one observation (shape `observation_space.shape`) or a batch
        (`[batch, *shape]`), as a NumPy array ([batch, ...] for a batch); greedy when
        `deterministic`, else sampled."""
        if not isinstance(deterministic, bool):
            raise TypeError(f"deterministic must be True or False, got {deterministic!r}")
        rows, single = self._rows(observations)
        with torch.inference_mode():
            state = self._state(len(rows))
            actions, params, _, *new_state = self.network(rows, *(state or ()))
            if not deterministic:
                actions = self.policy.head.sample(params, self.policy.log_std, self.generator)[0]
        if state is not None:
            self.state = tuple(new_state)
        env_actions = self.policy.head.to_env(actions)
        return env_actions[0] if single else env_actions

    def reset(self, ended=None) -> None:
        """New episodes for a recurrent policy: every row (`ended` None), or the rows where
        `ended` (one bool per row of the last batch) is True. Nothing to do otherwise."""
        if ended is None or self.state is None:
            self.state = None
            return
        ended = np.asarray(ended)
        if ended.dtype != np.bool_ or ended.shape != (len(self.state[0]),):
            raise ValueError(f"ended must be one bool per row of the last batch, shape ({len(self.state[0])},), "
                             f"got {ended.dtype} {ended.shape}")
        self.state = restart_ended(self.state, torch.as_tensor(ended))

    def _rows(self, observations) -> tuple[torch.Tensor, bool]:
        """`observations` as a [batch, *shape] tensor of the space's dtype, and whether it was one."""
        space, tree = self.observation_space, self.observation_tree
        if tree is not None and isinstance(observations, (dict, tuple)) and isinstance(tree.space, (Dict, Tuple)):
            rows, single = _structured_rows(tree, observations)
            return torch.as_tensor(rows), single
        array = np.asarray(observations)
        if array.dtype.kind not in "biuf" or not np.can_cast(array.dtype, space.dtype, "same_kind"):
            structure = f" (or observations of {tree.space}, as the env gives them)" if tree is not None else ""
            raise ValueError(f"observations must be numbers castable to the observation space's {space.dtype}"
                             f"{structure}, got dtype {array.dtype}")
        single = array.shape == space.shape
        if not single and (array.ndim != len(space.shape) + 1 or array.shape[1:] != space.shape or not len(array)):
            raise ValueError(f"observations must have shape {space.shape} (one observation) or (batch, "
                             f"{', '.join(map(str, space.shape))}) (a batch), got {array.shape}")
        rows = array[None] if single else array
        return torch.as_tensor(np.ascontiguousarray(rows, dtype=space.dtype)), single

    def _state(self, batch: int) -> tuple[torch.Tensor, ...] | None:
        if self.state is None:
            return self.policy.initial_state(batch, "cpu")
        if len(self.state[0]) != batch:
            raise ValueError(f"observations hold {batch} rows but the recurrent state is of {len(self.state[0])}: "
                             f"call reset() before acting on a batch of another size")
        return self.state


def _structured_rows(tree, observations) -> tuple[np.ndarray, bool]:
    """The flat rows of one Dict/Tuple observation or a batch of them (every leaf with a
    leading batch dimension), and whether it was one."""
    try:
        return tree.flatten(observations)[None], True
    except ValueError as error:
        one_error = error
    leaf = observations
    while isinstance(leaf, (dict, tuple)) and len(leaf):
        leaf = next(iter(leaf.values())) if isinstance(leaf, dict) else leaf[0]
    batch = np.shape(leaf)[:1]
    if batch and batch[0]:
        try:
            return tree.flatten(observations, np.zeros((batch[0], tree.size), tree.dtype)), False
        except ValueError:
            pass
    raise ValueError(f"observations must be one observation of {tree.space} or a batch of them (each leaf with a "
                     f"leading batch dimension): {one_error}") from None
