"""One PPO minibatch update on CPU, puffercore's way against CleanRL's, side by side in
alternating rounds, for the two policies whose updates dominate training time:

- atari: the Nature CNN on uint8 [256, 4, 84, 84] frames (the Atari preset's minibatch).
  puffercore keeps filters and inputs channels-last; CleanRL's ppo_atari runs PyTorch's
  default layout.
- mujoco: the 64 x 64 tanh actor and critic on 17 observations and 6 actions
  (HalfCheetah) in minibatches of 64 (the MuJoCo preset's).

Both sides start from the same weights. puffercore steps its optimizer as the trainer
builds it (`ppo.make_optimizer`: Adam, fused); CleanRL's is torch's default Adam, which
on CPU updates the parameters tensor by tensor.

    python bench/bench_update.py                       # both policies, 3 rounds of 5 s each
    python bench/bench_update.py --policies atari --batch 1024 --rounds 5

A round times forward, backward and the optimizer step, on `--threads` torch threads
(default: torch's default, every core).
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium
import numpy as np
import torch

from puffercore.models import Policy
from puffercore.ppo import make_optimizer

LEARNING_RATE = 2.5e-4


def timed_updates(model: torch.nn.Module, optimizer: torch.optim.Optimizer, observations: torch.Tensor,
                  seconds: float) -> float:
    """Milliseconds per update of `model` (observations -> action params and value)."""

    def update():
        out = model(observations)
        loss = out.params.square().mean() + out.value.square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    update()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        update()
        count += 1
    return (time.perf_counter() - start) / count * 1e3


def atari_pair(batch: int):
    """(puffercore's policy, CleanRL's layout of the same weights, a minibatch of frames)."""
    observation_space = gymnasium.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    ours = Policy(observation_space, gymnasium.spaces.Discrete(4), shared_trunk=True)
    theirs = Policy(observation_space, gymnasium.spaces.Discrete(4), shared_trunk=True)
    theirs.load_state_dict(ours.state_dict())
    theirs.encoder.to(memory_format=torch.contiguous_format)
    # Frames as stored, NCHW, as CleanRL's `x / 255.0`.
    theirs.features = lambda observations: observations.reshape(-1, 4, 84, 84).float().div_(255.0)
    return ours, theirs, torch.randint(0, 256, (batch, 4 * 84 * 84), dtype=torch.uint8)


def mujoco_pair(batch: int):
    """(puffercore's policy, the same weights for CleanRL's side, a minibatch of observations)."""
    observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (17,), np.float32)
    action_space = gymnasium.spaces.Box(-1, 1, (6,), np.float32)
    ours = Policy(observation_space, action_space)
    theirs = Policy(observation_space, action_space)
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs, torch.randn(batch, 17)


POLICIES = {"atari": (atari_pair, 256), "mujoco": (mujoco_pair, 64)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", nargs="+", choices=sorted(POLICIES), default=list(POLICIES))
    parser.add_argument("--batch", type=int, default=0, help="minibatch size (default: the preset's)")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's default)")
    args = parser.parse_args()
    if args.batch < 0 or args.seconds <= 0 or args.rounds < 1 or args.threads < 0:
        parser.error("--batch must be >= 0, --seconds > 0, --rounds >= 1, --threads >= 0")
    if args.threads:
        torch.set_num_threads(args.threads)
    for name in args.policies:
        make_pair, preset_batch = POLICIES[name]
        torch.manual_seed(0)
        ours, theirs, observations = make_pair(args.batch or preset_batch)
        optimizers = (make_optimizer(ours, LEARNING_RATE, torch.device("cpu")),
                      torch.optim.Adam(theirs.parameters(), lr=LEARNING_RATE, eps=1e-5))
        results = {"puffercore": [], "CleanRL's way": []}
        for _ in range(args.rounds):
            for side, model, optimizer in zip(results, (ours, theirs), optimizers):
                results[side].append(timed_updates(model, optimizer, observations, args.seconds))
        median = {side: statistics.median(values) for side, values in results.items()}
        print(f"{name}: one update, minibatch {len(observations)}, {torch.get_num_threads()} torch threads, "
              f"median of {args.rounds} rounds")
        for side, value in median.items():
            print(f"  {side:14s} {value:8.2f} ms")
        ours_ms, theirs_ms = median.values()
        print(f"  CleanRL's way / puffercore: {theirs_ms / ours_ms:.2f}x")


if __name__ == "__main__":
    main()
