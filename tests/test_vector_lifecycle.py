"""Faults and lifecycle of the parallel backends: a failing env surfaces in the caller
with its index and traceback, a killed worker is detected, nothing hangs, and close()
(or garbage collection) leaves no process, thread or shared-memory segment behind."""

import functools
import gc
import os
import signal
import threading

import numpy as np
import pytest

import puffercore.vector
from puffercore.testing import CountingEnv


@pytest.fixture
def our_segments():
    """The processes backend's shared segments (memfds) this process still maps or
    holds open; `leaked()` lists them once garbage (the vector env, its views) is gone."""

    class Segments:
        @staticmethod
        def leaked():
            gc.collect()
            with open("/proc/self/maps") as maps:
                found = [line for line in maps if "memfd:puffercore-vector" in line]
            for fd in os.listdir("/proc/self/fd"):
                try:
                    target = os.readlink(f"/proc/self/fd/{fd}")
                except OSError:  # the descriptor listdir itself used
                    continue
                if "memfd:puffercore-vector" in target:
                    found.append(target)
            return found

    return Segments


# Long enough for any loaded machine; only a hang takes this long.
HANG_SECONDS = 30.0


def processes_vec(creator=CountingEnv, num_envs=4, num_workers=2, **kwargs):
    return puffercore.vector.make(creator, num_envs, backend="processes", num_workers=num_workers, **kwargs)


def test_env_error_in_worker_process_names_env_and_traceback():
    # The timeout is a hang check: a lost error would end in a TimeoutError instead.
    vec = processes_vec(functools.partial(CountingEnv, fail_at_step=3), timeout=HANG_SECONDS)
    try:
        vec.reset(seed=0)
        with pytest.raises(RuntimeError, match=r"env \d raised in worker \d(.|\n)*failed on purpose at step 3"):
            for _ in range(5):
                vec.step(np.zeros(4, dtype=np.int64))
    finally:
        vec.close()


def test_error_while_building_envs_in_worker(our_segments):

    def broken(**kwargs):  # only fails inside workers, after the probe in the caller
        if os.getpid() != caller:
            raise OSError("cannot open device")
        return CountingEnv(**kwargs)

    caller = os.getpid()
    with pytest.raises(RuntimeError, match="could not build its envs(.|\n)*cannot open device"):
        processes_vec(broken, start_method="fork")
    assert not our_segments.leaked()


def test_killed_worker_is_detected_without_hanging():
    vec = processes_vec(timeout=HANG_SECONDS)  # an undetected death would end in a TimeoutError
    try:
        vec.reset(seed=0)
        os.kill(vec._processes[1].pid, signal.SIGKILL)
        with pytest.raises(RuntimeError, match=r"worker 1 \(pid \d+\) died with exit code -9"):
            for _ in range(3):
                vec.step(np.zeros(4, dtype=np.int64))
    finally:
        vec.close()


def test_close_twice_joins_workers_and_frees_shared_memory(our_segments):
    vec = processes_vec()
    processes = list(vec._processes)
    vec.reset(seed=0)
    vec.step(np.zeros(4, dtype=np.int64))
    assert our_segments.leaked()  # mapped while the env lives
    vec.close()
    vec.close()
    assert all(not process.is_alive() for process in processes)
    with pytest.raises(RuntimeError, match="closed"):
        vec.step(np.zeros(4, dtype=np.int64))
    del vec
    assert not our_segments.leaked()


def test_garbage_collected_vector_env_cleans_up(our_segments):
    vec = processes_vec()
    processes = list(vec._processes)
    vec.reset(seed=0)
    del vec
    gc.collect()
    for process in processes:
        process.join(timeout=HANG_SECONDS)
    assert all(not process.is_alive() for process in processes)
    assert not our_segments.leaked()


def test_bad_process_arguments():
    with pytest.raises(ValueError, match="num_workers must divide num_envs"):
        processes_vec(num_envs=4, num_workers=3)
    with pytest.raises(ValueError, match="batch_size must be a multiple"):
        processes_vec(num_envs=4, num_workers=2, batch_size=1)
    with pytest.raises(ValueError, match="start_method must be one of"):
        processes_vec(start_method="teleport")


def test_unpicklable_creator_under_spawn_is_named_and_leaks_nothing(our_segments):
    lock = threading.Lock()

    def creator(buffers=None):
        with lock:
            return CountingEnv(buffers=buffers)

    with pytest.raises(TypeError, match=r"env_creator and its kwargs must be picklable \(by cloudpickle\) for "
                                        r"start_method='spawn'(.|\n)*lock"):
        puffercore.vector.make(creator, 2, backend="processes")
    assert not our_segments.leaked()


@pytest.mark.parametrize("batch_size", [4, 2])
def test_processes_match_serial_for_any_worker_count(batch_size):
    """Per-index seeding: 1, 2 or 4 worker processes give the serial trajectories."""
    creator = functools.partial(CountingEnv, episode_length=3)

    def trajectories(**kwargs):
        vec = puffercore.vector.make(creator, 4, batch_size=batch_size, **kwargs)
        per_env = {env: [] for env in range(4)}
        try:
            vec.async_reset(seed=7)
            for _ in range(24):
                obs, rew, term, trunc, _, env_ids, _ = vec.recv()
                for row, env in enumerate(env_ids):
                    per_env[env].append((obs[row].tolist(), float(rew[row]), bool(term[row])))
                # Actions from (env, that env's step count): the same whatever the batching.
                vec.send(np.array([(env + len(per_env[env])) % 4 for env in env_ids]))
        finally:
            vec.close()
        return per_env

    reference = trajectories()
    for workers in (1, 2, 4):
        if batch_size % (4 // workers):
            continue
        got = trajectories(backend="processes", num_workers=workers)
        for env in range(4):
            shared = min(len(got[env]), len(reference[env]))
            # Staggered recv returns whichever envs are ready first: compare the steps
            # both runs took.
            assert shared >= 1 and got[env][:shared] == reference[env][:shared]
