"""Timing a vector env, shared by the throughput benches (compare_throughput.py,
bench_gpu.py, bench_numba.py): a step loop or a recv/send loop timed for a few seconds,
with actions from a pool drawn beforehand (random number generation is not what is
timed), optionally with a simulated policy between the calls; gymnasium's vector envs and
a plain loop of env.step() behind the same interface; a ratio printed against a target.
"""

from __future__ import annotations

import time

import gymnasium
import numpy as np

POOL = 16


def cartpole_v1():
    return gymnasium.make("CartPole-v1")


def action_pool(space, rows, seed=0):
    rng = np.random.default_rng(seed)
    if isinstance(space, gymnasium.spaces.Discrete):
        return [rng.integers(space.start, space.start + space.n, rows).astype(np.int32) for _ in range(POOL)]
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return [(space.start + rng.integers(0, space.nvec, (rows, *space.shape))).astype(np.int32) for _ in range(POOL)]
    return [rng.uniform(space.low, space.high, (rows, *space.shape)).astype(np.float32) for _ in range(POOL)]


def rate(step, rows_per_call, seconds):
    """Agent steps per second of calling `step(i)` for about `seconds` (after a warm-up)."""
    for i in range(3):
        step(i)
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(8):
            step(calls)
            calls += 1
    return calls * rows_per_call / elapsed


def sync_rate(env, seconds, inference_seconds=0.0, inference_on_cpu=True):
    """step loop; `inference_seconds` per step stand in for the policy (see infer)."""
    env.reset(seed=0)
    actions = action_pool(env.single_action_space, env.num_agents)

    def step(i):
        env.step(actions[i % POOL])
        if inference_seconds:
            infer(inference_seconds, inference_on_cpu)

    return rate(step, env.num_agents, seconds)


def staggered_rate(vec, seconds, inference_seconds=0.0, inference_on_cpu=True):
    """recv -> (simulated inference) -> send loop; counts the rows of each batch."""
    vec.async_reset(seed=0)
    rows = vec.num_agents * vec.batch_size // vec.num_creator_envs
    actions = action_pool(vec.single_action_space, rows)

    def step(i):
        vec.recv()
        if inference_seconds:
            infer(inference_seconds, inference_on_cpu)
        vec.send(actions[i % POOL])

    return rate(step, rows, seconds)


def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def infer(seconds, on_cpu):
    """Simulated policy inference: CPU work (a CPU policy), or a wait that leaves the
    cores free (a forward pass on an accelerator)."""
    if on_cpu:
        busy(seconds)
    else:
        time.sleep(seconds)


def measure(name, build, seconds, step_kind="sync", **kwargs):
    try:
        env = build()
    except Exception as error:  # a peer that cannot run here is reported, not fatal
        print(f"  {name}: unavailable ({type(error).__name__}: {error})")
        return None
    try:
        return (staggered_rate if step_kind == "staggered" else sync_rate)(env, seconds, **kwargs)
    finally:
        env.close()


class GymVector:
    """gymnasium's vector envs behind the same reset/step/spaces used above."""

    def __init__(self, env):
        self.env = env
        self.num_agents = env.num_envs
        self.single_action_space = env.single_action_space

    def reset(self, seed):
        self.env.reset(seed=seed)

    def step(self, actions):
        return self.env.step(actions.astype(np.int64))

    def close(self):
        self.env.close()


class RawEnvs(GymVector):
    """The bare cost of the envs: each gymnasium env's own step() in a Python loop, with
    the reset after an episode ends, and nothing else."""

    def __init__(self, creator, num_envs):
        self.envs = [creator() for _ in range(num_envs)]
        self.num_agents = num_envs
        self.single_action_space = self.envs[0].action_space

    def reset(self, seed):
        for index, env in enumerate(self.envs):
            env.reset(seed=seed + index)

    def step(self, actions):
        for env, action in zip(self.envs, actions.astype(np.int64)):
            if any(env.step(action)[2:4]):
                env.reset()

    def close(self):
        for env in self.envs:
            env.close()


def ratio_line(label, numerator, denominator, target=None):
    if numerator is None or denominator is None:
        print(f"  {label}: not measured")
        return
    value = numerator / denominator
    verdict = "" if target is None else f" (target >= {target}x) {'ok' if value >= target else 'BELOW TARGET'}"
    print(f"  {label}: {value:.2f}x{verdict}")
