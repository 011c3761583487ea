"""The `processes` backend: Python envs (gymnasium, PettingZoo, ALE, MuJoCo) stepped in
worker processes that write straight into one shared-memory segment.

Each worker owns a contiguous block of sub-envs (one "unit" of the batch). The step
path uses no pipes: per-worker command and state words live in the shared segment and
are read and written with atomics (puffercore._shared_words.SharedWords) and futex waits
that wake across processes. Pipes carry only setup, episode infos and errors.

Words, per worker w at WORDS_PER_WORKER * w:
  COMMAND_SEQ   bumped by the caller for each command (the worker waits on it)
  COMMAND       STEP / RESET / CLOSE
  DONE_SEQ      set to COMMAND_SEQ by the worker when the command is finished
  STATUS        OK, or ERROR when the command raised (details follow on the pipe)
  HAS_INFO      1 when an info dict follows on the pipe for this command
  HAS_SEED, SEED_LOW, SEED_HIGH   a RESET's seed, when it has one
and one global word, COMPLETED, bumped by every worker that finishes a command: the
caller sleeps on it while it waits for any worker. A worker marks a command done
before it writes the command's message, and the caller reads the message as soon as it
sees the command done: a message of any size passes through the pipe, and neither side
waits on the other to finish first.

This module is the caller's side; the worker's (the segment's layout and words, the
worker loop) is `puffercore.vector.process_worker`.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import multiprocessing.util
import os
import pickle
import signal
import threading
import time

import numpy as np

from puffercore._shared_words import SharedWords
from puffercore.checks import check_int
from puffercore.env import check_actions, check_seed
from puffercore.vector.common import (RESET_AFTER_FAILURE, Batcher, EnvFactory, VectorEnv, check_batching,
                                     merge_infos)
from puffercore.vector.process_worker import (
    CLOSE, COMMAND, COMMAND_SEQ, DONE_SEQ, ERROR, HAS_INFO, HAS_SEED, LIVENESS_PERIOD, MAIN_GUARD_EXIT, RESET,
    SEED_HIGH, SEED_LOW, STATUS, STEP, WORDS_PER_WORKER, CloudPickled, SegmentFd, attach_buffers, attach_words,
    buffer_layout, map_segment, worker_main,
)

# Seconds a waiting process spins before it sleeps in a futex. Waking a sleeping
# process costs tens of microseconds on a virtual machine, so a waiter spins long when
# every process has a core of its own; when workers and caller outnumber the cores a
# spinning process takes the core a CPU-bound Python env needs, so it sleeps almost at
# once (bench/compare_throughput.py measures both cases). Workers still spin long for a
# caller that sends its commands quickly (process_worker's _next_spin), which pays with
# nothing between steps and costs nothing with a CPU policy between them.
SPIN_SECONDS_OWN_CORE = 200e-6
SPIN_SECONDS_SHARED_CORE = 5e-6
# "spawn": a fresh interpreter per worker. "fork" copies the caller, locks held by its
# other threads included (torch, CUDA), the documented source of hangs and leaks.
DEFAULT_START_METHOD = "spawn"


@contextlib.contextmanager
def interrupts_ignored():
    """SIGINT ignored while a worker starts, so that it is born ignoring it (Python keeps
    an ignored SIGINT ignored): Ctrl-C at a terminal signals the whole process group, and
    the caller alone should get the KeyboardInterrupt (the trainer saves and closes the
    workers) instead of every worker printing its own traceback."""
    if threading.current_thread() is not threading.main_thread():  # only it may set handlers
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _default_workers(num_envs: int, batch_size: int) -> int:
    """At least one worker per core where possible, each with an equal share of envs
    that fits whole into a batch."""
    cores = os.cpu_count() or 1
    valid = [w for w in range(1, num_envs + 1) if num_envs % w == 0 and batch_size % (num_envs // w) == 0]
    return next((w for w in valid if w >= min(cores, num_envs)), valid[-1])


class Processes(VectorEnv):
    """Vector env over worker processes; see the module docstring for the protocol.

    The creator and its kwargs travel to the workers: under the default "spawn" start
    method (and "forkserver") cloudpickle must be able to pickle them, as it does
    lambdas, closures and local classes (they then must not hold locks, open files or
    sockets). "fork" takes anything but inherits the caller's threads' locks, the
    documented source of hangs with torch or CUDA initialised.

    `timeout` (seconds, None: off): a worker that takes longer over a step or reset
    makes the call waiting for it raise TimeoutError; see puffercore.vector.make."""

    def __init__(self, env_creator, num_envs, num_workers=None, batch_size=None, seed=0,
                 start_method=None, timeout=None, **env_kwargs):
        if getattr(multiprocessing.current_process(), "_inheriting", False):
            # A spawned worker is importing the caller's script, which makes this env at
            # import time: exit quietly; the caller, seeing the code, names the fix.
            raise SystemExit(MAIN_GUARD_EXIT)
        num_envs, batch_size = check_batching(num_envs, batch_size)
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout > 0):
            raise ValueError(f"timeout must be None or a positive number of seconds, got {timeout!r}")
        self._timeout = timeout
        if num_workers is None:
            num_workers = _default_workers(num_envs, batch_size)
        num_workers = check_int(num_workers, "num_workers", 1)
        if num_envs % num_workers:
            raise ValueError(f"num_workers must divide num_envs={num_envs}, got {num_workers}")
        envs_per_worker = num_envs // num_workers
        if batch_size % envs_per_worker:
            raise ValueError(
                f"batch_size must be a multiple of the envs per worker (num_envs / num_workers = "
                f"{envs_per_worker}), got {batch_size}"
            )
        start_method = DEFAULT_START_METHOD if start_method is None else start_method
        if start_method not in multiprocessing.get_all_start_methods():
            raise ValueError(
                f"start_method must be one of {multiprocessing.get_all_start_methods()}, got {start_method!r}"
            )
        self._default_seed = check_seed(seed)

        factory = EnvFactory(env_creator, env_kwargs)
        probe = factory.probe
        probe.close()
        self._adopt_spaces(probe)
        rows_per_env, sub_envs_per_env = probe.num_agents, probe.num_envs

        self.num_envs = num_envs * sub_envs_per_env
        self.num_agents = num_envs * rows_per_env
        self.num_workers = num_workers
        self.batch_size = batch_size
        self.num_creator_envs = num_envs
        self.envs_per_worker = envs_per_worker
        self.rows_per_worker = envs_per_worker * rows_per_env
        self.workers_per_batch = batch_size // envs_per_worker

        layout, words_offset = buffer_layout(self.num_agents, self.single_observation_space, self.single_action_space)
        num_words = num_workers * WORDS_PER_WORKER + 1
        segment_size = words_offset + 4 * num_words
        own_cores = num_workers + 1 <= (os.cpu_count() or 1)
        self._spin_seconds = SPIN_SECONDS_OWN_CORE if own_cores else SPIN_SECONDS_SHARED_CORE
        # Anonymous shared memory (a memfd, no name in /dev/shm): the kernel frees it with
        # the last process that maps it, so no crash or SIGKILL can leak it.
        fd = os.memfd_create("puffercore-vector")
        try:
            os.ftruncate(fd, segment_size)
            segment = map_segment(fd, segment_size)
            self._init_buffers(attach_buffers(segment, layout))
            self.masks[:] = True  # as Buffers.allocate: rows are live unless an env says not
            self._words = SharedWords(attach_words(segment, words_offset, num_words))
            self._completed = num_words - 1
            config = dict(
                spin_seconds=self._spin_seconds, quick_spin_seconds=SPIN_SECONDS_OWN_CORE,
                factory=CloudPickled(factory), segment=SegmentFd(fd), segment_size=segment_size, layout=layout,
                words_offset=words_offset, num_words=num_words, envs_per_worker=envs_per_worker,
                rows_per_env=rows_per_env, sub_envs_per_env=sub_envs_per_env,
            )
            self._start_workers(multiprocessing.get_context(start_method), config)
        finally:
            os.close(fd)  # each worker has its own descriptor (or mapping) by now

        self._sent_seq = [0] * num_workers
        self._in_flight: list[int] = []
        self._pending_infos: list[dict] = []
        self._ready: collections.deque[int] = collections.deque()  # reset, not yet returned
        self._batch_workers: list[int] | None = None  # workers of the batch recv returned
        self._batch_rows: slice | np.ndarray = slice(0)  # and their rows
        self._batcher = Batcher(self.buffers, num_workers, envs_per_worker, self.workers_per_batch)

    def _start_workers(self, context, config: dict) -> None:
        self._connections, self._processes = [], []
        self._timed_out: list[int] = []  # workers stuck in a command: close() kills them
        # Everything close() needs, without a reference to self, so garbage collection
        # of an unclosed env still shuts the workers down. multiprocessing's Finalize
        # with an exit priority also runs at interpreter exit before multiprocessing
        # terminates its daemon children, a signal the workers ignore (process_worker).
        self._finalizer = multiprocessing.util.Finalize(
            self, _shutdown, (self._processes, self._connections, self._words, self._timed_out), exitpriority=0
        )
        try:
            for worker in range(self.num_workers):
                parent_end, child_end = context.Pipe()
                process = context.Process(target=worker_main, args=(worker, config, child_end), daemon=True)
                try:
                    with interrupts_ignored():
                        process.start()
                except (pickle.PicklingError, AttributeError, TypeError) as error:
                    raise TypeError(
                        f"env_creator and its kwargs must be picklable (by cloudpickle) for start_method="
                        f"{context.get_start_method()!r}, or use start_method='fork': {error}"
                    ) from error
                child_end.close()
                self._connections.append(parent_end)
                self._processes.append(process)
            for worker in range(self.num_workers):
                kind, detail = self._receive(worker, timeout=60.0)
                if kind != "ready":
                    raise RuntimeError(f"worker {worker} could not build its envs (env {detail[0]}):\n{detail[1]}")
        except BaseException:
            self.close()
            raise

    # ---- protocol -------------------------------------------------------------------
    def _receive(self, worker: int, timeout: float | None):
        """The next message of `worker`, waiting up to `timeout` seconds (None: as long
        as the worker lives)."""
        connection, process = self._connections[worker], self._processes[worker]
        deadline = None if timeout is None else time.monotonic() + timeout
        while not connection.poll(LIVENESS_PERIOD):
            # A worker may send its last words and exit between the poll and this check.
            if not process.is_alive() and not connection.poll():
                raise RuntimeError(_death(worker, process))
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"worker {worker} did not answer within {timeout} s")
        try:
            return connection.recv()
        except EOFError:
            raise RuntimeError(_death(worker, process)) from None

    def _command(self, workers, command: int, seed: int | None = None) -> None:
        for worker in workers:
            base = worker * WORDS_PER_WORKER
            if command == RESET:
                self._words.store(base + HAS_SEED, 0 if seed is None else 1)
                if seed is not None:
                    self._words.store(base + SEED_LOW, seed & 0xFFFFFFFF)
                    self._words.store(base + SEED_HIGH, (seed >> 32) & 0xFFFFFFFF)
            self._words.store(base + COMMAND, command)
            self._sent_seq[worker] += 1
            self._words.store(base + COMMAND_SEQ, self._sent_seq[worker])
            self._words.wake(base + COMMAND_SEQ)
        self._in_flight.extend(workers)

    def _finished(self, worker: int) -> bool:
        return self._words.load(worker * WORDS_PER_WORKER + DONE_SEQ) == (self._sent_seq[worker] & 0xFFFFFFFF)

    def _collect(self, count: int) -> list[int]:
        """Wait for `count` in-flight workers to finish; return them, first finished first.
        Once one reports an error, wait for every worker in flight and read what each
        sent, so that no pipe holds a stale message when the caller resets; then raise."""
        done: list[int] = []
        errors: list[tuple[int, int, str]] = []
        deadline = None  # of the timeout, set once a wait found nothing: the hot path reads no clock
        while len(done) < count:
            seen = self._words.load(self._completed)
            for worker in list(self._in_flight):
                if self._finished(worker):
                    self._in_flight.remove(worker)
                    done.append(worker)
                    if self._absorb(worker, errors):
                        count = len(done) + len(self._in_flight)
                    if len(done) == count:
                        break
            if len(done) < count and \
                    self._words.wait_change(self._completed, seen, self._spin_seconds, LIVENESS_PERIOD) == seen:
                deadline = self._check_waiting(deadline)
        if errors:
            (worker, env_index, text), others = errors[0], errors[1:]
            self._fail(f"env {env_index} raised in worker {worker}")
            also = "".join(f"\nenv {e} raised in worker {w} too" for w, e, _ in others)
            raise RuntimeError(f"env {env_index} raised in worker {worker}:\n{text}{also}\n({RESET_AFTER_FAILURE})")
        return done

    def _check_waiting(self, deadline: float | None) -> float | None:
        """No worker finished for LIVENESS_PERIOD: raise if one in flight died or the
        timeout passed; return the timeout's deadline."""
        for worker in self._in_flight:
            if not self._processes[worker].is_alive():
                self._in_flight.clear()
                self._fail(f"worker {worker} died")
                process = self._processes[worker]
                raise RuntimeError(
                    f"worker {worker} (pid {process.pid}) died with {_exit_status(process)} while stepping its envs"
                )
        if self._timeout is None:
            return None
        now = time.monotonic()
        if deadline is None:
            return now + self._timeout - LIVENESS_PERIOD  # the wait that got here counts
        if now < deadline:
            return deadline
        # The stuck workers stay in flight: a reset waits for them again, and close() kills them.
        self._timed_out[:] = self._in_flight
        stuck = "; ".join(self._describe_command(worker) for worker in self._in_flight)
        self._fail(f"worker {self._in_flight[0]} timed out")
        raise TimeoutError(f"{stuck}: not finished within timeout={self._timeout} s; close() kills the workers")

    def _describe_command(self, worker: int) -> str:
        first = worker * self.envs_per_worker
        command = "reset" if self._words.load(worker * WORDS_PER_WORKER + COMMAND) == RESET else "step"
        last = first + self.envs_per_worker - 1
        return f"{command} of envs {first}-{last} in worker {worker} (pid {self._processes[worker].pid})"

    def _absorb(self, worker: int, errors: list) -> bool:
        """Read what a finished worker sent: its infos, or its error (appended to
        `errors`, its infos dropped); True on an error."""
        # The worker writes its message right after marking the command done: wait for it
        # as long as the worker lives, however long a large message takes.
        base = worker * WORDS_PER_WORKER
        if self._words.load(base + STATUS) == ERROR:
            _, (env_index, text) = self._receive(worker, timeout=None)
            errors.append((worker, env_index, text))
            return True
        if self._words.load(base + HAS_INFO):
            _, info = self._receive(worker, timeout=None)
            self._pending_infos.append(info)
        return False

    def _fail(self, failure: str) -> None:
        """The envs are mid-batch in an unknown state: only a reset continues."""
        self._failure = failure
        self._ready.clear()
        self._batch_workers = None

    def _drain_infos(self) -> dict:
        infos, self._pending_infos = self._pending_infos, []
        return merge_infos(infos)

    # ---- vector API (same contract as Serial) --------------------------------------
    def async_reset(self, seed: int | None = None, options: dict | None = None) -> None:
        """Reset every env and wait for it: resets are rare, and a barrier here makes the
        first batches come back in env order, as from the serial backend."""
        self._check_open("async_reset")
        seed = self._reset_seed(seed)
        self._collect(len(self._in_flight))  # let anything still stepping finish
        self._pending_infos.clear()
        self._command(range(self.num_workers), RESET, seed)
        self._collect(self.num_workers)
        self._ready = collections.deque(range(self.num_workers))
        self._batch_workers = None
        self._has_reset = True
        self._failure = None
        self._timed_out.clear()  # those finished after all

    def send(self, actions) -> None:
        self._check_stepping("send")
        if self._batch_workers is None:
            raise RuntimeError("send() needs a recv() first: send the actions for the rows the last recv() returned")
        self.actions[self._batch_rows] = check_actions(
            actions, self.single_action_space, self.rows_per_worker * self.workers_per_batch
        )
        self._command(self._batch_workers, STEP)
        self._batch_workers = None

    def recv(self):
        """The first `batch_size` envs to finish, as views when their workers' rows are
        one block (always for synchronous use), else gathered into a staging copy."""
        self._check_not_failed("recv")
        if self._batch_workers is not None or (not self._in_flight and not self._ready):
            raise RuntimeError("recv() called with nothing pending; call async_reset() or send() first")
        workers = [self._ready.popleft() for _ in range(min(self.workers_per_batch, len(self._ready)))]
        workers = sorted(workers + self._collect(self.workers_per_batch - len(workers)))
        batch = self._batcher.batch(workers, self._drain_infos())
        self._batch_workers, self._batch_rows = workers, batch.rows
        return batch

    def close(self) -> None:
        self._closed = True
        self._finalizer()


def _death(worker: int, process) -> str:
    status = _exit_status(process)
    if process.exitcode == MAIN_GUARD_EXIT:
        return ("the processes backend's workers import the main script, and this one makes its vector env when "
                "imported: put the script's code under `if __name__ == \"__main__\":`")
    return f"worker {worker} (pid {process.pid}) died with {status}"


def _exit_status(process) -> str:
    """How a dead worker ended. One whose pipe has just closed may not be reaped yet:
    wait a moment for its exit code rather than report None."""
    process.join(timeout=1.0)
    code = process.exitcode
    if code is None:
        return "no exit code yet (its pipe closed, the process is still running)"
    if code < 0:
        return f"exit code {code} (killed by signal {-code}: {signal.strsignal(-code)})"
    return f"exit code {code}"


def _shutdown(processes, connections, words, timed_out) -> None:
    for worker in timed_out:  # would never read CLOSE
        processes[worker].kill()
    for worker, process in enumerate(processes):
        if process.is_alive():
            base = worker * WORDS_PER_WORKER
            words.store(base + COMMAND, CLOSE)
            words.add(base + COMMAND_SEQ, 1)
            words.wake(base + COMMAND_SEQ)
    for process in processes:
        process.join(timeout=2.0)
        if process.is_alive():
            process.kill()
            process.join()
    for connection in connections:
        connection.close()
