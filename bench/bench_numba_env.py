"""Steps/s of the numba CartPole (puffercore.numba_env) against the C CartPole, side by
side, on the threads backend (4096 envs, 2 workers by default) and, for reference,
stepped directly by one NativeEnv on the calling thread.

    python bench/bench_numba_env.py [--envs 4096] [--workers 2] [--seconds 2] [--rounds 5]

Rounds alternate between the two envs so that a shared machine's load hits both alike;
each line is the median over rounds, and the ratio is numba / C. Actions come from a
pool drawn beforehand.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # keep idle BLAS threads off the cores

import numpy as np  # noqa: E402

import puffercore.vector  # noqa: E402
from puffercore.ocean import CartPole  # noqa: E402

POOL = 64


def steps_per_second(env, actions, seconds):
    env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for batch in actions:
            env.step(batch)
        steps += len(actions) * len(actions[0])
    return steps / (time.perf_counter() - start)


def compare(title, make, num_envs, seconds, rounds):
    from puffercore.numba_env.cartpole import NumbaCartPole  # compiled (or loaded from cache) here

    rng = np.random.default_rng(0)
    actions = [rng.integers(0, 2, num_envs, dtype=np.int32) for _ in range(POOL)]
    envs = {"C": make(CartPole), "numba": make(NumbaCartPole)}
    rates = {name: [] for name in envs}
    try:
        for _ in range(rounds):
            for name, env in envs.items():
                rates[name].append(steps_per_second(env, actions, seconds))
    finally:
        for env in envs.values():
            env.close()
    c, ours = statistics.median(rates["C"]), statistics.median(rates["numba"])
    print(f"{title:<34} C {c / 1e6:8.2f} M steps/s   numba {ours / 1e6:8.2f} M steps/s   numba/C {ours / c:5.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=4096)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from puffercore.numba_env.cartpole import NumbaCartPole

    print(f"NumbaCartPole compiled in {NumbaCartPole.compile_seconds:.2f} s (from numba's cache after the first run)")
    compare(f"threads, {args.envs} envs, {args.workers} workers",
            lambda cls: puffercore.vector.make(cls, args.envs, backend="threads", num_workers=args.workers),
            args.envs, args.seconds, args.rounds)
    compare(f"one NativeEnv, {args.envs} envs", lambda cls: cls(num_envs=args.envs), args.envs, args.seconds,
            args.rounds)


if __name__ == "__main__":
    main()
