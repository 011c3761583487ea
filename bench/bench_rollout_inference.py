"""Rollout inference on CPU: the policy's forward and action sampling on one batch of
observations, as `Trainer.collect` runs it, for the presets' policies at their batch
sizes, by each way puffercore has to run a network for inference, side by side in
alternating rounds (medians; CPU time of this process beside wall time, since the
machine may be shared).

- eager: the policy itself under torch.no_grad (what collection runs).
- inference mode: the same under torch.inference_mode.
- copy float32 / copy bfloat16: `puffercore.frozen_copy.FrozenCopy` of the policy
  (AlphaZero's evaluator): a frozen copy, bf16 weights where the CPU computes bf16.
- compiled: the policy's forward under torch.compile (sampling eager: it takes the
  trainer's torch.Generator).
- native: `puffercore.ppo.native_mlp` (what collection runs where it covers the policy:
  the MLP presets), forward and sampling in C.

    python bench/bench_rollout_inference.py                    # cartpole snake mujoco atari
    python bench/bench_rollout_inference.py --presets atari --rounds 5

Batches: CartPole's preset steps 128 envs at once, Snake's 2048 rows (512 envs x 4
snakes), MuJoCo's one env, Atari's 8. One torch thread, as collection runs beside env
workers on the 2-core machine (`ppo.parts.free_cores`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import gymnasium
import numpy as np
import torch

from puffercore.frozen_copy import FrozenCopy
from puffercore.ppo.default_policy import DefaultPolicy
from puffercore.ppo.native_mlp import NativeMLPPolicy
from puffercore.precision import native_bf16
from puffercore.results import add_record_flag, record

# name: (observation space, action space, policy keywords, rows per batch)
POLICIES = {
    "cartpole": (gymnasium.spaces.Box(-5, 5, (4,), np.float32), gymnasium.spaces.Discrete(2), dict(hidden_size=32), 128),
    "snake": (gymnasium.spaces.Box(0, 4, (121,), np.uint8), gymnasium.spaces.Discrete(4), dict(hidden_size=128), 2048),
    "mujoco": (gymnasium.spaces.Box(-10, 10, (17,), np.float32), gymnasium.spaces.Box(-1, 1, (6,), np.float32), {}, 1),
    "atari": (gymnasium.spaces.Box(0, 255, (4, 84, 84), np.uint8), gymnasium.spaces.Discrete(4),
              dict(shared_trunk=True), 8),
}


def ways(policy: DefaultPolicy):
    """name -> a function of (observations, generator) that returns (actions, log-probs, values)."""

    def sampled(forward, context):
        def run(observations, generator):
            with context():
                out = forward(observations)
                actions, log_prob = policy.sample(out, generator)
                return actions, log_prob, out.value
        return run

    compiled = torch.compile(policy, dynamic=False)
    result = {"eager": sampled(policy, torch.no_grad), "inference mode": sampled(policy, torch.inference_mode),
              "copy float32": sampled(FrozenCopy(policy, "float32"), torch.inference_mode),
              "compiled": sampled(compiled, torch.no_grad)}
    if native_bf16():
        result["copy bfloat16"] = sampled(FrozenCopy(policy, "bfloat16"), torch.inference_mode)
    native = NativeMLPPolicy.for_policy(policy)
    if native is not None:
        result["native"] = lambda observations, generator: native.act(observations.numpy(), generator)
    return result


def timed(run, observations, generator, seconds: float) -> tuple[float, float]:
    """Microseconds per batch, wall and CPU."""
    count, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while count == 0 or time.perf_counter() - start < seconds:
        run(observations, generator)
        count += 1
    return (time.perf_counter() - start) / count * 1e6, (time.process_time() - cpu_start) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", choices=sorted(POLICIES), default=list(POLICIES))
    parser.add_argument("--seconds", type=float, default=0.5, help="per way and round")
    parser.add_argument("--rounds", type=int, default=3)
    add_record_flag(parser)
    args = parser.parse_args()
    if args.seconds <= 0 or args.rounds < 1:
        parser.error("--seconds must be > 0 and --rounds >= 1")
    torch.set_num_threads(1)
    for name in args.presets:
        observation_space, action_space, keywords, rows = POLICIES[name]
        torch.manual_seed(0)
        policy = DefaultPolicy(observation_space, action_space, **keywords)
        observations = torch.as_tensor(np.stack([observation_space.sample() for _ in range(rows)]))
        generator = torch.Generator().manual_seed(0)
        runs = ways(policy)
        start = time.perf_counter()
        runs["compiled"](observations, generator)
        compile_seconds = time.perf_counter() - start
        for run in runs.values():
            run(observations, generator)  # warm-up
        results = {way: [] for way in runs}
        for _ in range(args.rounds):
            for way, run in runs.items():
                results[way].append(timed(run, observations, generator, args.seconds))
        medians = {way: [statistics.median(values) for values in zip(*times)] for way, times in results.items()}
        eager_cpu = medians["eager"][1]
        print(f"{name}: forward + sample of {rows} rows, 1 torch thread, median of {args.rounds} rounds; load "
              f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (compiled in {compile_seconds:.1f} s)")
        for way, (wall, cpu) in medians.items():
            print(f"  {way:15s} {wall:9.1f} us, {cpu:9.1f} us CPU  (eager / this: {eager_cpu / cpu:.2f}x CPU)")
        if "native" in medians:
            native_cpu, torch_cpu = medians["native"][1], medians["inference mode"][1]
            record(args.record, measure=f"rollout_inference_{name}",
                   title=f"rollout forward + sampling, the {name} preset's policy ({rows} rows), 1 thread, CPU time",
                   value=round(native_cpu, 1), unit="us", peer="eager torch, inference mode",
                   peer_value=round(torch_cpu, 1), ratio=torch_cpu / native_cpu)


if __name__ == "__main__":
    main()
