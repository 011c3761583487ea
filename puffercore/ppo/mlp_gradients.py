"""The PPO loss of one minibatch and its gradients, written out by hand for the default
MLP policy: the update's fast path where autograd's bookkeeping is most of the cost.

    gradients = MLPGradients.for_policy(policy, optimizer, config)   # None: not this policy
    losses = gradients(minibatch)   # ppo_loss's scalars; every parameter's gradient written

A small MLP's update is launch-bound: autograd launches hundreds of ops a minibatch, a
few microseconds each, around matmuls that take less (bench/bench_update.py --compare
backward; docs/experiments/2026-11-ppo-update.md). The loss of a
tanh or ReLU MLP with a categorical or Gaussian head has a short closed-form gradient:

    d log p(a) / d logits = onehot(a) - p          d H / d logits = -p (log p + H)
    Gaussian, z = (a - mean) / sigma:  d log p / d mean = z / sigma,  d log p / d log sigma = z^2 - 1
    d surrogate / d log p(a) = -A ratio where the unclipped term is the max, else 0
    d value loss / d v = (v - R) where the unclipped term is the max, else 0
    linear layer: dW = dz^T h, db = sum(dz), dh = dz W;   tanh: dz = dh (1 - h^2)

so the update is two native calls around the loss: the actor's and critic's forward and
backward in C (`puffercore.ppo.native_mlp`, which collection uses too), each layer's
gradient written straight into the optimizer's flat gradient buffer, and the loss with
its gradient with respect to the head's outputs and the value in one pass over the rows
(`native/ppo/loss.pyx`), where torch would launch some 50 elementwise ops. It is the
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

import numpy as np
import torch

from puffercore.ppo._native import loss as native_loss
from puffercore.distributed import Group
from puffercore.ppo.config import PPOConfig
from puffercore.ppo.flat_adam import FlatAdam
from puffercore.ppo.loss import global_mean_std
from puffercore.ppo.native_mlp import NativeMLPPolicy
from puffercore.ppo.plan import UpdatePlan

# ppo_loss's scalars, in its order
LOSS_NAMES = ("loss", "policy", "value", "entropy", "approx_kl", "clip_fraction")


class MLPGradients:
    """Loss and gradients of a DefaultPolicy's minibatch; see the module docstring."""

    def __init__(self, native: NativeMLPPolicy, optimizer: FlatAdam, config: PPOConfig, group=None):
        self.native = native
        policy = native.policy
        gradient_of = {id(parameter): view for parameter, view in zip(optimizer.layout, optimizer.views)}
        native.set_gradients(gradient_of)
        self.log_std = policy.log_std  # a Box head's; None for a Discrete one
        if self.log_std is None:
            self.start = int(policy.head.space.start)
        else:
            self.log_std_gradient = gradient_of[id(self.log_std)]
        self.config, self.group = config, group or Group()
        self.no_rows = np.empty(0, np.float32)

    @classmethod
    def for_policy(cls, policy, optimizer: FlatAdam, config: PPOConfig, group=None) -> "MLPGradients | None":
        """The hand-derived gradients of `policy`, or None where its UpdatePlan
        (ppo.plan) takes autograd."""
        if not UpdatePlan.make(policy, config, next(policy.parameters()).device).native_gradients:
            return None
        return cls(NativeMLPPolicy(policy), optimizer, config, group)

    @torch.no_grad()
    def __call__(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """`ppo_loss`'s scalars for the minibatch `batch` (obs, action, log_prob,
        advantage, return, value and, when some rows are padding, mask), one tensor in
        LOSS_NAMES order; every parameter's gradient is overwritten with the loss's."""
        config = self.config
        observations = batch["obs"].numpy()
        x = np.ascontiguousarray(observations.reshape(len(observations), -1), dtype=np.float32)
        advantage = batch["advantage"].numpy()
        row_weight = self.no_rows  # empty: every row 1 / rows of each mean
        live = batch.get("mask")
        if live is not None:
            live = live.float()
            row_weight = (live / live.sum().clamp(min=1.0)).numpy()
        mean, scale = 0.0, 1.0
        if config.norm_adv:
            if self.group.world_size == 1:  # this minibatch's moments
                mean, std = native_loss.moments(advantage, row_weight)
            else:  # every rank's
                mean, std = map(float, global_mean_std(batch["advantage"], live, self.group))
            scale = 1.0 / (std + 1e-8)

        logits, value = self.native.forward(x)
        d_logits, d_value = np.empty_like(logits), np.empty_like(value)
        scalars = torch.empty(len(LOSS_NAMES))
        rollout = (batch["log_prob"].numpy(), advantage, batch["return"].numpy(), batch["value"].numpy(),
                   row_weight, mean, scale, config.clip_coef, config.clip_vloss, config.vf_coef, config.ent_coef)
        if self.log_std is None:
            action = batch["action"].numpy().reshape(-1)
            if self.start or action.dtype != np.int64:
                action = (action - self.start).astype(np.int64)
            native_loss.categorical_loss(logits, value, action, *rollout, d_logits, d_value, scalars.numpy())
        else:  # the logits are the Gaussian's means
            native_loss.gaussian_loss(logits, self.log_std.detach().numpy(), value,
                                    np.ascontiguousarray(batch["action"].numpy()), *rollout, d_logits,
                                    self.log_std_gradient.numpy(), d_value, scalars.numpy())
        self.native.backward(d_logits, d_value)
        return scalars
