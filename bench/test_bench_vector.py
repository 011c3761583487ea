"""pytest-benchmark suite for the vector backends, each group with its peer beside it:
`pytest bench/test_bench_vector.py --benchmark-only`. The side-by-side script with
ratios and targets is bench/compare_throughput.py."""

import functools

import gymnasium
import numpy as np
import pytest

import puffercore.vector
from puffercore.ocean import Busy, CartPole
from puffercore.testing import CountingEnv

pytest.importorskip("pytest_benchmark")

STEPS = 32


# Not a function of this module: processes workers unpickle creators by module name, and
# pytest imports this file as `bench.test_bench_vector`, which no worker can import.
cartpole_v1 = functools.partial(gymnasium.make, "CartPole-v1")


def action_batches(rows, dtype=np.int32):
    return np.random.default_rng(0).integers(0, 2, (STEPS, rows)).astype(dtype)


def run_steps(step, actions):
    for action in actions:
        step(action)


def run_staggered(vec, actions):
    for action in actions:
        vec.recv()
        vec.send(action)


@pytest.fixture
def closing():
    envs = []
    yield envs.append
    for env in envs:
        env.close()


@pytest.mark.parametrize("backend", ["native-1-thread", "threads"])
def test_cartpole_4096(benchmark, closing, backend):
    benchmark.group = "CartPole 4096 envs"
    if backend == "threads":
        env = puffercore.vector.make(CartPole, 4096, backend="threads", num_workers=2)
    else:
        env = CartPole(num_envs=4096)
    closing(env)
    env.reset(seed=0)
    benchmark(run_steps, env.step, action_batches(4096))


def test_cartpole_4096_envpool(benchmark, closing):
    envpool = pytest.importorskip("envpool")
    benchmark.group = "CartPole 4096 envs"
    env = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=4096, num_threads=2)
    closing(env)
    env.reset()
    benchmark(run_steps, env.step, action_batches(4096))


@pytest.mark.parametrize("peer", ["puffercore-processes", "gymnasium-async"])
def test_gymnasium_cartpole_128(benchmark, closing, peer):
    benchmark.group = "gymnasium CartPole-v1, 128 envs, 2 workers"
    if peer == "puffercore-processes":
        env = puffercore.vector.make(cartpole_v1, 128, backend="processes", num_workers=2)
        env.reset(seed=0)
        step, dtype = env.step, np.int32
    else:
        env = gymnasium.vector.AsyncVectorEnv([cartpole_v1] * 128)
        env.reset(seed=0)
        step, dtype = env.step, np.int64
    closing(env)
    benchmark(run_steps, step, action_batches(128, dtype))


UNEVEN = {  # backend: (env creator, num_envs, num_workers), as in compare_throughput.py
    "threads": (functools.partial(Busy, min_cost_us=0.0, max_cost_us=200.0), 32, 2),
    "processes": (functools.partial(CountingEnv, episode_length=1000, step_cost=(0.0, 200e-6)), 8, 2),
}


@pytest.mark.parametrize("mode", ["sync", "staggered"])
@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_uneven_step_cost(benchmark, closing, backend, mode):
    """No policy between steps: this times the engine alone (compare_throughput.py adds
    the simulated policy that staggered batching overlaps)."""
    creator, envs, workers = UNEVEN[backend]
    benchmark.group = f"uneven env (0-200 us/step), {envs} envs, {workers} {backend}"
    batch = envs if mode == "sync" else envs // 2
    vec = puffercore.vector.make(creator, envs, backend=backend, num_workers=workers, batch_size=batch)
    closing(vec)
    if mode == "sync":
        vec.reset(seed=0)
        benchmark(run_steps, vec.step, action_batches(envs))
    else:  # twice the batches of half the size: the same env steps per round as sync
        vec.async_reset(seed=0)
        benchmark(run_staggered, vec, np.concatenate([action_batches(batch), action_batches(batch)]))
