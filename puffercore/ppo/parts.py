"""What a PPO trainer is built from: the vector env (with the transforms the config asks
for), the policy and its optimizer; also used by evaluation.
"""

from __future__ import annotations

import os

import torch

from puffercore import env_sources
from puffercore.ppo.policy import Policy
from puffercore.ppo.config import PPOConfig
from puffercore.ppo.flat_adam import FlatAdam
from puffercore.transforms import FrameStack, Normalize


def transformed(vec, config: PPOConfig):
    """`vec` wrapped in the transforms `config` asks for: frame stacking, then
    normalization (of the stacked rows); `vec` itself when none."""
    if config.frame_stack > 1:
        vec = FrameStack(vec, config.frame_stack)
    if not (config.norm_obs or config.norm_reward):
        return vec
    return Normalize(vec, observations=config.norm_obs, rewards=config.norm_reward, gamma=config.gamma,
                     clip_observations=config.clip_obs, clip_rewards=config.clip_reward)


def make_vector(env, config: PPOConfig, seed: int):
    """The vector env of `env` (anything `puffercore.env_sources.resolve` takes) under `config`."""
    return env_sources.make_vector(env_sources.resolve(env), backend=config.backend, num_envs=config.num_envs,
                            num_workers=config.num_workers or None, batch_size=config.batch_size or None, seed=seed)


def free_cores(vec) -> int:
    """Torch threads: the cores left after the env workers and the main thread, which
    steps serial envs and hands batches to the engine (at least one). Oversubscribing
    makes torch's intra-op threads spin against the env workers: on 2 loaded cores, two
    torch threads made small-MLP inference 4x slower than one."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores - 1 - (getattr(vec, "num_workers", 0) or 0))


def make_policy(vec, config: PPOConfig) -> Policy:
    """The policy `config` describes for the spaces (and observation tree) of `vec`."""
    return Policy(vec.single_observation_space, vec.single_action_space, getattr(vec, "observation_tree", None),
                  hidden_size=config.hidden_size, num_layers=config.num_layers, activation=config.activation,
                  lstm=config.lstm, forget_bias=config.forget_bias, shared_trunk=config.shared_trunk or config.lstm,
                  log_std_init=config.log_std_init, ortho_init=config.ortho_init)


def make_optimizer(policy: Policy, learning_rate: float, device: torch.device) -> FlatAdam:
    """Adam with CleanRL's eps, fused: one kernel updates every parameter, where torch's
    default on CPU loops over them tensor by tensor (3-9x slower steps for puffercore's
    policies on CPU; bench/bench_update.py --cleanrl), over one flat buffer holding them
    all, each parameter group's together (`FlatAdam`: the policy's parameters become views
    of it)."""
    fused = torch.device(device).type in ("cpu", "cuda")
    return FlatAdam(policy, lr=learning_rate, eps=1e-5, fused=fused, groups=policy.parameter_groups())
