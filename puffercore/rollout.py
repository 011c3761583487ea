"""PPO's rollout storage: preallocated `[rows, horizon + 1, ...]` tensors, views of
its transitions, minibatches over them and prioritized row sampling.

    rollout = allocate_rollout(rows, horizon, vec.single_observation_space, policy, device)
    batch = transition_view(rollout, flatten=True)        # [rows * horizon, ...] views
    for minibatch in iterate_minibatches(batch, 256, generator): ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import numpy as np
import torch

if TYPE_CHECKING:
    from puffercore.models import Policy

# obs, value and mask have one entry per observation (slot T: the bootstrap); the other
# [N, T + 1] fields are per transition, and their slot T is padding (the trainer parks
# the next rollout's first action there).
ROW_FIELDS = ("state_h", "state_c")  # LSTM state at slot 0, [N, hidden]


def allocate_rollout(rows: int, horizon: int, observation_space, policy: "Policy", device) -> dict[str, torch.Tensor]:
    """Preallocated `[rows, horizon + 1, ...]` rollout on `device`."""
    slots = (rows, horizon + 1)
    obs_dtype = torch.from_numpy(np.empty(0, observation_space.dtype)).dtype
    head = policy.head
    rollout = {
        "obs": torch.zeros(*slots, *observation_space.shape, dtype=obs_dtype, device=device),
        "value": torch.zeros(slots, device=device),
        "mask": torch.zeros(slots, dtype=torch.bool, device=device),
        "action": torch.zeros(*slots, *head.action_shape, dtype=head.action_dtype, device=device),
        "log_prob": torch.zeros(slots, device=device),
        "reward": torch.zeros(slots, device=device),
        "terminal": torch.zeros(slots, dtype=torch.bool, device=device),
        "truncation": torch.zeros(slots, dtype=torch.bool, device=device),
        "final_value": torch.zeros(slots, device=device),
    }
    if policy.lstm is not None:
        rollout["state_h"] = torch.zeros(rows, policy.hidden_size, device=device)
        rollout["state_c"] = torch.zeros(rows, policy.hidden_size, device=device)
    return rollout


def transition_view(rollout: dict[str, torch.Tensor], flatten: bool = False) -> dict[str, torch.Tensor]:
    """The first T steps of every `[N, T + 1, ...]` field (transition-aligned: obs/value
    at t with the action, reward and flags of transition t), plus fields that are already
    `[N, T]` (advantage, return) and per-row fields (LSTM state). `flatten`: merge N and
    T into one leading dim (per-row fields are left out)."""
    horizon = rollout["reward"].shape[1] - 1
    view = {}
    for name, tensor in rollout.items():
        if name in ROW_FIELDS:
            if not flatten:
                view[name] = tensor
            continue
        if tensor.shape[1] == horizon + 1:
            tensor = tensor[:, :horizon]
        view[name] = tensor.reshape(-1, *tensor.shape[2:]) if flatten else tensor
    return view


def iterate_minibatches(batch: dict[str, torch.Tensor], minibatch_size: int, generator: torch.Generator,
                        order: torch.Tensor | None = None) -> Iterator[dict[str, torch.Tensor]]:
    """Minibatches over the leading dim of every field (transitions of a flattened view,
    or rows of an unflattened one): in `order` (default a fresh shuffle), `minibatch_size`
    at a time, the last one possibly smaller. Each minibatch also carries "index", the
    positions it took."""
    count = next(iter(batch.values())).shape[0]
    if order is None:
        device = next(iter(batch.values())).device
        order = torch.randperm(count, generator=generator).to(device)
    for start in range(0, len(order), minibatch_size):
        index = order[start : start + minibatch_size]
        yield {"index": index, **{name: tensor[index] for name, tensor in batch.items()}}


def row_priorities(advantages: torch.Tensor, mask: torch.Tensor, alpha: float, beta: float):
    """Prioritized rows: sampling probabilities p ~ (sum_t |A|)^alpha over the rows of
    `advantages` [N, T] (padding entries excluded), and importance weights (N p)^-beta
    normalised by their max (rows with p = 0 are never drawn; their weight is 0)."""
    priority = (advantages.abs() * mask).sum(1).pow(alpha)
    total = priority.sum()
    probability = priority / total if total > 0 else torch.full_like(priority, 1.0 / len(priority))
    weights = torch.where(probability > 0, (len(probability) * probability).pow(-beta), torch.zeros_like(probability))
    return probability, weights / weights.max()
