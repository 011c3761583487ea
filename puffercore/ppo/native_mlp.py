"""The default MLP policy's actor and critic run in C (`puffercore.ppo._native.mlp`, native/ppo/mlp.c):
collection's forward and sampling in one call, and the update's forward and backward.

    native = NativeMLPPolicy.for_policy(policy)   # None: not a policy this covers
    actions, log_prob, value = native.act(observations, generator)   # collection (NumPy arrays)
    value = native.values(final_observations)     # the critic alone
    params, value = native.forward(x)             # [head outputs, rows], [rows] (numpy)
    native.backward(d_params, d_value)            # into the gradients of set_gradients

A small MLP's forward in eager torch is a dozen module calls of a few microseconds each
around matmuls that take less, so C wins for policies up to 64 wide
(bench/bench_rollout_inference.py; docs/experiments/2026-11-ppo-update.md). The
parameters are read in place (numpy views of the torch parameters, renewed when a
parameter's storage moves), so every optimizer step is seen without a copy. A module or
parameter of the policy replaced after this object was made (`policy.actor = ...`) is
refused with a RuntimeError naming it, at the next call. NaN and inf pass through as in
torch (tanh(NaN) and relu(NaN) are NaN): a bad observation's row gets a NaN value and
log-probability.

What it covers (`unsupported` says why not): `DefaultPolicy` with separate MLP actor and critic (tanh or ReLU, hidden
layers up to MAX_WIDTH wide) on flat observations, one Discrete action without an action
mask or a 1-D Box action (the Gaussian with the policy's state-independent log std),
float32 parameters on the CPU. Discrete actions are drawn by the inverse of the
cumulative probabilities from one uniform a row (torch.rand on the trainer's generator),
where torch's multinomial draws differently: the same distribution, another sequence.
Box actions take torch.randn's normals as torch's path does, so they match it to
rounding.
"""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from puffercore.ppo._native.mlp import MLP
from puffercore.ppo.default_policy import DefaultPolicy

ACTIVATIONS = {nn.Tanh: "tanh", nn.ReLU: "relu"}
# Wider layers are matmul-bound, where MKL's kernels beat these: C wins up to 64 wide
# (bench/bench_rollout_inference.py --presets cartpole snake).
MAX_WIDTH = 64


class NativeMLPPolicy:
    """A DefaultPolicy's actor and critic as two `puffercore.ppo._native.mlp.MLP`s; see the module docstring."""

    def __init__(self, policy: DefaultPolicy):
        self.policy = policy
        self.actor_layers = linear_layers(policy.encoder) + [policy.actor]
        self.critic_layers = linear_layers(policy.critic_encoder) + [policy.critic]
        activation = ACTIVATIONS[type(policy.encoder[1])]
        self.parameters = [p for layer in self.actor_layers + self.critic_layers for p in (layer.weight, layer.bias)]
        self.actor = MLP(_views(self.actor_layers), activation)
        self.critic = MLP(_views(self.critic_layers), activation)
        self.pointers = [parameter.data_ptr() for parameter in self.parameters]
        self.slots = _slots(policy)
        self.held = [slot.get(key) for slot, key, _ in self.slots]  # kept alive: their ids stay theirs
        self.bound = self._slot_ids()
        head = policy.head
        self.start = None if head.is_continuous else int(head.space.start)

    @classmethod
    def for_policy(cls, policy) -> "NativeMLPPolicy | None":
        """The native actor and critic of `policy`, or None where they do not apply
        (`unsupported`)."""
        return None if unsupported(policy) else cls(policy)

    def set_gradients(self, gradient_of: dict[int, torch.Tensor]) -> None:
        """Where `backward` writes: `gradient_of` maps id(parameter) to its gradient
        tensor (an optimizer's flat-buffer views)."""
        for mlp, layers in ((self.actor, self.actor_layers), (self.critic, self.critic_layers)):
            mlp.set_gradients([(gradient_of[id(layer.weight)].numpy(), gradient_of[id(layer.bias)].numpy())
                               for layer in layers])

    def forward(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """x: float32 [rows, inputs] -> the head's outputs [outputs, rows] and the values [rows]."""
        self._renew_views()
        return self.actor.forward(x), self.critic.forward(x)[0]

    def backward(self, d_params: np.ndarray, d_value: np.ndarray) -> None:
        """From d loss / d the last forward's head outputs [outputs, rows] and values [rows]."""
        self.actor.backward(d_params)
        self.critic.backward(d_value.reshape(1, -1))

    def act(self, observations: np.ndarray, generator: torch.Generator):
        """Actions (the head's values, as `ActionHead.sample` gives them), their
        log-probabilities and the values of the observations' rows, as NumPy arrays."""
        rows = observations.shape[0]
        x = np.ascontiguousarray(observations.reshape(rows, -1), dtype=np.float32)
        _, value = self.forward(x)
        if self.start is None:
            normals = torch.randn((rows, self.actor.outputs), generator=generator).numpy()
            actions, log_prob = self.actor.sample_gaussian(self.policy.log_std.detach().numpy(), normals)
            return actions, log_prob, value
        uniforms = torch.rand(rows, generator=generator).numpy()
        indices, log_prob = self.actor.sample_categorical(uniforms)
        if self.start:
            indices += self.start
        return indices, log_prob, value

    def values(self, observations: np.ndarray) -> np.ndarray:
        """The critic's values of `observations` (rows of the env's observations): those
        of the final observations from which truncated episodes bootstrap."""
        self._renew_views()
        x = np.ascontiguousarray(observations.reshape(len(observations), -1), dtype=np.float32)
        return self.critic.forward(x)[0]

    def _slot_ids(self) -> list[int]:
        return [id(slot.get(key)) for slot, key, _ in self.slots]

    def _renew_views(self) -> None:
        """Numpy views of the parameters' current storage (an optimizer that gathers the
        parameters into one flat buffer moves them). A module or parameter of the policy
        replaced since this object was made is refused: the optimizer and the gradient
        buffers were built for the old ones, so rebinding would train a copy no one reads."""
        if self._slot_ids() != self.bound:
            changed = next(name for (_, _, name), now, then in zip(self.slots, self._slot_ids(), self.bound)
                           if now != then)
            raise RuntimeError(f"the policy's {changed} was replaced after its native MLP was made: make a new "
                               "Trainer (or NativeMLPPolicy) for the changed policy, or train with --train.inference "
                               "torch --train.backward autograd")
        pointers = [parameter.data_ptr() for parameter in self.parameters]
        if pointers != self.pointers:
            if not all(parameter.is_contiguous() for parameter in self.parameters):
                raise ValueError("the policy's parameters must stay contiguous for the native MLP")
            self.actor.set_parameters(_views(self.actor_layers))
            self.critic.set_parameters(_views(self.critic_layers))
            self.pointers = pointers


def unsupported(policy) -> str | None:
    """Why the native MLP does not cover `policy` (one phrase), or None where it does
    (see the module docstring)."""
    if not isinstance(policy, DefaultPolicy):
        return f"not the default policy ({type(policy).__name__})"
    if policy.image_shape is not None:
        return "image observations (the CNN encoder)"
    if policy.lstm is not None:
        return "an LSTM policy"
    if policy.critic_encoder is None:
        return "a shared actor-critic trunk"
    if policy.decode_leaves:
        return "observations decoded leaf by leaf (mixed dtypes)"
    if policy.mask_leaf is not None:
        return "an action mask"
    space = policy.head.space
    if not isinstance(space, (spaces.Discrete, spaces.Box)):
        return f"the action space {space} (one Discrete or a Box only)"
    odd = next((p for p in policy.parameters() if p.dtype != torch.float32 or p.device.type != "cpu"), None)
    if odd is not None:
        return f"parameters in {odd.dtype} on {odd.device} (float32 on the CPU only)"
    if not _plain_mlp(policy.encoder) or not _plain_mlp(policy.critic_encoder) \
            or type(policy.encoder[1]) is not type(policy.critic_encoder[1]):
        kinds = sorted({type(module).__name__ for module in [*policy.encoder, *policy.critic_encoder]})
        return f"an encoder of {', '.join(kinds)} (Linear layers with one tanh or ReLU activation only)"
    width = max(layer.out_features for layer in linear_layers(policy.encoder) + linear_layers(policy.critic_encoder))
    if width > MAX_WIDTH:
        return f"hidden layers {width} wide (at most {MAX_WIDTH})"
    return None


def _slots(policy: DefaultPolicy) -> list[tuple[dict, str, str]]:
    """The places (dict, key, the name as the policy spells it) that hold the modules and
    parameters the native MLP reads: what replacing one of them (`policy.actor = ...`,
    `policy.encoder[0] = ...`, `layer.weight = ...`) changes."""
    slots = [(policy._modules, name, name) for name in ("encoder", "critic_encoder", "actor", "critic")]
    for name in ("encoder", "critic_encoder"):
        sequential = getattr(policy, name)
        slots += [(sequential._modules, key, f"{name}.{key}") for key in sequential._modules]
        slots += [(layer._parameters, kind, f"{name}.{key}.{kind}") for key, layer in sequential._modules.items()
                  if isinstance(layer, nn.Linear) for kind in ("weight", "bias")]
    slots += [(getattr(policy, name)._parameters, kind, f"{name}.{kind}")
              for name in ("actor", "critic") for kind in ("weight", "bias")]
    return slots


def linear_layers(mlp: nn.Sequential) -> list[nn.Linear]:
    return [module for module in mlp if isinstance(module, nn.Linear)]


def _views(layers: list[nn.Linear]) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(layer.weight.detach().numpy(), layer.bias.detach().numpy()) for layer in layers]


def _plain_mlp(mlp: nn.Module) -> bool:
    """Linear, activation, Linear, activation, ... with one activation kind."""
    modules = list(mlp) if isinstance(mlp, nn.Sequential) else []
    if not modules or len(modules) % 2:
        return False
    linears, activations = modules[0::2], modules[1::2]
    return all(type(module) is nn.Linear for module in linears) and \
        all(type(module) in ACTIVATIONS for module in activations) and len({type(module) for module in activations}) == 1
