"""The PPO loss of one minibatch and its gradients, written out by hand for the default
MLP policy: the update's fast path where autograd's bookkeeping is most of the cost.

    gradients = MLPGradients.for_policy(policy, optimizer, config)   # None: not this policy
    losses = gradients(minibatch)   # ppo_loss's scalars; every parameter's gradient written

A small MLP's update is launch-bound: for the CartPole preset's 32-wide actor and
critic, autograd launched about 790 ops a minibatch, a few microseconds each, around
matmuls that take less (docs/design.md, "Where a PPO update's time goes"). The loss of a
tanh or ReLU MLP with a categorical or Gaussian head has a short closed-form gradient:

    d log p(a) / d logits = onehot(a) - p          d H / d logits = -p (log p + H)
    Gaussian, z = (a - mean) / sigma:  d log p / d mean = z / sigma,  d log p / d log sigma = z^2 - 1
    d surrogate / d log p(a) = -A ratio where the unclipped term is the max, else 0
    d value loss / d v = (v - R) where the unclipped term is the max, else 0
    linear layer: dW = dz^T h, db = sum(dz), dh = dz W;   tanh: dz = dh (1 - h^2)

so the update takes the matmuls and a few ops more (about 35 a minibatch, each
matmul written straight into the optimizer's flat gradient buffer), and the loss with
its gradient with respect to the head's outputs and the value is one pass over the rows in C
(`native/cpu/ppo_loss.pyx`), where torch would launch some 50 elementwise ops. It is the
same objective as `loss.ppo_loss` (advantages normalized over the minibatch, both clips,
the entropy bonus, padding rows left out of every mean), checked against autograd in the
tests; its bits differ from autograd's by float rounding (sums in another order), so a
seeded run reproduces exactly within one setting (`PPOConfig.backward`), not across
them. Ties of the clipped max go to the unclipped term, as autograd's half-and-half
split sums to. The heads' outputs are kept transposed, [actions, rows].

What it covers: `DefaultPolicy` with separate MLP actor and critic (tanh or ReLU) on
flat observations, one Discrete action without an action mask or a 1-D Box action (a
Gaussian with the policy's state-independent log std), float32 on the CPU (on a
GPU the launches are what CUDA graphs and torch.compile address), rows taken as
transitions (not a recurrent policy's or prioritized rows). Anything else takes autograd.
"""

from __future__ import annotations

import torch
from gymnasium import spaces
from torch import nn

from puffercore import _ppo_loss
from puffercore.distributed import Group
from puffercore.ppo.config import PPOConfig
from puffercore.ppo.default_policy import DefaultPolicy
from puffercore.ppo.flat_adam import FlatAdam
from puffercore.ppo.loss import global_mean_std

# ppo_loss's scalars, in its order
LOSS_NAMES = ("loss", "policy", "value", "entropy", "approx_kl", "clip_fraction")
ACTIVATIONS = (nn.Tanh, nn.ReLU)


class MLPGradients:
    """Loss and gradients of a DefaultPolicy's minibatch; see the module docstring."""

    def __init__(self, policy: DefaultPolicy, optimizer: FlatAdam, config: PPOConfig, group=None):
        self.actor = _linear_layers(policy.encoder) + [policy.actor]
        self.critic = _linear_layers(policy.critic_encoder) + [policy.critic]
        self.relu = isinstance(policy.encoder[1], nn.ReLU)
        gradient_of = {id(parameter): view for parameter, view in zip(optimizer.layout, optimizer.views)}
        self.log_std = policy.log_std  # a Box head's; None for a Discrete one
        if self.log_std is None:
            self.start = int(policy.head.space.start)
        else:
            self.log_std_gradient = gradient_of[id(self.log_std)]
        self.actor_gradients = [(gradient_of[id(layer.weight)], gradient_of[id(layer.bias)]) for layer in self.actor]
        self.critic_gradients = [(gradient_of[id(layer.weight)], gradient_of[id(layer.bias)]) for layer in self.critic]
        self.config, self.group = config, group or Group()
        self.no_rows = torch.empty(0)

    @classmethod
    def for_policy(cls, policy, optimizer: FlatAdam, config: PPOConfig, group=None) -> "MLPGradients | None":
        """The hand-derived gradients of `policy`, or None where they do not apply (see the
        module docstring) or `config.backward` is "autograd"."""
        if config.backward != "auto" or not isinstance(policy, DefaultPolicy):
            return None
        if config.prio_alpha > 0:  # whole rows sampled by priority, weighted: autograd's loss
            return None
        if policy.image_shape is not None or policy.lstm is not None or policy.critic_encoder is None \
                or policy.decode_leaves or policy.mask_leaf is not None:
            return None
        if not isinstance(policy.head.space, (spaces.Discrete, spaces.Box)) or policy.actor.weight.dtype != torch.float32 \
                or policy.actor.weight.device.type != "cpu":
            return None
        if not _plain_mlp(policy.encoder) or not _plain_mlp(policy.critic_encoder):
            return None
        return cls(policy, optimizer, config, group)

    @torch.no_grad()
    def __call__(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """`ppo_loss`'s scalars for the minibatch `batch` (obs, action, log_prob,
        advantage, return, value and, when some rows are padding, mask); every
        parameter's gradient is overwritten with the loss's."""
        config = self.config
        observations = batch["obs"]
        x = observations.reshape(observations.shape[0], -1).to(torch.float32)
        live = batch.get("mask")
        row_weight = self.no_rows  # empty: every row 1 / rows of each mean
        if live is not None:
            live = live.float()
            row_weight = live / live.sum().clamp(min=1.0)
        mean, scale = 0.0, 1.0
        if config.norm_adv:
            mean, std = global_mean_std(batch["advantage"], live, self.group)
            mean, scale = float(mean), 1.0 / (float(std) + 1e-8)

        actor_inputs, logits = self._forward(self.actor, x)
        critic_inputs, value = self._forward(self.critic, x)
        d_logits, d_value = torch.empty_like(logits), torch.empty_like(value)
        scalars = torch.empty(6)
        rollout = (batch["log_prob"].numpy(), batch["advantage"].numpy(), batch["return"].numpy(),
                   batch["value"].numpy(), row_weight.numpy(), mean, scale, config.clip_coef, config.clip_vloss,
                   config.vf_coef, config.ent_coef)
        if self.log_std is None:
            index = (batch["action"].reshape(-1) - self.start).long()
            _ppo_loss.categorical_loss(logits.numpy(), value[0].numpy(), index.numpy(), *rollout,
                                       d_logits.numpy(), d_value[0].numpy(), scalars.numpy())
        else:  # the logits are the Gaussian's means
            _ppo_loss.gaussian_loss(logits.numpy(), self.log_std.detach().numpy(), value[0].numpy(),
                                    batch["action"].contiguous().numpy(), *rollout, d_logits.numpy(),
                                    self.log_std_gradient.numpy(), d_value[0].numpy(), scalars.numpy())
        self._backward(self.actor, self.actor_gradients, actor_inputs, d_logits)
        self._backward(self.critic, self.critic_gradients, critic_inputs, d_value)
        return dict(zip(LOSS_NAMES, scalars.unbind()))

    def _forward(self, layers: list[nn.Linear], x: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Each layer's input (x, then the hidden activations) and the last layer's
        output, transposed: [outputs, rows]."""
        inputs = [x]
        for layer in layers[:-1]:
            hidden = torch.addmm(layer.bias, inputs[-1], layer.weight.t())
            inputs.append(hidden.relu_() if self.relu else hidden.tanh_())
        head = layers[-1]
        return inputs, torch.addmm(head.bias.unsqueeze(1), head.weight, inputs[-1].t())

    def _backward(self, layers: list[nn.Linear], gradients: list, inputs: list[torch.Tensor], d_head: torch.Tensor) -> None:
        """Write each layer's weight and bias gradients into the optimizer's views, from
        the gradient of the last layer's transposed output `d_head` [outputs, rows]."""
        head, (d_weight, d_bias) = layers[-1], gradients[-1]
        torch.mm(d_head, inputs[-1], out=d_weight)
        torch.sum(d_head, 1, out=d_bias)
        d_hidden = torch.mm(d_head.t(), head.weight)
        for below in range(len(layers) - 2, -1, -1):  # dz = dh * act'(h), from the activation h itself
            d_out = self._activation_backward(d_hidden, inputs[below + 1])
            d_weight, d_bias = gradients[below]
            torch.mm(d_out.t(), inputs[below], out=d_weight)
            torch.sum(d_out, 0, out=d_bias)
            if below:
                d_hidden = torch.mm(d_out, layers[below].weight)

    def _activation_backward(self, d_hidden: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        # torch's fused backward kernels: one pass instead of three (1 - h * h, then a product)
        if self.relu:
            return torch.ops.aten.threshold_backward(d_hidden, hidden, 0)
        return torch.ops.aten.tanh_backward(d_hidden, hidden)


def _linear_layers(mlp: nn.Sequential) -> list[nn.Linear]:
    return [module for module in mlp if isinstance(module, nn.Linear)]


def _plain_mlp(mlp: nn.Module) -> bool:
    """Linear, activation, Linear, activation, ... with one activation kind."""
    modules = list(mlp) if isinstance(mlp, nn.Sequential) else []
    if not modules or len(modules) % 2:
        return False
    linears, activations = modules[0::2], modules[1::2]
    return all(type(module) is nn.Linear for module in linears) and \
        all(type(module) in ACTIVATIONS for module in activations) and len({type(module) for module in activations}) == 1
