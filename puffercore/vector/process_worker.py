"""The worker side of the `processes` backend (the protocol is described in
`puffercore.vector.processes`): the shared segment's layout and command words, the
helpers that carry a creator and the segment's descriptor to a worker, and the worker
process's main loop. The caller's side is `processes.Processes`."""

from __future__ import annotations

import dataclasses
import mmap
import os
import pickle
import signal
import time
import traceback
from multiprocessing import reduction

import cloudpickle
import numpy as np

from puffercore._shared_words import SharedWords
from puffercore.env import Buffers
from puffercore.vector.common import BatchStepper, merge_infos

# The words of each worker (see the table in puffercore.vector.processes); the last word
# of the array is COMPLETED.
COMMAND_SEQ, COMMAND, DONE_SEQ, STATUS, HAS_INFO, SEED_LOW, SEED_HIGH, HAS_SEED = range(8)
WORDS_PER_WORKER = 16  # 64 bytes: one cache line per worker, no false sharing
STEP, RESET, CLOSE = 1, 2, 3
OK, ERROR = 0, 1
# How long a waiter sleeps between checks that its peer process is still alive.
LIVENESS_PERIOD = 0.05
# The exit code of a spawned worker that, importing the caller's script, reached code
# that starts workers: the script lacks its `if __name__ == "__main__":` guard.
MAIN_GUARD_EXIT = 86


def buffer_layout(num_agents: int, observation_space, action_space) -> tuple[dict, int]:
    """Byte offsets of every Buffers field (64-byte aligned) and the words array."""
    template = Buffers.allocate(1, observation_space, action_space)
    layout, offset = {}, 0
    for field in dataclasses.fields(Buffers):
        array = getattr(template, field.name)
        shape = (num_agents, *array.shape[1:])
        layout[field.name] = (offset, shape, array.dtype.str)
        offset += -(-int(np.prod(shape)) * array.dtype.itemsize // 64) * 64
    return layout, offset


class CloudPickled:
    """A value on its way to a worker, pickled with cloudpickle: spawn and forkserver
    then take lambdas and closures (`lambda: gymnasium.make(...)`) as well as what plain
    pickle takes by name; fork passes it as is."""

    def __init__(self, value):
        self.value = value

    def __getstate__(self):
        return cloudpickle.dumps(self.value)

    def __setstate__(self, payload):
        self.value = pickle.loads(payload)


class SegmentFd:
    """The file descriptor of the shared segment, on its way to a worker. Pickling it
    (spawn, forkserver) has multiprocessing hand the child a duplicate, as it does for
    the pipes; fork passes it as is, the child having inherited the descriptor."""

    def __init__(self, fd: int):
        self.fd = fd

    def __reduce__(self):
        return _rebuild_segment_fd, (reduction.DupFd(self.fd),)


def _rebuild_segment_fd(duplicate) -> SegmentFd:
    return SegmentFd(duplicate.detach())


def map_segment(fd: int, size: int) -> mmap.mmap:
    """Map the segment (the mmap keeps a descriptor of its own). It is never closed
    explicitly: every array on it holds it as its base, so the memory stays mapped until
    the last view of it is gone, whether the vector env was closed or not."""
    return mmap.mmap(fd, size)


def attach_buffers(segment: mmap.mmap, layout: dict) -> Buffers:
    arrays = {
        name: np.ndarray(shape, dtype=np.dtype(dtype), buffer=segment, offset=offset)
        for name, (offset, shape, dtype) in layout.items()
    }
    return Buffers(**arrays)


def attach_words(segment: mmap.mmap, offset: int, count: int) -> np.ndarray:
    return np.ndarray(count, dtype=np.uint32, buffer=segment, offset=offset)


def worker_main(worker: int, config: dict, connection) -> None:
    """Entry point of a worker process: build its envs on its rows of the shared
    buffers, then serve commands until CLOSE or until the parent disappears."""
    # The caller owns the workers' lifetime (close() stops them, kills a stuck one; they
    # leave when it dies). Ctrl-C, `timeout` and torchrun signal the whole process group
    # and Slurm every process of the job: a trainer finishing its update before it saves
    # needs its workers stepping until then.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    fd = config["segment"].fd
    segment = map_segment(fd, config["segment_size"])
    os.close(fd)
    buffers = attach_buffers(segment, config["layout"])
    words = SharedWords(attach_words(segment, config["words_offset"], config["num_words"]))
    base = worker * WORDS_PER_WORKER
    completed = config["num_words"] - 1
    envs_per_worker, rows_per_env = config["envs_per_worker"], config["rows_per_env"]
    first_env = worker * envs_per_worker
    parent = os.getppid()

    def finish(seq: int, status: int, has_info: int) -> None:
        words.store(base + STATUS, status)
        words.store(base + HAS_INFO, has_info)
        words.store(base + DONE_SEQ, seq)
        words.add(completed, 1)
        words.wake(completed)

    envs = []
    try:
        for j in range(envs_per_worker):
            rows = (first_env + j) * rows_per_env
            env = config["factory"].value(buffers.rows(rows, rows + rows_per_env))
            env.env_index_base = (first_env + j) * config["sub_envs_per_env"]
            envs.append(env)
        first_row = first_env * rows_per_env
        step = BatchStepper(envs, buffers.rows(first_row, first_row + envs_per_worker * rows_per_env))
        connection.send(("ready", None))
    except BaseException:
        connection.send(("error", (first_env, traceback.format_exc())))
        return

    seen, spin, finished_at = 0, config["spin_seconds"], None
    while True:
        seq = words.wait_change(base + COMMAND_SEQ, seen, spin, LIVENESS_PERIOD)
        if seq == seen:
            if os.getppid() != parent:  # the caller died without closing us
                break
            continue
        seen = seq
        if finished_at is not None:
            spin = _next_spin(time.perf_counter() - finished_at, config)
        command = words.load(base + COMMAND)
        if command == CLOSE:
            break
        current = first_env
        try:
            if command == RESET:
                seed = None
                if words.load(base + HAS_SEED):
                    seed = words.load(base + SEED_LOW) | (words.load(base + SEED_HIGH) << 32)
                infos = []
                for j, env in enumerate(envs):
                    current = first_env + j
                    info = env.reset(seed=seed)[1]
                    if info:
                        infos.append(info)
            else:
                infos = step()
            # One merged dict (exact: merge_infos weighs by episodes).
            message = ("info", merge_infos(infos)) if infos else None
            status = OK
        except BaseException:
            failed = first_env + step.failed if command == STEP else current
            message, status = ("error", (failed, traceback.format_exc())), ERROR
        # Done first, then the message: a message larger than the pipe's buffer blocks the
        # send until the caller reads it, which it does once it sees the command done.
        finish(seq, status, 1 if status == OK and message is not None else 0)
        if message is not None:
            connection.send(message)
        finished_at = time.perf_counter()
    for env in envs:
        env.close()


def _next_spin(idle_seconds: float, config: dict) -> float:
    """How long to spin for the next command, from how long the caller took to send this
    one. A caller that answers within `quick_spin_seconds` has little to do between
    steps (no policy on this machine's cores): spinning catches its next command without
    a futex wake-up, which costs tens of microseconds on a VM. A slower caller is
    computing on a core the worker would take: sleep almost at once."""
    quick = config["quick_spin_seconds"]
    return quick if idle_seconds < quick else config["spin_seconds"]
