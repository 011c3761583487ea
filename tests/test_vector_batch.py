"""The batch contract of recv() on every backend: a Batch that unpacks as the 7-tuple,
names its items, and carries the batch's final observations and rows, equal to the
vector's own arrays at those rows, whether the batch is one block (views) or scattered
(gathered)."""

import functools

import numpy as np
import pytest

import puffercore.vector
from puffercore.ocean import CartPole, Snake
from puffercore.testing import CountingEnv
from puffercore.vector import Batch

EPISODE_LENGTH = 3
counting = functools.partial(CountingEnv, episode_length=EPISODE_LENGTH)
uneven = functools.partial(CountingEnv, episode_length=EPISODE_LENGTH, step_cost=(0.0, 300e-6))


@pytest.fixture(autouse=True)
def fork_workers(monkeypatch):
    monkeypatch.setattr(puffercore.vector.processes, "DEFAULT_START_METHOD", "fork")


def check_batch(vec, batch) -> bool:
    """Assert the contract for one batch; True when it was scattered."""
    assert isinstance(batch, Batch) and len(batch) == 7
    obs, rew, term, trunc, info, env_ids, masks = batch
    for name, item in zip(("observations", "rewards", "terminals", "truncations", "info", "env_ids", "masks"), batch):
        assert getattr(batch, name) is item
    per_env = vec.num_agents // vec.num_creator_envs
    rows = np.arange(vec.num_agents)[batch.rows]
    np.testing.assert_array_equal(rows, (np.asarray(env_ids)[:, None] * per_env + np.arange(per_env)).ravel())
    pairs = [(obs, vec.observations), (rew, vec.rewards), (term, vec.terminals), (trunc, vec.truncations),
             (masks, vec.masks), (batch.final_observations, vec.final_observations)]
    for got, buffer in pairs:
        np.testing.assert_array_equal(got, buffer[batch.rows])
    if isinstance(batch.rows, slice):
        assert all(np.shares_memory(got, buffer) for got, buffer in pairs)
        return False
    assert not any(np.shares_memory(got, buffer) for got, buffer in pairs)
    return True


def drive(vec, steps, stop=None):
    """recv/send `steps` batches, checking each; `stop(batch, scattered)` may end early."""
    vec.async_reset(seed=0)
    for step in range(steps):
        batch = vec.recv()
        scattered = check_batch(vec, batch)
        if stop is not None and stop(batch, scattered):
            return True
        rows = len(batch.observations)
        vec.send(np.random.default_rng(step).integers(0, vec.single_action_space.n, rows).astype(np.int32))
    return False


def ended_finals_are_last_observations(batch) -> bool:
    """CountingEnv's final observation counts the whole episode; False if none ended."""
    ended = batch.terminals | batch.truncations
    assert (batch.final_observations[ended, 0] == EPISODE_LENGTH).all()
    assert (batch.observations[ended, 0] == 0).all()
    return bool(ended.any())


@pytest.mark.parametrize("backend", ["serial", "processes"])
@pytest.mark.parametrize("batch_size", [4, 2, 1])
def test_python_backends_batches_carry_final_observations_and_rows(backend, batch_size):
    ended = []
    with puffercore.vector.make(counting, 4, backend=backend, batch_size=batch_size) as vec:
        drive(vec, 40, lambda batch, _: ended.append(ended_finals_are_last_observations(batch)))
    assert any(ended)


@pytest.mark.parametrize("creator,workers,batch_size", [
    (CartPole, 2, 8), (CartPole, 2, 4), (functools.partial(Snake, num_snakes=3), 2, 4),
])
def test_threads_batches_carry_final_observations_and_rows(creator, workers, batch_size):
    ended = []
    with puffercore.vector.make(creator, 8, backend="threads", num_workers=workers, batch_size=batch_size) as vec:
        drive(vec, 200, lambda batch, _: ended.append(bool((batch.terminals | batch.truncations).any())))
    assert any(ended)


def test_synchronous_step_still_returns_the_plain_five_tuple():
    with puffercore.vector.make(counting, 2) as vec:
        vec.reset(seed=0)
        result = vec.step(np.zeros(2, np.int32))
        assert type(result) is tuple and len(result) == 5


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_threads_batches_are_never_scattered(workers):
    """The threads engine steps fixed blocks of envs: every batch, ended episodes
    included, is a view of the buffers."""
    ended = []
    with puffercore.vector.make(CartPole, 8, backend="threads", num_workers=workers, batch_size=4) as vec:
        drive(vec, 400, lambda batch, scattered: ended.append(bool((batch.terminals | batch.truncations).any()))
              or scattered)
    assert len(ended) == 400 and any(ended)


def test_scattered_processes_batch_gathers_final_observations():
    with puffercore.vector.make(uneven, 4, backend="processes", num_workers=4, batch_size=2) as vec:
        found = drive(vec, 3_000, lambda batch, scattered: scattered and ended_finals_are_last_observations(batch))
    if not found:
        pytest.fail("no scattered batch with an ended episode in 3000: the gather path went untested")


def test_block_env_ids_are_shared_and_read_only():
    with puffercore.vector.make(counting, 4, batch_size=2) as vec:
        vec.async_reset(seed=0)
        env_ids = vec.recv().env_ids
        with pytest.raises(ValueError, match="read-only"):
            env_ids[0] = 3
