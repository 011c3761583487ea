"""PopArt value normalization (van Hasselt et al. 2016), `PPOConfig(value_norm=True)`:
the critic learns returns scaled by their running mean and std, and whenever those
statistics move, its output layer is rescaled so its predictions in return units do not.
Off by default: on the gymnasium tasks the defaults solve, PPO's per-minibatch advantage
normalization and the separate critic already keep the scales apart.

    popart = PopArt(value_layer(policy))               # policy.critic
    values = popart.denormalize(policy.output(obs).value)   # return units, for GAE
    popart.update(returns)                             # new statistics, critic rescaled
    loss on popart.normalize(returns)
"""

from __future__ import annotations

from typing import Any

import torch

from puffercore.distributed import Group
from puffercore.transforms import RunningMeanStd


class PopArt:
    def __init__(self, head: torch.nn.Linear, epsilon: float = 1e-8):
        if not isinstance(head, torch.nn.Linear) or head.out_features != 1:
            raise ValueError(f"PopArt needs the critic's output layer (Linear with one output), got {head}")
        self.head, self.epsilon = head, epsilon
        self.stats = RunningMeanStd()

    @property
    def mean(self) -> float:
        return float(self.stats.mean)

    @property
    def std(self) -> float:
        return float((self.stats.var + self.epsilon) ** 0.5)

    def denormalize(self, values: torch.Tensor) -> torch.Tensor:
        return values * self.std + self.mean

    def normalize(self, values: torch.Tensor) -> torch.Tensor:
        return (values - self.mean) / self.std

    @torch.no_grad()
    def update(self, returns: torch.Tensor, group: Group | None = None) -> None:
        """Fold `returns` (every rank's, under torchrun: `group`) into the statistics and
        rescale the head: with (mu, sigma) -> (mu', sigma'), W' = W sigma / sigma' and
        b' = (sigma b + mu - mu') / sigma', so sigma' (W' h + b') + mu' = sigma (W h + b) + mu
        for every input h."""
        old_mean, old_std = self.mean, self.std
        wide = returns.detach().double().ravel()
        count, total, squares = (group or Group()).sum(torch.stack([
            torch.tensor(float(wide.numel()), dtype=torch.float64, device=wide.device), wide.sum(),
            (wide * wide).sum()])).tolist()
        if count == 0:
            return
        mean = total / count
        self.stats.update_from_moments(mean, max(squares / count - mean * mean, 0.0), count)
        new_mean, new_std = self.mean, self.std
        self.head.weight.mul_(old_std / new_std)
        self.head.bias.mul_(old_std).add_(old_mean - new_mean).div_(new_std)

    def state_dict(self) -> dict[str, Any]:
        return self.stats.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stats.load_state_dict(state)


def value_layer(policy: torch.nn.Module) -> torch.nn.Linear:
    """The layer PopArt rescales: the policy's `critic`, an nn.Linear with one output that
    is its value (`ppo.policy.ActorCritic`); ValueError naming the policy without one."""
    layer = getattr(policy, "critic", None)
    if not isinstance(layer, torch.nn.Linear) or layer.out_features != 1:
        raise ValueError(f"value_norm (PopArt) needs the policy's value layer as `critic`, an nn.Linear with one "
                         f"output whose output is the value; {type(policy).__name__}.critic is {type(layer).__name__}")
    return layer
