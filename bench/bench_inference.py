"""Inference copies (`puffercore.frozen_copy.FrozenCopy`) against the network they copy,
side by side: microseconds per position of a batched forward pass in eager float32 PyTorch
(what a trainer without them runs) and in the copy, float32 (batch norms folded) and
bfloat16 (where the CPU computes it natively), each run eagerly and as the frozen
TorchScript trace the copy makes by default, with the largest error of the copy's policy
(softmax) and value. Rounds alternate and each row keeps its median. Self-play's batches
are small: a thread's parallel games less the leaves its evaluation cache answers.

    python bench/bench_inference.py [--batches 16 64 256] [--threads 1] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from puffercore.alphazero.config import GAMES, AlphaZeroConfig
from puffercore.alphazero.network import build_network
from puffercore.frozen_copy import FrozenCopy
from puffercore.precision import native_bf16

NETWORKS = {"connect4": {}, "azul": {}}  # overrides of each game's AlphaZero preset network


def trained_looking(network: torch.nn.Module) -> torch.nn.Module:
    """Batch-norm statistics away from the identity, as training leaves them."""
    generator = torch.Generator().manual_seed(0)
    for module in network.modules():
        if isinstance(module, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
            module.running_mean.copy_(torch.randn(module.num_features, generator=generator) * 0.5)
            module.running_var.copy_(torch.rand(module.num_features, generator=generator) + 0.5)
    return network.eval()


def microseconds_per_position(forward, batch: int, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        forward()
    return (time.perf_counter() - start) / calls / batch * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (self-play uses one per thread)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20, help="forward passes per round")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"CPU bf16: {'native' if native_bf16() else 'not native (auto stays float32)'}; {args.threads} torch threads")
    for game in NETWORKS:
        config = AlphaZeroConfig.for_game(game, **NETWORKS[game])
        network = trained_looking(build_network(config))
        shape, actions = GAMES[game]().observation_shape, GAMES[game]().num_actions
        copies = {f"{precision} copy, {'traced' if trace else 'eager'}": FrozenCopy(network, precision, trace=trace)
                  for precision in ("float32", "bfloat16") for trace in (False, True)}
        for batch in args.batches:
            rng = np.random.default_rng(batch)
            observations = torch.from_numpy((rng.random((batch, *shape)) > 0.7).astype(np.float32))
            masks = torch.from_numpy(rng.random((batch, actions)) > 0.2)
            masks[:, 0] = True
            with torch.inference_mode():
                reference = network(observations, masks)
                rows = {"eager float32": lambda: network(observations, masks),
                        **{name: (lambda copy=copy: copy(observations, masks)) for name, copy in copies.items()}}
                times = {name: [] for name in rows}
                for _ in range(args.rounds):
                    for name, forward in rows.items():
                        forward()  # warm-up of this round's allocations
                        times[name].append(microseconds_per_position(forward, batch, args.calls))
                errors = {}
                for name, copy in copies.items():
                    logits, values = copy(observations, masks)
                    policy_error = (torch.softmax(logits, 1) - torch.softmax(reference[0], 1)).abs().max().item()
                    errors[name] = (policy_error, (values - reference[1]).abs().max().item())
            eager = statistics.median(times["eager float32"])
            print(f"{game} {config.channels}x{config.blocks}, batch {batch}: eager float32 {eager:.2f} us/position")
            for name in copies:
                median = statistics.median(times[name])
                print(f"  {name:22s} {median:8.2f} us/position  {eager / median:5.2f}x   "
                      f"max error: policy {errors[name][0]:.1e}, value {errors[name][1]:.1e}")


if __name__ == "__main__":
    main()
