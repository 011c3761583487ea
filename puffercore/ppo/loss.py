"""The PPO objective on one minibatch (Schulman et al. 2017, with the implementation
details of Huang et al. 2022): clipped surrogate, clipped value loss, entropy bonus.

    losses = ppo_loss(new_log_prob, entropy, new_value, minibatch, config)
    losses["loss"].backward()
"""

from __future__ import annotations

import torch

from puffercore.ppo.config import PPOConfig
from puffercore.distributed import Group


def ppo_loss(new_log_prob: torch.Tensor, entropy: torch.Tensor, new_value: torch.Tensor, batch: dict[str, torch.Tensor],
             config: PPOConfig, weights: torch.Tensor | None = None, group: Group | None = None) -> dict[str, torch.Tensor]:
    """The PPO objective on one minibatch (flat [B] tensors): the clipped surrogate on
    advantages normalized over the minibatch (`norm_adv`), the value loss clipped around
    the old values (`clip_vloss`), the entropy bonus; padding rows (mask False) are left
    out of every mean. `batch` holds the rollout's log_prob, advantage, return, value,
    and mask (left out when every row is live: plain means, fewer ops); `weights`:
    importance weights of prioritized rows; `group`: the ranks whose minibatches together
    normalize the advantages (global mean and std). Returns the loss and its parts with
    approx KL and the clip fraction (both detached)."""
    live = batch.get("mask")
    if live is None:
        masked_mean = torch.mean
    else:
        live = live.float()
        count = live.sum().clamp(min=1.0)

        def masked_mean(x):
            return (x * live).sum() / count

    log_ratio = new_log_prob - batch["log_prob"]
    ratio = log_ratio.exp()
    advantages = batch["advantage"]
    if config.norm_adv:
        mean, std = global_mean_std(advantages, live, group or Group())
        advantages = (advantages - mean) / (std + 1e-8)
    if weights is not None:
        advantages = advantages * weights
    policy_loss = masked_mean(torch.max(-advantages * ratio,
                                        -advantages * ratio.clamp(1 - config.clip_coef, 1 + config.clip_coef)))
    if config.clip_vloss:
        clipped = batch["value"] + (new_value - batch["value"]).clamp(-config.clip_coef, config.clip_coef)
        value_loss = 0.5 * masked_mean(torch.max((new_value - batch["return"]) ** 2, (clipped - batch["return"]) ** 2))
    else:
        value_loss = 0.5 * masked_mean((new_value - batch["return"]) ** 2)
    entropy_loss = masked_mean(entropy)
    loss = policy_loss - config.ent_coef * entropy_loss + config.vf_coef * value_loss
    with torch.no_grad():
        approx_kl = masked_mean((ratio - 1) - log_ratio)
        clip_fraction = masked_mean(((ratio - 1).abs() > config.clip_coef).float())
    return {"loss": loss, "policy": policy_loss.detach(), "value": value_loss.detach(),
            "entropy": entropy_loss.detach(), "approx_kl": approx_kl, "clip_fraction": clip_fraction}


def global_mean_std(values: torch.Tensor, live: torch.Tensor | None, group: Group) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std of the live entries of `values` (None: all) over every rank's
    minibatch (moments summed in float64, so E[x^2] - mean^2 loses nothing that matters;
    one process's whole minibatch: torch's one-op two-pass std_mean instead of eight ops)."""
    if live is None and group.world_size == 1:
        with torch.no_grad():
            std, mean = torch.std_mean(values, correction=0)
        return mean, std
    with torch.no_grad():
        wide = values.double()
        if live is None:
            count = torch.full((), wide.numel(), dtype=wide.dtype, device=wide.device)
            moments = group.sum(torch.stack([wide.sum(), (wide * wide).sum(), count]))
        else:
            weights = live.double()
            moments = group.sum(torch.stack([(wide * weights).sum(), (wide * wide * weights).sum(), weights.sum()]))
    count = moments[2].clamp(min=1.0)
    mean = moments[0] / count
    std = (moments[1] / count - mean * mean).clamp(min=0.0).sqrt()
    return mean.to(values.dtype), std.to(values.dtype)
