"""Env throughput, puffercore against its peers, side by side in one run.

    python bench/compare_throughput.py                      # CartPole, the full table
    python bench/compare_throughput.py --envs 1,256,4096 --seconds 0.3
    python bench/compare_throughput.py --env mypackage.envs:MyEnv   # your own env
    python bench/compare_throughput.py --python-only        # Python envs vs SyncVectorEnv only

Rows (each at every env count, where it makes sense):
  native 1 thread       the ocean env's own step(): a plain C loop over envs
  threads / threads-stg the C++ engine, sync and staggered (batch = half the envs)
  serial                gymnasium CartPole-v1 through puffercore's adapter, one thread
  processes / proc-stg  gymnasium CartPole-v1 in worker processes, sync and staggered
  gym Sync / gym Async  gymnasium.vector.SyncVectorEnv / AsyncVectorEnv
  gym NumPy             gymnasium's vectorized NumPy CartPoleVectorEnv
  envpool               EnvPool's C++ CartPole (if installed)
Actions come from a pool drawn beforehand, so random number generation is not what is
timed. Then the targets: threads vs the single-thread loop and vs EnvPool at 4096 envs,
processes vs AsyncVectorEnv at 2 x 64 envs, gymnasium's SyncVectorEnv vs serial /
processes / staggered on CartPole-v1 and Acrobot-v1 (with the adapter's overhead per env
step), staggered vs sync on an env whose step cost varies, and the engine's hand-off
latency. A PNG plot goes to --plot.

--env MODULE:CALLABLE measures your env instead of CartPole: a native env (a
puffercore NativeEnv subclass) on the native and threads rows, any other creator
(gymnasium Env or PufferEnv factory) on the serial and processes rows, plus gymnasium's
vector envs when it returns a gymnasium Env.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402

import puffercore.vector  # noqa: E402
from puffercore.ocean import Busy, CartPole, NativeEnv  # noqa: E402
from puffercore.results import add_record_flag, record  # noqa: E402
from puffercore.testing import CountingEnv  # noqa: E402
from vector_timing import (  # noqa: E402
    GymVector, RawEnvs, cartpole_v1, measure, ratio_line, staggered_rate, sync_rate,
)

INFERENCE_PER_ROW = 50e-6
busy_env = functools.partial(Busy, min_cost_us=0.0, max_cost_us=200.0)
counting_env = functools.partial(CountingEnv, episode_length=1000, step_cost=(0.0, 200e-6))


def load(spec: str):
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


class EnvPoolVector(GymVector):
    def __init__(self, num_envs, num_threads):
        import envpool

        env = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=num_envs, num_threads=num_threads)
        self.env = env
        self.num_agents = num_envs
        self.single_action_space = env.action_space

    def step(self, actions):
        return self.env.step(actions)


def table_rows(args, native_creator, python_creator, gym_env_fn):
    workers = args.workers
    builders = {}
    if native_creator is not None:
        builders["native 1 thread"] = lambda n: native_creator(num_envs=n)
        builders["threads"] = lambda n: puffercore.vector.make(native_creator, n, backend="threads", num_workers=min(workers, n))
        builders["threads-stg"] = (
            lambda n: puffercore.vector.make(
                native_creator, n, backend="threads", num_workers=min(workers, n // 2), batch_size=n // 2
            ),
            "staggered",
            2,
        )
    if python_creator is not None:
        builders["serial"] = (lambda n: puffercore.vector.make(python_creator, n), "sync", 1, args.max_python_envs)
        builders["processes"] = (
            lambda n: puffercore.vector.make(python_creator, n, backend="processes", num_workers=min(workers, n)),
            "sync", 1, args.max_python_envs,
        )
        builders["proc-stg"] = (
            lambda n: puffercore.vector.make(
                python_creator, n, backend="processes", num_workers=min(2 * workers, n), batch_size=n // 2
            ),
            "staggered", 2, args.max_python_envs,
        )
    if gym_env_fn is not None:
        builders["gym Sync"] = (
            lambda n: GymVector(gymnasium.vector.SyncVectorEnv([gym_env_fn] * n)), "sync", 1, args.max_python_envs
        )
        builders["gym Async"] = (
            lambda n: GymVector(gymnasium.vector.AsyncVectorEnv([gym_env_fn] * n)),
            "sync", 1, min(args.max_python_envs, 256),
        )
    if args.env is None:
        from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

        builders["gym NumPy"] = lambda n: GymVector(CartPoleVectorEnv(num_envs=n))
        builders["envpool"] = lambda n: EnvPoolVector(n, min(workers, n))
    return builders


def run_table(args, builders):
    results = {}
    for name, builder in builders.items():
        build, kind, min_envs, max_envs = (builder, "sync", 1, None) if callable(builder) else (*builder, None)[:4]
        for n in args.envs:
            if n < min_envs or (max_envs is not None and n > max_envs):
                continue
            value = measure(f"{name} @ {n}", functools.partial(build, n), args.seconds, kind)
            if value is not None:
                results[(name, n)] = value
                print(f"  {name:>16} {n:>6} envs: {value / 1e6:9.3f} M steps/s", flush=True)
    return results


def print_table(results, envs):
    names = list(dict.fromkeys(name for name, _ in results))
    print("\nsteps/s (M)".ljust(18) + "".join(f"{n:>11}" for n in envs))
    for name in names:
        cells = [f"{results[(name, n)] / 1e6:11.3f}" if (name, n) in results else " " * 11 for n in envs]
        print(f"{name:<17}" + "".join(cells))


PYTHON_ENVS = (("CartPole-v1", (64, 256)), ("Acrobot-v1", (64,)))
ROUNDS = 7
_ENVS_IN_PROCESS: dict = {}


def _raw_steps(env_id: str, steps: int) -> float:
    """Seconds this process takes for `steps` plain env.step() calls of `env_id`."""
    env = _ENVS_IN_PROCESS.get(env_id)
    if env is None:
        env = _ENVS_IN_PROCESS[env_id] = gymnasium.make(env_id)
        env.reset(seed=0)
    actions = [int(a) for a in np.random.default_rng(0).integers(0, env.action_space.n, steps)]
    start = time.perf_counter()
    for action in actions:
        if any(env.step(action)[2:4]):
            env.reset()
    return time.perf_counter() - start


class MachineScaling:
    """How much faster two processes step a Python env than one on this machine: the
    ceiling for any two-worker backend. One process steps alone, then two step the same
    amount at once; on a machine whose cores share their physical core or are contended
    by other guests this is well below 2 and changes from moment to moment, which is why
    it is measured in the same rounds as the contenders."""

    def __init__(self, env_id: str):
        import multiprocessing

        self.env_id = env_id
        self.pool = multiprocessing.get_context("spawn").Pool(2)
        self.pool.starmap(_raw_steps, [(env_id, 100)] * 2)

    def measure(self, seconds: float) -> float:
        steps = max(1000, int(seconds / 2 / 10e-6))
        alone = self.pool.apply(_raw_steps, (self.env_id, steps))
        together = max(self.pool.starmap(_raw_steps, [(self.env_id, steps)] * 2))
        return 2 * alone / together

    def close(self):
        self.pool.terminate()


def python_env_ratios(args):
    """gymnasium's SyncVectorEnv against puffercore on Python envs. Every contender is built
    first, then all are timed in alternating rounds (medians), so that a disturbance on a
    shared machine hits them alike; the machine's own two-process scaling is measured in
    the same rounds."""
    print("\nPython envs: puffercore / gymnasium SyncVectorEnv, side by side "
          f"(median of {ROUNDS} rounds of {args.seconds / 2} s)")
    for env_id, counts in PYTHON_ENVS:
        creator = functools.partial(gymnasium.make, env_id)
        for n in counts:
            make = functools.partial(puffercore.vector.make, creator, n)
            builders = {
                "SyncVectorEnv": (lambda: GymVector(gymnasium.vector.SyncVectorEnv([creator] * n)), "sync"),
                "raw env.step": (lambda: RawEnvs(creator, n), "sync"),
                "serial": (make, "sync"),
                "processes x2": (lambda: make(backend="processes", num_workers=2), "sync"),
                "staggered x2": (lambda: make(backend="processes", num_workers=2, batch_size=n // 2), "staggered"),
            }
            contenders = {}
            scaling = MachineScaling(env_id)
            try:
                for name, (build, kind) in builders.items():
                    contenders[name] = (build(), sync_rate if kind == "sync" else staggered_rate)
                rates = {name: [] for name in contenders}
                scalings = []
                for _ in range(ROUNDS):
                    for name, (env, measure_rate) in contenders.items():
                        rates[name].append(measure_rate(env, args.seconds / 2))
                    scalings.append(scaling.measure(args.seconds / 2))
            finally:
                scaling.close()
                for env, _ in contenders.values():
                    env.close()
            rates = {name: float(np.median(values)) for name, values in rates.items()}
            peer = rates["SyncVectorEnv"]
            print(f"  {env_id} {n} envs: SyncVectorEnv {peer / 1e3:.1f} k steps/s | " + ", ".join(
                f"{name} {rates[name] / 1e3:.1f} k ({rates[name] / peer:.2f}x)"
                for name in ("serial", "processes x2", "staggered x2")))
            print(f"    adapter overhead: serial {1e6 / rates['serial']:.2f} us per env step - raw env.step "
                  f"{1e6 / rates['raw env.step']:.2f} us = {1e6 / rates['serial'] - 1e6 / rates['raw env.step']:.2f} us")
            machine = float(np.median(scalings))
            print(f"    this machine: 2 processes step {env_id} {machine:.2f}x as fast as 1 "
                  f"(rounds: {', '.join(f'{x:.2f}' for x in scalings)}); processes x2 / serial "
                  f"{rates['processes x2'] / rates['serial']:.2f}x, staggered x2 / serial "
                  f"{rates['staggered x2'] / rates['serial']:.2f}x")
            if env_id == "CartPole-v1" and n == 256:
                ratio_line("serial / SyncVectorEnv, CartPole-v1 256", rates["serial"], peer, 0.95)
                ratio_line("processes x2 / SyncVectorEnv, CartPole-v1 256", rates["processes x2"], peer, 1.6)
                ratio_line("staggered x2 / processes x2, CartPole-v1 256", rates["staggered x2"],
                           rates["processes x2"], 1.0)
                record(args.record, measure="gymnasium_cartpole_processes",
                       title="gymnasium CartPole-v1, 256 envs, `processes` backend, 2 workers",
                       value=round(rates["processes x2"] / 1e3, 1), unit="k steps/s", peer="gymnasium SyncVectorEnv",
                       peer_value=round(peer / 1e3, 1), ratio=rates["processes x2"] / peer)


def targets(args, results):
    print("\nTargets")
    n = 4096
    ratio_line(
        f"threads ({args.workers} workers) / native 1 thread, CartPole {n}",
        results.get(("threads", n)), results.get(("native 1 thread", n)), 1.7,
    )
    ratio_line(f"threads / envpool, CartPole {n}", results.get(("threads", n)), results.get(("envpool", n)), 30)

    processes = measure(
        "processes 2x64", lambda: puffercore.vector.make(cartpole_v1, 128, backend="processes", num_workers=2),
        args.seconds,
    )
    async_peer = measure(
        "gym Async 128", lambda: GymVector(gymnasium.vector.AsyncVectorEnv([cartpole_v1] * 128)), args.seconds
    )
    if processes and async_peer:
        print(f"  processes 2 workers x 64 envs: {processes / 1e3:.1f} k steps/s; AsyncVectorEnv 128 envs: "
              f"{async_peer / 1e3:.1f} k steps/s")
    ratio_line("processes / gymnasium AsyncVectorEnv, CartPole-v1 128 envs", processes, async_peer, 5)
    python_env_ratios(args)

    # Uneven step cost, 0-200 us per step (uniform). Sync steps every env, then runs the
    # policy on all rows; staggered (batch = half the envs) runs it on the half that is
    # back while the other half steps. The policy is simulated at INFERENCE_PER_ROW
    # seconds per row, either off the CPU (a sleep, like a forward pass on a GPU: the
    # case staggered batching is for) or as CPU work (on 2 cores, 2 stepping threads
    # plus a computing caller share 2 cores, and the bound is lower). Envs are twice the
    # batch, as EnvPool and PufferLib advise: 32 envs on 2 threads; 8 envs in 2
    # processes. With no policy there is nothing to overlap: sync already keeps every
    # core stepping, and staggered can only save the wait for the slowest env.
    for label, build, envs, workers in (
        ("threads, native Busy env", functools.partial(puffercore.vector.make, busy_env, backend="threads"), 32, 2),
        ("processes, Python CountingEnv",
         functools.partial(puffercore.vector.make, counting_env, backend="processes"), 8, 2),
    ):
        for inference, on_cpu in ((0.0, True), (INFERENCE_PER_ROW, False), (INFERENCE_PER_ROW, True)):
            sync = measure(f"{label} sync", lambda: build(envs, num_workers=workers), args.seconds,
                           inference_seconds=inference * envs, inference_on_cpu=on_cpu)
            staggered = measure(
                f"{label} staggered", lambda: build(envs, num_workers=workers, batch_size=envs // 2), args.seconds,
                "staggered", inference_seconds=inference * (envs // 2), inference_on_cpu=on_cpu,
            )
            policy = f"{inference * 1e6:.0f} us/row policy {'on the CPU' if on_cpu else 'off the CPU'}"
            name = f"uneven env (0-200 us/step), {label}, {policy if inference else 'no policy'}"
            if sync and staggered:
                print(f"  {name}: sync {sync / 1e3:.1f} k steps/s, staggered {staggered / 1e3:.1f} k steps/s")
            target = 1.3 if label.startswith("threads") and inference and not on_cpu else None
            ratio_line(f"staggered / sync, {name}", staggered, sync, target)

    for workers in (1, args.workers, 2 * args.workers):
        vec = puffercore.vector.make(CartPole, workers, backend="threads", num_workers=workers)
        steps_per_s = sync_rate(vec, args.seconds)
        vec.close()
        print(f"  engine hand-off, {workers} worker(s), one env each: {1e6 * workers / steps_per_s:.2f} us per step()")
        vec = puffercore.vector.make(CartPole, 2 * workers, backend="threads", num_workers=workers,
                                     batch_size=workers)
        steps_per_s = staggered_rate(vec, args.seconds)
        vec.close()
        print(f"  engine hand-off, staggered, {workers} worker(s), two envs each, batches of one per worker: "
              f"{1e6 * workers / steps_per_s:.2f} us per recv() + send()")


def record_cartpole(args, results, n=4096):
    """The C CartPole's records at `n` envs, where both sides were measured."""
    rows = (("cartpole_vector_1thread", f"C CartPole, {n} envs, 1 thread", "native 1 thread",
             "gymnasium CartPoleVectorEnv (NumPy)", "gym NumPy"),
            ("cartpole_vector_threads", f"C CartPole, {n} envs, `threads` backend, {args.workers} workers", "threads",
             "EnvPool", "envpool"))
    for name, title, ours, peer, theirs in rows:
        if (ours, n) in results and (theirs, n) in results:
            record(args.record, measure=name, title=title, value=round(results[(ours, n)] / 1e6, 2),
                   unit="M steps/s", peer=peer, peer_value=round(results[(theirs, n)] / 1e6, 2),
                   ratio=results[(ours, n)] / results[(theirs, n)])


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 5))
    for name in dict.fromkeys(name for name, _ in results):
        points = sorted((n, value) for (other, n), value in results.items() if other == name)
        axis.plot([n for n, _ in points], [v for _, v in points], marker="o", label=name)
    axis.set(xscale="log", yscale="log", xlabel="envs", ylabel="agent steps / s", title="env throughput")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"\nplot: {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default="1,16,256,4096,16384", help="comma-separated env counts")
    parser.add_argument("--seconds", type=float, default=0.5, help="timing window per measurement")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)), help="worker threads/processes")
    parser.add_argument("--max-python-envs", type=int, default=1024, help="largest count for Python-env rows")
    parser.add_argument("--env", help="MODULE:CALLABLE of your own env creator instead of CartPole")
    parser.add_argument("--plot", default="throughput.png", help="where to write the PNG plot ('' for none)")
    parser.add_argument("--no-targets", action="store_true", help="skip the target comparisons")
    parser.add_argument("--python-only", action="store_true",
                        help="only the Python-env ratios against gymnasium's SyncVectorEnv")
    add_record_flag(parser)
    args = parser.parse_args()
    args.envs = [int(n) for n in args.envs.split(",")]
    if args.python_only:
        python_env_ratios(args)
        return

    if args.env is None:
        native_creator, python_creator, gym_env_fn = CartPole, cartpole_v1, cartpole_v1
    else:
        creator = load(args.env)
        native = isinstance(creator, type) and issubclass(creator, NativeEnv)
        native_creator = creator if native else None
        python_creator = None if native else creator
        gym_env_fn = None
        if not native:
            probe = creator()
            gym_env_fn = creator if isinstance(probe, gymnasium.Env) else None
            probe.close()

    print(f"env throughput on {os.cpu_count()} cores, {args.workers} workers, {args.seconds} s per cell")
    results = run_table(args, table_rows(args, native_creator, python_creator, gym_env_fn))
    print_table(results, args.envs)
    if args.env is None:
        record_cartpole(args, results)
    if args.env is None and not args.no_targets:
        targets(args, results)
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
