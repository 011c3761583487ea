"""One PPO minibatch update of the Nature CNN on CPU: puffercore's policy (channels-last
filters and inputs) against the same network in PyTorch's default layout (CleanRL's
ppo_atari), side by side in alternating rounds.

    python bench/bench_cnn.py                   # minibatch 256 (the Atari preset's), 3 rounds of 5 s
    python bench/bench_cnn.py --batch 1024 --rounds 5

A round times forward, backward and an Adam step on uint8 [batch, 4, 84, 84] frames
converted as each model's `features` does; torch uses its default thread count.
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium
import numpy as np
import torch

from puffercore.models import Policy


def timed_updates(model: torch.nn.Module, frames: torch.Tensor, seconds: float) -> float:
    """Milliseconds per update of `model` (observations -> logits and value) on `frames`."""
    optimizer = torch.optim.Adam(model.parameters(), lr=2.5e-4)

    def update():
        out = model(frames)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.batch < 1 or args.seconds <= 0 or args.rounds < 1:
        parser.error("--batch must be >= 1, --seconds > 0, --rounds >= 1")
    observation_space = gymnasium.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    action_space = gymnasium.spaces.Discrete(4)
    torch.manual_seed(0)
    ours = Policy(observation_space, action_space, shared_trunk=True)
    default_layout = Policy(observation_space, action_space, shared_trunk=True)
    default_layout.load_state_dict(ours.state_dict())
    default_layout.encoder.to(memory_format=torch.contiguous_format)
    # The default layout's features: frames as stored, NCHW, as CleanRL's `x / 255.0`.
    default_layout.features = lambda observations: observations.reshape(-1, 4, 84, 84).float().div_(255.0)
    frames = torch.randint(0, 256, (args.batch, 4 * 84 * 84), dtype=torch.uint8)
    results = {"puffercore (channels-last)": [], "default layout (CleanRL)": []}
    for _ in range(args.rounds):
        for name, model in zip(results, (ours, default_layout)):
            results[name].append(timed_updates(model, frames, args.seconds))
    median = {name: statistics.median(values) for name, values in results.items()}
    print(f"Nature CNN update, minibatch {args.batch}, {torch.get_num_threads()} torch threads, "
          f"median of {args.rounds} rounds")
    for name, value in median.items():
        print(f"  {name:28s} {value:8.1f} ms")
    ours_ms, theirs_ms = median.values()
    print(f"default layout / puffercore: {theirs_ms / ours_ms:.2f}x")


if __name__ == "__main__":
    main()
