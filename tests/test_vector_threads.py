"""The threads backend (C++ engine over native envs) against the serial reference: the
same seed gives bit-identical per-env trajectories whatever the worker count or
batching, and bad input fails in Python with a clear message."""

import gc
import os

import numpy as np
import pytest

import puffercore.vector
from puffercore.ocean import CartPole, Snake
from puffercore.testing import CountingEnv

NATIVE_ENVS = {
    "cartpole": (CartPole, {}),
    "cartpole-continuous": (CartPole, {"continuous": True}),
    "snake": (Snake, {"num_snakes": 3}),
}
try:  # the numba port of Snake (puffercore[numba]): envs from numba cfuncs in the same engine
    from puffercore.numba_env.snake import numba_snake
except ImportError:
    pass
else:
    NATIVE_ENVS["numba_snake"] = (numba_snake, {"num_snakes": 4})


def actions_for(space, env_ids, steps, rows_per_env):
    """Deterministic actions from (env id, that env's step count), whatever the batching."""
    keys = np.repeat(env_ids * 7919 + steps[env_ids] * 31, rows_per_env) + np.tile(np.arange(rows_per_env), len(env_ids))
    if hasattr(space, "n"):
        return (keys % space.n).astype(np.int32)
    return np.sin(keys.astype(np.float32))[:, None].astype(np.float32)


def rollout(vec, num_envs, num_steps, seed=11):
    """Per-env lists of (obs, reward, terminal, truncation, final obs) copies via send/recv."""
    rows_per_env = vec.num_agents // num_envs
    steps = np.zeros(num_envs, int)
    trajectories = [[] for _ in range(num_envs)]
    vec.async_reset(seed=seed)
    for _ in range(num_steps * num_envs // vec.batch_size):
        obs, rew, term, trunc, _, env_ids, masks = vec.recv()
        for k, env_id in enumerate(env_ids):
            rows = slice(k * rows_per_env, (k + 1) * rows_per_env)
            trajectories[env_id].append(tuple(part[rows].copy() for part in (obs, rew, term, trunc, masks)))
        vec.send(actions_for(vec.single_action_space, env_ids, steps, rows_per_env))
        steps[env_ids] += 1
    return trajectories


def assert_same_trajectories(first, second):
    """Per-env trajectories agree step for step. Batches come back in the order they
    were sent, so every env has taken the same number of steps in both runs."""
    assert len(first) == len(second)
    assert [len(env) for env in first] == [len(env) for env in second] and all(len(env) >= 10 for env in first)
    for env_a, env_b in zip(first, second):
        for step_a, step_b in zip(env_a, env_b):
            for a, b in zip(step_a, step_b):
                np.testing.assert_array_equal(a, b)


def native_creator(name):
    cls, kwargs = NATIVE_ENVS[name]
    return lambda num_envs=1, buffers=None: cls(num_envs=num_envs, buffers=buffers, **kwargs)


@pytest.mark.parametrize("name", NATIVE_ENVS)
def test_sync_steps_match_serial_bit_for_bit(name):
    creator = native_creator(name)
    serial = puffercore.vector.make(creator, 8, seed=4)
    results = {}
    for workers in (1, 2, 4):
        rng = np.random.default_rng(0)
        with puffercore.vector.make(creator, 8, backend="threads", num_workers=workers, seed=4) as vec:
            np.testing.assert_array_equal(vec.reset(seed=4)[0], serial.reset(seed=4)[0])
            episodes = 0
            for _ in range(150):
                actions = actions_for(vec.single_action_space, np.arange(8), rng.integers(0, 100, 8), vec.num_agents // 8)
                got, want = vec.step(actions), serial.step(actions)
                for a, b in zip(got[:4], want[:4]):
                    np.testing.assert_array_equal(a, b)
                np.testing.assert_array_equal(vec.masks, serial.masks)
                done = vec.terminals | vec.truncations
                np.testing.assert_array_equal(vec.final_observations[done], serial.final_observations[done])
                assert got[4].keys() == want[4].keys()
                for key in want[4]:
                    assert got[4][key] == pytest.approx(want[4][key])
                episodes += got[4].get("episodes", 0)
            results[workers] = episodes
    serial.close()
    assert len(set(results.values())) == 1


@pytest.mark.parametrize("name", ["cartpole", "snake", "numba_snake"])
def test_staggered_trajectories_match_serial(name):
    creator = native_creator(name)
    with puffercore.vector.make(creator, 8) as serial:
        reference = rollout(serial, 8, 40)
    for workers, batch_size in [(1, 8), (2, 4), (2, 2), (4, 4)]:
        with puffercore.vector.make(creator, 8, backend="threads", num_workers=workers, batch_size=batch_size) as vec:
            assert_same_trajectories(rollout(vec, 8, 40), reference)


@pytest.mark.parametrize("workers, batch_size", [(1, 4), (2, 4), (2, 2), (4, 4)])
def test_staggered_batches_are_fixed_blocks_in_send_order(workers, batch_size):
    """Batch b is envs [b*N, (b+1)*N), returned as views of the buffers, round robin:
    recv never gathers rows, whatever order the threads finish in."""
    with puffercore.vector.make(CartPole, 8, backend="threads", num_workers=workers, batch_size=batch_size) as vec:
        vec.async_reset(seed=0)
        for step in range(200):
            batch = vec.recv()
            first = (step % (8 // batch_size)) * batch_size
            np.testing.assert_array_equal(batch.env_ids, np.arange(first, first + batch_size))
            assert batch.rows == slice(first, first + batch_size) and batch.masks.all()
            assert np.shares_memory(batch.observations, vec.observations)
            vec.send(np.full(batch_size, step % 2, np.int32))


def test_oversubscribed_staggered_matches_serial():
    """8 workers on this 2-core machine, more threads than cores, stepping half or a
    quarter of the envs at a time (the caller holding one batch while the workers step
    the others): serial's results bit for bit, with no hang."""
    creator = native_creator("snake")
    with puffercore.vector.make(creator, 32) as serial:
        reference = rollout(serial, 32, 60)
    for batch_size in (16, 8):
        with puffercore.vector.make(creator, 32, backend="threads", num_workers=8, batch_size=batch_size) as vec:
            assert_same_trajectories(rollout(vec, 32, 60), reference)


def test_staggered_infos_report_the_episodes_of_the_batch():
    """Workers gather each slice's episode logs; recv reports exactly the episodes that
    ended in the envs it returns, with their true lengths."""
    with puffercore.vector.make(CartPole, 8, backend="threads", num_workers=2, batch_size=4) as vec:
        vec.async_reset(seed=5)
        lengths, stepped, episodes = np.zeros(8, int), np.zeros(8, bool), 0
        for step in range(400):
            obs, rew, term, trunc, info, env_ids, masks = vec.recv()
            lengths[env_ids] += stepped[env_ids]  # the first recv brings reset observations
            ended = env_ids[term | trunc]
            assert info.get("episodes", 0) == len(ended)
            if len(ended):
                assert info["episode_length"] == pytest.approx(lengths[ended].mean())
                assert info["episode_return"] == pytest.approx(info["episode_length"])
                lengths[ended] = 0
            episodes += len(ended)
            vec.send(((env_ids + step) % 2).astype(np.int32))
            stepped[env_ids] = True
        assert episodes > 8


@pytest.mark.parametrize("workers", [4, 8])
def test_more_workers_than_cores_still_correct(workers):
    """4 or 8 workers + the caller on this 2-core machine: the spin-then-futex hand-off
    must not livelock or collapse; results stay those of serial."""
    with puffercore.vector.make(CartPole, 64) as serial, puffercore.vector.make(
        CartPole, 64, backend="threads", num_workers=workers
    ) as vec:
        serial.reset(seed=1)
        vec.reset(seed=1)
        for step in range(500):
            actions = (np.arange(64, dtype=np.int32) + step) % 2
            for got, want in zip(vec.step(actions)[:4], serial.step(actions)[:4]):
                np.testing.assert_array_equal(got, want)


def test_reset_without_seed_continues_and_infos_arrive():
    with puffercore.vector.make(CartPole, 16, backend="threads", num_workers=2, seed=3) as vec:
        first, _ = vec.reset()
        first = first.copy()
        episodes = 0
        for _ in range(300):
            *_, info = vec.step(np.zeros(16, np.int32))
            episodes += info.get("episodes", 0)
            if info:
                assert 5 <= info["episode_length"] <= 500 and info["episode_return"] == info["episode_length"]
        assert episodes > 16
        again, _ = vec.reset(seed=3)
        np.testing.assert_array_equal(again, first)


def native_threads():
    return len(os.listdir(f"/proc/{os.getpid()}/task"))


def test_close_twice_and_garbage_collection_join_the_workers():
    before = native_threads()
    vec = puffercore.vector.make(CartPole, 8, backend="threads", num_workers=4)
    assert native_threads() == before + 3  # worker 0 is the caller
    vec.reset(seed=0)
    vec.close()
    vec.close()
    assert native_threads() == before
    with pytest.raises(RuntimeError, match=r"step\(\) called on a closed vector env"):
        vec.step(np.zeros(8, np.int32))
    vec = puffercore.vector.make(CartPole, 8, backend="threads", num_workers=2)
    vec.reset(seed=0)
    del vec
    gc.collect()
    assert native_threads() == before


def test_thread_affinity_pins_and_still_matches():
    with puffercore.vector.make(CartPole, 8, backend="threads", num_workers=2, thread_affinity=True) as vec:
        vec.reset(seed=0)
        vec.step(np.zeros(8, np.int32))
    with pytest.raises(ValueError, match="thread_affinity must be a bool or a list of CPUs"):
        puffercore.vector.make(CartPole, 8, backend="threads", num_workers=2, thread_affinity=[9999])


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"env_creator": CountingEnv}, TypeError, "the threads backend steps native"),
        ({"num_workers": 3}, ValueError, r"^num_workers must divide num_envs=8 \(.*\), got 3$"),
        ({"num_workers": 8, "num_envs": 2}, ValueError, r"^num_workers must divide num_envs=2 \(.*\), got 8$"),
        ({"num_workers": 3, "batch_size": 4}, ValueError, r"^num_workers must divide batch_size=4 \(.*\), got 3$"),
        ({"batch_size": 3}, ValueError, "batch_size must divide num_envs=8, got 3"),
        ({"num_workers": 0}, ValueError, "num_workers must be an int >= 1, got 0"),
        ({"env_creator": lambda num_envs: CartPole(num_envs=2)}, ValueError, "returned an env with 2 sub-envs"),
    ],
)
def test_bad_threads_arguments(kwargs, error, match):
    arguments = {"env_creator": CartPole, "num_envs": 8, "backend": "threads", **kwargs}
    with pytest.raises(error, match=match):
        puffercore.vector.make(**arguments)


def test_bad_actions_are_rejected_before_native_code():
    with puffercore.vector.make(CartPole, 4, backend="threads", num_workers=2, batch_size=2) as vec:
        vec.async_reset(seed=0)
        vec.recv()
        with pytest.raises(ValueError, match=r"actions out of range for Discrete\(2\): actions\[1\] = 5"):
            vec.send(np.array([0, 5], np.int32))
        with pytest.raises(ValueError, match=r"actions must have shape \(2,\), got \(4,\)"):
            vec.send(np.zeros(4, np.int32))
        with pytest.raises(TypeError, match="actions must be integers"):
            vec.send(np.zeros(2, np.float32))
        vec.send(np.zeros(2, np.int32))
        with pytest.raises(RuntimeError, match=r"send\(\) needs a recv\(\) first"):
            vec.send(np.zeros(2, np.int32))
    with puffercore.vector.make(CartPole, 2, backend="threads", continuous=True) as vec:
        vec.reset(seed=0)
        with pytest.raises(ValueError, match=r"actions must be finite, got actions\[1, 0\] = nan"):
            vec.step(np.array([[0.0], [np.nan]], np.float32))
