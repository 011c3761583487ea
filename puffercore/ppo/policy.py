"""The policy interface of puffercore's PPO: what a network must do for the trainer,
evaluation, checkpoints, torchrun, the compiled update and deployment to take it.

A policy is an `ActorCritic`: a torch module built from the spaces of the vector env
it will act in, whose `forward` maps a batch of observations (and its recurrent state,
if it has one) to the parameters of an action distribution and a value per row:

    class MyPolicy(ppo.ActorCritic):
        def __init__(self, observation_space, action_space, observation_tree=None):
            super().__init__(observation_space, action_space, observation_tree)
            size = self.decoded_size                     # floats per observation
            self.actor = nn.Sequential(nn.Linear(size, 64), nn.Tanh(), nn.Linear(64, self.head.size))
            self.critic = nn.Sequential(nn.Linear(size, 64), nn.Tanh(), nn.Linear(64, 1))

        def forward(self, observations):                 # [batch, *observation_space.shape]
            x = self.decode(observations)                # float32 [batch, size]
            return self.actor(x), self.critic(x).squeeze(-1)   # params [batch, head.size], value [batch]

    ppo.train(config, env, policy=MyPolicy)               # puffercore train ENV --policy my_module:MyPolicy

The rules:

- Built as `policy(observation_space, action_space, observation_tree)`: the vector's
  `single_observation_space` (a Box of flat rows, in the env's dtype: uint8 stays uint8)
  and `single_action_space`, and its `observation_tree` (`puffercore.spaces.SpaceTree`)
  when the observation is structured, else None. Settings of your own:
  `functools.partial(MyPolicy, width=256)`.
- Observations arrive as those rows. `self.decode(observations)` gives them as floats
  ([batch, self.decoded_size]), which is what the example does: a Box's values cast,
  and a Dict or Tuple of mixed dtypes read leaf by leaf. Such a space's rows are raw
  bytes (`Box(0, 255, (n,), uint8)`: a float32 leaf is 4 of them), so `.float()` on
  them gives byte values, not the observation; a policy whose float layer gets those
  bytes is warned at its first forward. To treat leaves apart,
  `self.observation_tree.unflatten(observations)` gives the Dict's structure with each
  leaf a view in its own dtype, e.g. `leaves["position"].float()` [batch, *leaf shape].
- `forward(observations)` returns `(params, value)`; a recurrent policy's
  `forward(observations, state)` returns `(params, value, new_state)` and it defines
  `initial_state(batch, device)`: a tuple of zero tensors, each [batch, ...], the state
  at the start of an episode (the framework zeroes a row's state when its episode ends;
  training replays whole rows in order, as collection ran them).
- params are logits for Discrete actions (`head.size` = n), one block per dimension
  for MultiDiscrete (`head.size` = sum of nvec), the Gaussian's mean for Box actions,
  whose state-independent log std is the base's `log_std` parameter. `value` is [batch].
- Action masks are the framework's: a policy returns logits as its network computes
  them, and `output` (what every caller of a policy uses) sets the logits of the
  actions that the observation's `action_mask` leaf rules out to the dtype's minimum,
  so they are never sampled nor taken greedily, in training, eval and export alike.
- Optional: `parameter_groups()` (parameters clipped apart, e.g. {"actor": ..,
  "critic": ..}; default one group), and `critic`, the nn.Linear with one output that
  `value_norm` (PopArt) rescales.

`ppo.default_policy.DefaultPolicy` (MLP, LSTM, Nature CNN, from PPOConfig's policy
fields) is one such policy. A checkpoint records its policy's name (`module:Class`, or
"builtin" for DefaultPolicy) and spaces, never code: resuming, evaluating or loading a
run of your own policy takes the policy from you again (`ppo.parts.resolve_saved_policy`).
Distributions are written out by hand so that sampling takes a `torch.Generator`: the
trainer's random stream is one named, checkpointable generator, not torch's global state.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import NamedTuple

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from puffercore.spaces import action_mask_leaf


class PolicyOutput(NamedTuple):
    params: torch.Tensor  # logits (masked) or Gaussian means, [batch, head size]
    value: torch.Tensor  # [batch]
    state: tuple[torch.Tensor, ...] | None  # the recurrent state after this step


class ActionHead:
    """Sampling, log-probabilities, entropies and greedy actions for one flat action space.

    Discrete and MultiDiscrete actions are categorical over logits (one block of logits
    per MultiDiscrete dimension, independent); `start` offsets are added so actions are
    the env's values. Box actions are a Gaussian with a state-independent log-std; the
    sampled (unclipped) action is what log-probabilities refer to, and `to_env` clips it
    to the bounds (clipping inside the distribution would bias its log-probability)."""

    def __init__(self, action_space: gymnasium.Space):
        self.space = action_space
        if isinstance(action_space, spaces.Discrete):
            self.nvec = [int(action_space.n)]
            self.start = torch.tensor([int(action_space.start)])
        elif isinstance(action_space, spaces.MultiDiscrete):
            if action_space.nvec.ndim != 1:
                raise ValueError(f"MultiDiscrete action spaces must be 1-D, got nvec shape {action_space.nvec.shape}")
            self.nvec = [int(n) for n in action_space.nvec]
            self.start = torch.as_tensor(action_space.start, dtype=torch.int64)
        elif isinstance(action_space, spaces.Box):
            if len(action_space.shape) != 1:
                raise ValueError(f"Box action spaces must be 1-D, got shape {action_space.shape}")
            self.nvec = None
            self.low = torch.as_tensor(action_space.low, dtype=torch.float32)
            self.high = torch.as_tensor(action_space.high, dtype=torch.float32)
        else:
            raise TypeError(f"action space must be Discrete, MultiDiscrete or Box, got {action_space}")
        self.is_continuous = self.nvec is None
        self.size = int(action_space.shape[0]) if self.is_continuous else sum(self.nvec)
        # Stored per step in rollouts: one int per categorical dimension, or the Box vector.
        self.action_shape = () if isinstance(action_space, spaces.Discrete) else (len(self.nvec or action_space.low),)
        self.action_dtype = torch.float32 if self.is_continuous else torch.int64
        self._constants: dict[torch.device, dict[str, torch.Tensor]] = {}

    def sample(self, params: torch.Tensor, log_std: torch.Tensor | None, generator: torch.Generator):
        noise = self.noise(params.shape[0], params.device)
        self.draw(noise, generator)
        return self.sample_with(params, log_std, noise)

    def noise(self, batch: int, device) -> list[torch.Tensor]:
        """Buffers for the random numbers a sample of `batch` rows takes (`draw` fills
        them): the Gaussian's normals, or a block of Exp(1) draws per categorical
        dimension. Apart from `sample_with` so that a CUDA graph replays the sampling on
        noise drawn outside it (ppo.device_rollout)."""
        if self.is_continuous:
            return [torch.empty(batch, self.size, device=device)]
        return [torch.empty(batch, n, device=device) for n in self.nvec]

    def draw(self, noise: list[torch.Tensor], generator: torch.Generator) -> None:
        """`noise` filled in place from `generator`, as torch.randn would, or as
        torch.multinomial's one-sample path does (an Exp(1) draw per probability): the
        same numbers from the same generator state."""
        for block in noise:
            if self.is_continuous:
                block.normal_(generator=generator)
            else:
                block.exponential_(generator=generator)

    def sample_with(self, params: torch.Tensor, log_std: torch.Tensor | None, noise: list[torch.Tensor]):
        """(actions, log_prob) from `noise` (`draw`): the Gaussian's mean plus std times
        the normals; per categorical dimension argmax(p / q) over Exp(1) draws q, which
        is a sample of p (torch.multinomial's own one-sample algorithm)."""
        if self.is_continuous:
            actions = params + log_std.exp() * noise[0]
            return actions, self.evaluate(params, log_std, actions)[0]
        indices, log_prob = [], []
        for logits, exponentials in zip(params.split(self.nvec, dim=-1), noise):
            log_probs = torch.log_softmax(logits, dim=-1)
            index = (log_probs.exp() / exponentials).argmax(-1, keepdim=True)
            indices.append(index.squeeze(-1))
            log_prob.append(log_probs.gather(-1, index).squeeze(-1))
        return self._actions(indices, params.device), _total(log_prob)

    def greedy(self, params: torch.Tensor) -> torch.Tensor:
        """The most likely action of each row: the argmax of each block of logits, or the
        Gaussian's mean (before `to_env`'s clipping)."""
        if self.is_continuous:
            return params
        return self._actions([logits.argmax(-1) for logits in params.split(self.nvec, dim=-1)], params.device)

    def _actions(self, indices: list[torch.Tensor], device) -> torch.Tensor:
        actions = torch.stack(indices, dim=-1) + self._on(device)["start"]
        return actions if self.action_shape else actions.squeeze(-1)

    def _on(self, device) -> dict[str, torch.Tensor]:
        """The head's constants (Discrete starts, Box bounds) on `device`, copied once: a
        copy from pageable host memory inside a step is a sync, which CUDA graph capture
        refuses."""
        device = torch.device(device)
        if device not in self._constants:
            names = ("low", "high") if self.is_continuous else ("start",)
            self._constants[device] = {name: getattr(self, name).to(device) for name in names}
        return self._constants[device]

    def evaluate(self, params: torch.Tensor, log_std: torch.Tensor | None, actions: torch.Tensor):
        """(log_prob, entropy) of `actions` under `params`, each [batch]."""
        if self.is_continuous:
            log_std = log_std.expand_as(params)
            log_prob = -0.5 * ((actions - params) / log_std.exp()) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
            entropy = 0.5 + 0.5 * math.log(2 * math.pi) + log_std
            return log_prob.sum(-1), entropy.sum(-1)
        indices = (actions.reshape(actions.shape[0], -1) - self.start.to(actions.device)).long()
        log_prob, entropy = [], []
        for dim, logits in enumerate(params.split(self.nvec, dim=-1)):
            log_probs = torch.log_softmax(logits, dim=-1)
            log_prob.append(log_probs.gather(-1, indices[:, dim : dim + 1]).squeeze(-1))
            # Masked logits give probability 0 and a huge negative log-prob; 0 * that is 0.
            entropy.append(-(log_probs.exp() * log_probs).sum(-1))
        return _total(log_prob), _total(entropy)

    def to_env(self, actions: torch.Tensor | np.ndarray) -> np.ndarray:
        """The env's actions from the head's: a tensor, or the NumPy array of the native
        policy (`ppo.native_mlp`); Box actions clipped to the space."""
        if isinstance(actions, np.ndarray):
            if self.is_continuous:
                return np.maximum(np.minimum(actions, self.high.numpy()), self.low.numpy())
            return actions.astype(np.int32)
        return self.env_tensor(actions).cpu().numpy()

    def env_tensor(self, actions: torch.Tensor) -> torch.Tensor:
        """The env's actions as a tensor where `actions` are: Box actions clipped to the
        space, categorical ones as int32."""
        if self.is_continuous:
            bounds = self._on(actions.device)
            return torch.maximum(torch.minimum(actions, bounds["high"]), bounds["low"])
        return actions.to(torch.int32)


def _total(terms: list[torch.Tensor]) -> torch.Tensor:
    """The sum of per-dimension terms; one Discrete dimension's term as it is (no op)."""
    return functools.reduce(torch.add, terms)


class ActorCritic(nn.Module):
    """The base of every PPO policy (see the module docstring): the action head, the
    log std of Box actions, the action mask and the checks on what `forward` returns.
    Subclasses write `__init__` (calling this one first) and `forward`."""

    def __init__(self, observation_space: spaces.Box, action_space: gymnasium.Space, observation_tree=None,
                 log_std_init: float = 0.0):
        super().__init__()
        self.observation_space, self.observation_tree = observation_space, observation_tree
        self.head = ActionHead(action_space)
        self.mask_leaf = action_mask_leaf(observation_tree)
        if self.mask_leaf is not None and self.head.size != int(np.prod(self.mask_leaf.shape)):
            raise ValueError(
                f"the action_mask leaf has {int(np.prod(self.mask_leaf.shape))} entries but the action space "
                f"{action_space} has {self.head.size} logits"
            )
        # State-independent log std of Box actions; 0 (std 1) as CleanRL, or lower for
        # less exploration noise at the start (rl-zoo's MuJoCo settings use -2).
        self.log_std = nn.Parameter(torch.full((self.head.size,), float(log_std_init))) if self.head.is_continuous else None
        self._packs_bytes = observation_tree is not None and observation_tree.is_bytes
        self.decoded_size = sum(int(np.prod(leaf.shape)) for leaf in observation_tree.leaves) if self._packs_bytes \
            else int(np.prod(observation_space.shape))
        self._inputs_checked = not self._packs_bytes

    def decode(self, observations: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The observations as `dtype` values, [batch, decoded_size]: the rows cast, or,
        when they pack a structure's leaves of mixed dtypes as bytes, each leaf read in
        its own dtype, then cast (leaves in the order of `observation_tree.leaves`)."""
        if not self._packs_bytes:
            return observations.reshape(observations.shape[0], -1).to(dtype)
        leaves = _flatten_structure(self.observation_tree.unflatten(observations))
        return torch.cat([leaf.reshape(leaf.shape[0], -1).to(dtype) for leaf in leaves], dim=-1)

    def forward(self, observations: torch.Tensor, state=None):
        raise NotImplementedError(f"{type(self).__name__} must define forward(observations[, state]) returning "
                                  f"(params, value) (see puffercore.ppo.policy)")

    def initial_state(self, batch: int, device) -> tuple[torch.Tensor, ...] | None:
        """The recurrent state of `batch` rows at an episode's start (zeros), or None."""
        return None

    def parameter_groups(self) -> dict[str, list[nn.Parameter]]:
        """Parameters by the loss that trains them, for per-group gradient clipping."""
        return {"": list(self.parameters())}

    def output(self, observations: torch.Tensor, state=None) -> PolicyOutput:
        """`forward`'s results as a PolicyOutput, checked, with the action mask applied:
        what the trainer, evaluation and deployment call."""
        # Not while export or torch.compile traces the forward (is_compiling: torch >= 2.3).
        if self._inputs_checked or torch.jit.is_tracing() or getattr(torch.compiler, "is_compiling", bool)():
            result = self(observations) if state is None else self(observations, state)
        else:
            result = self._first_forward(observations, state)
        name = type(self).__name__
        if not isinstance(result, tuple) or len(result) not in (2, 3):
            raise TypeError(f"{name}.forward must return (params, value) or (params, value, state), got "
                            f"{type(result).__name__}")
        params, value = result[0], result[1]
        new_state = result[2] if len(result) == 3 else None
        batch = observations.shape[0]
        if params.shape != (batch, self.head.size):
            raise ValueError(f"{name}.forward returned params of shape {tuple(params.shape)} for {batch} observations; "
                             f"expected ({batch}, {self.head.size}): {self.head.size} per row for {self.head.space}")
        if value.shape != (batch,):
            raise ValueError(f"{name}.forward returned a value of shape {tuple(value.shape)} for {batch} observations; "
                             f"expected ({batch},), one per row (squeeze the critic's last dimension)")
        if state is not None and new_state is None:
            raise ValueError(f"{name}.forward was given a recurrent state and returned none: a recurrent policy "
                             f"returns (params, value, new_state)")
        # float32 whatever the forward computed in (bf16 under the update's autocast): the
        # log-probabilities and the loss are taken in float32.
        return PolicyOutput(self.masked(observations, params.float()), value.float(), new_state)

    def _first_forward(self, observations: torch.Tensor, state):
        """`forward`, watching its float layers once: one that gets the packed bytes of a
        mixed-dtype structure as numbers (`observations.float()`) earns a warning."""
        raw, warned = observations.reshape(observations.shape[0], -1), []
        if self.decoded_size == raw.shape[-1] and torch.equal(self.decode(observations), raw.float()):
            warned.append(None)  # these bytes are the leaves' values (no leaf wider than a byte)

        def check(layer, inputs):
            value = inputs[0] if inputs and isinstance(inputs[0], torch.Tensor) else None
            if not warned and value is not None and value.is_floating_point() and value.shape == raw.shape \
                    and torch.equal(value, raw.to(value.dtype)):
                warned.append(layer)
                warnings.warn(
                    f"{type(self).__name__}'s {layer} gets the observations' raw bytes: this space's leaves have "
                    f"mixed dtypes, so each row packs them as {raw.shape[-1]} uint8 bytes. Use self.decode("
                    f"observations) ({self.decoded_size} floats) or self.observation_tree.unflatten(observations) "
                    f"(see puffercore.ppo.policy)", stacklevel=2)

        hooks = [module.register_forward_pre_hook(check) for module in self.modules()
                 if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.LSTM, nn.LSTMCell, nn.GRU))]
        try:
            result = self(observations) if state is None else self(observations, state)
        finally:
            for hook in hooks:
                hook.remove()
        self._inputs_checked = True
        return result

    def masked(self, observations: torch.Tensor, params: torch.Tensor) -> torch.Tensor:
        """`params` with the logits of the actions the observations' action mask rules out
        at the dtype's minimum (probability exactly 0); `params` itself without a mask."""
        if self.mask_leaf is None:
            return params
        mask = observations[..., self.mask_leaf.start : self.mask_leaf.stop]
        if self.observation_tree.is_bytes:
            mask = mask.view(_torch_dtype(self.mask_leaf.dtype))
        return params.masked_fill(mask.reshape(params.shape) == 0, torch.finfo(params.dtype).min)

    def sample(self, out: PolicyOutput, generator: torch.Generator):
        return self.head.sample(out.params, self.log_std, generator)

    def evaluate(self, out: PolicyOutput, actions: torch.Tensor):
        return self.head.evaluate(out.params, self.log_std, actions)


def restart_ended(state: tuple[torch.Tensor, ...] | None, ended: torch.Tensor):
    """The recurrent `state` with the rows whose episode `ended` ([batch] bool) back at
    the initial (zero) state; None stays None."""
    if state is None:
        return None
    keep = (~ended).to(state[0].dtype)
    return tuple(part * keep.reshape(-1, *[1] * (part.dim() - 1)) for part in state)


def _flatten_structure(structure) -> list:
    """The leaves of an unflattened observation (nested dicts and tuples), in order."""
    if isinstance(structure, dict):
        return [leaf for value in structure.values() for leaf in _flatten_structure(value)]
    if isinstance(structure, tuple):
        return [leaf for value in structure for leaf in _flatten_structure(value)]
    return [structure]


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype)).dtype
