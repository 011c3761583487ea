"""The `threads` backend: the C++ engine (native/vector/engine.hpp) steps a native env
array on worker threads, straight into the env's NumPy buffers, with the GIL released.

The creator is called ONCE as `env_creator(num_envs=M, **env_kwargs)` and must return
a `puffercore.ocean.NativeEnv` (an ocean env or your own C env): its M sub-envs are cut
into units of equal size; with W workers and batch_size N there are W * (M / N) units,
so a batch is W units, one per worker, and every worker keeps stepping while the caller
computes actions for the previous batch. Sub-env j is seeded from (seed, j) exactly as
in the serial backend, so trajectories match it bit for bit.
"""

from __future__ import annotations

import collections
import os

import numpy as np

from puffercore._engine import ThreadEngine
from puffercore.checks import check_int
from puffercore.env import check_seed
from puffercore.vector.common import Batcher, VectorEnv, check_batching, check_creator

# How long an idle worker spins, waiting for the next batch, before it sleeps in a
# futex: longer than the caller's usual turn-around between steps (Python, inference),
# so a steady loop never pays a wake-up; short enough that an idle vector env soon
# costs no CPU.
SPIN_NANOSECONDS = 100_000


class Threads(VectorEnv):
    def __init__(self, env_creator, num_envs, num_workers=None, batch_size=None, seed=0,
                 thread_affinity=False, **env_kwargs):
        # Errors name batch_size only if the caller set it (it defaults to num_envs).
        batching = "num_envs" if batch_size is None else "batch_size"
        num_envs, batch_size = check_batching(num_envs, batch_size)
        if num_workers is None:
            # One per core, or fewer so that a batch splits evenly among them.
            cores = len(os.sched_getaffinity(0))
            num_workers = max(w for w in range(1, min(cores, batch_size) + 1) if batch_size % w == 0)
        num_workers = check_int(num_workers, "num_workers", 1)
        num_batches = num_envs // batch_size
        if batch_size % num_workers:
            raise ValueError(
                f"num_workers must divide {batching}={batch_size} (each worker steps an equal share of "
                f"every batch), got {num_workers}"
            )
        num_units = num_workers * num_batches
        cpus = _affinity(thread_affinity)
        self._default_seed = check_seed(seed)

        native_only = (
            "the threads backend steps native (C) envs: env_creator(num_envs=...) must return a "
            "puffercore.ocean.NativeEnv"
        )
        check_creator(env_creator)
        try:
            env = env_creator(num_envs=num_envs, **env_kwargs)
        except TypeError as error:
            if "num_envs" in str(error):
                raise TypeError(f"{native_only}; use backend='processes' for Python envs") from error
            raise
        if not hasattr(env, "envs_address"):
            if hasattr(env, "close"):
                env.close()
            raise TypeError(f"{native_only}, got {type(env).__name__}; use backend='processes' for Python envs")
        if env.num_envs != num_envs:
            env.close()
            raise ValueError(f"env_creator(num_envs={num_envs}) returned an env with {env.num_envs} sub-envs")
        self.env = env
        self._adopt_spaces(env)
        self.num_envs, self.num_agents = env.num_envs, env.num_agents
        self._init_buffers(env.buffers)

        self.batch_size = batch_size
        self.num_creator_envs = num_envs
        self.num_workers = num_workers
        self.envs_per_unit = num_envs // num_units
        self.rows_per_unit = self.num_agents // num_units
        self.units_per_batch = num_workers
        try:  # the OS may refuse threads: RuntimeError naming the one that failed
            self._engine = ThreadEngine(
                env, env.spec_address, env.envs_address, num_envs, num_workers, num_units, SPIN_NANOSECONDS, cpus
            )
        except BaseException:
            env.close()
            raise
        env.stepped_by = type(self).__name__  # env.close() refuses while the engine holds its array
        self._units = np.empty(num_units, dtype=np.int32)
        self._ready: collections.deque[int] = collections.deque()  # reset but not yet returned
        self._batch_units: np.ndarray | None = None  # the units the last recv returned
        self._batch_rows: slice | np.ndarray = slice(0)  # and their rows
        self._batcher = Batcher(self.buffers, num_units, self.envs_per_unit, num_workers)

    # ---- vector API (same contract as Serial) --------------------------------------
    def async_reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self._check_open("async_reset")
        seed = check_seed(seed)
        if seed is None and not self._has_reset:
            seed = self._default_seed
        self._wait_in_flight()
        self.env.reset(seed=seed, options=options)
        self._ready = collections.deque(range(len(self._units)))
        self._batch_units = None
        self._has_reset = True

    def send(self, actions) -> None:
        self._check_stepping("send")
        if self._batch_units is None:
            raise RuntimeError("send() needs a recv() first: send the actions for the rows the last recv() returned")
        units, rows = self._batch_units, self._batch_rows
        if isinstance(rows, slice):
            self.env.write_actions(actions, rows.start, rows.stop)
        else:
            # Through the env too: an env may check more than its action space does
            # (Connect4 rejects full columns).
            self.env.write_unit_actions(actions, units, self.rows_per_unit)
        self._engine.send(units)
        self._batch_units = None

    def recv(self):
        self._check_open("recv")
        if self._batch_units is not None or (not self._ready and not self._engine.in_flight):
            raise RuntimeError("recv() called with nothing pending; call async_reset() or send() first")
        count = self.units_per_batch
        units = self._units[:count]
        from_reset = min(count, len(self._ready))
        for i in range(from_reset):
            units[i] = self._ready.popleft()
        if from_reset < count:
            self._engine.recv(units[from_reset:])
        units = np.sort(units)
        batch = self._batcher.batch(units, self.env.log_info(self._engine.take_logs(units)))
        self._batch_units, self._batch_rows = units, batch.rows
        return batch

    def step(self, actions):
        """The synchronous fast path: every unit at once, no batch bookkeeping."""
        self._check_synchronous("step")
        self._check_stepping("step")
        self.env.write_actions(actions, 0, self.num_agents)
        self._ready.clear()
        self._batch_units = None
        self._engine.step_all()
        return self.observations, self.rewards, self.terminals, self.truncations, self.env.log_info(self._engine.take_logs())

    def render(self):
        return self.env.render()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._engine.close()
            self.env.stepped_by = None
            self.env.close()

    # ---- helpers ----------------------------------------------------------------------
    def _wait_in_flight(self) -> None:
        in_flight = self._engine.in_flight
        if in_flight:
            units = np.empty(in_flight, dtype=np.int32)
            self._engine.recv(units)
            self._engine.take_logs(units)  # episodes ended in steps the caller never received


def _affinity(thread_affinity) -> list[int]:
    """Worker CPUs: [] (no pinning), every core in turn (True), or the given list."""
    if thread_affinity is False or thread_affinity is None:
        return []
    available = sorted(os.sched_getaffinity(0))
    if thread_affinity is True:
        return available
    cpus = list(thread_affinity)
    if not cpus or any(cpu not in available for cpu in cpus):
        raise ValueError(f"thread_affinity must be a bool or a list of CPUs from {available}, got {thread_affinity!r}")
    return cpus
