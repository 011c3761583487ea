"""The measurement of issue 17: the numba CartPole (puffercore.numba_env) against the C
CartPole and gymnasium's CartPole-v1, in one run.

    python bench/bench_numba.py [--envs 4096] [--workers 2] [--seconds 1] [--rounds 3]

Rows, in steps/s (medians over rounds; rounds go through every row in turn, so that a
shared machine's load hits all alike; actions come from a pool drawn beforehand):
  numba / C, 1 thread         one NativeEnv of --envs envs stepped on the calling thread
  numba / C, threads          the threads backend, --envs envs, --workers workers
  gymnasium CartPole-v1       gymnasium's Python env, one env at a time (env.step in a loop)
  gymnasium CartPoleVectorEnv gymnasium's NumPy vector env, --envs envs
Then compile times, each in a fresh interpreter with its own numba cache directory: the
first compile (empty cache) and the load from that cache. Then the issue's targets, each
marked ok or BELOW TARGET.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # keep idle BLAS threads off the cores

from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv  # noqa: E402

import puffercore.vector  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # pytest and `puffercore bench` leave bench/ off it
from vector_timing import GymVector, RawEnvs, cartpole_v1, sync_rate  # noqa: E402
from puffercore.ocean import CartPole  # noqa: E402

PYTHON_ENVS = 64  # gymnasium's Python CartPole one env at a time: its rate does not depend on the count
COMPILE = "from puffercore.numba_env.cartpole import NumbaCartPole; print(NumbaCartPole.compile_seconds)"


def throughput(args):
    """Median steps/s of every row, keyed by row name."""
    from puffercore.numba_env.cartpole import NumbaCartPole

    def threads(cls):
        return puffercore.vector.make(cls, args.envs, backend="threads", num_workers=args.workers)

    builders = {
        "numba, 1 thread": lambda: NumbaCartPole(num_envs=args.envs),
        "C, 1 thread": lambda: CartPole(num_envs=args.envs),
        f"numba, threads x{args.workers}": lambda: threads(NumbaCartPole),
        f"C, threads x{args.workers}": lambda: threads(CartPole),
        "gymnasium CartPole-v1, one env at a time": lambda: RawEnvs(cartpole_v1, PYTHON_ENVS),
        "gymnasium CartPoleVectorEnv": lambda: GymVector(CartPoleVectorEnv(num_envs=args.envs)),
    }
    rates = {name: [] for name in builders}
    for _ in range(args.rounds):
        for name, build in builders.items():
            env = build()
            try:
                rates[name].append(sync_rate(env, args.seconds))
            finally:
                env.close()
    return {name: statistics.median(values) for name, values in rates.items()}


def compile_seconds():
    """(first compile, cached load) of NumbaCartPole, each in a fresh interpreter: numba's
    cache goes to an empty directory for the first and is read back by the second."""
    with tempfile.TemporaryDirectory() as cache:
        environment = {**os.environ, "NUMBA_CACHE_DIR": cache}
        return tuple(float(subprocess.run([sys.executable, "-c", COMPILE], env=environment, check=True,
                                          capture_output=True, text=True).stdout) for _ in range(2))


def check(title, value, target, unit="", at_most=False):
    """One target line: a floor, or with at_most a ceiling (times)."""
    met = value <= target if at_most else value >= target
    print(f"  {title:<58} {value:8.2f}{unit}  target {'<=' if at_most else '>='} {target}{unit}  "
          f"{'ok' if met else 'BELOW TARGET'}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=4096)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    rates = throughput(args)
    print(f"steps/s, {args.envs} envs (gymnasium CartPole-v1: {PYTHON_ENVS} envs), median of {args.rounds} rounds")
    for name, value in rates.items():
        print(f"  {name:<44} {value / 1e6:9.3f} M")
    first, cached = compile_seconds()
    print(f"NumbaCartPole compile: first {first:.2f} s (empty cache), cached load {cached:.2f} s")

    print("targets (issue 17)")
    threads = f"threads x{args.workers}"
    check("numba / C, 1 thread", rates["numba, 1 thread"] / rates["C, 1 thread"], 0.5)
    check(f"numba {threads} / numba 1 thread", rates[f"numba, {threads}"] / rates["numba, 1 thread"], 1.6)
    check("numba 1 thread / gymnasium CartPole-v1 one env at a time",
          rates["numba, 1 thread"] / rates["gymnasium CartPole-v1, one env at a time"], 100)
    check("cached load", cached, 1, " s", at_most=True)
    check("first compile", first, 10, " s", at_most=True)


if __name__ == "__main__":
    main()
