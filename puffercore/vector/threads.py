"""The `threads` backend: the C++ engine (native/vector/engine.hpp) steps a native env
array on worker threads, straight into the env's NumPy buffers, with the GIL released.

The creator is called ONCE as `env_creator(num_envs=M, **env_kwargs)` and must return
a `puffercore.ocean.NativeEnv` (an ocean env or your own C env). With batch_size N its M
sub-envs form M / N fixed batches of consecutive envs, batch b being envs [b*N, (b+1)*N)
as in the serial backend; each batch is cut into one slice per worker. Worker 0 is the
calling thread and the other W - 1 are engine threads: they step the batches the caller
sent while it computes actions for the one it holds, and the caller steps its slice of a
batch when it waits for it in recv (so with num_workers=1 nothing overlaps).
Batches come back in the order they were sent, each a view of one block of the
buffers: recv neither gathers nor scatters rows. Sub-env j is seeded from (seed, j)
exactly as in the serial backend, so trajectories match it bit for bit.
"""

from __future__ import annotations

import collections
import os


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
        try:  # the OS may refuse threads: RuntimeError naming the one that failed
            self._engine = ThreadEngine(
                env, env.spec_address, env.envs_address, num_envs, num_workers, num_batches, SPIN_NANOSECONDS, cpus
            )
        except BaseException:
            env.close()
            raise
        env.stepped_by = type(self).__name__  # env.close() refuses while the engine holds its array
        self._num_batches = num_batches
        self._ready: collections.deque[int] = collections.deque()  # batches reset but not yet returned
        self._held: int | None = None  # the batch the last recv returned, awaiting its actions
        self._rows: slice = slice(0)  # and its rows
        self._batcher = Batcher(self.buffers, num_batches, batch_size, 1)

    # ---- vector API (same contract as Serial) --------------------------------------
    def async_reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self._check_open("async_reset")
        seed = self._reset_seed(seed)
        self._wait_in_flight()
        self.env.reset(seed=seed, options=options)
        self._ready = collections.deque(range(self._num_batches))
        self._held = None
        self._has_reset = True

    def send(self, actions) -> None:
        if self._closed or self._failure is not None or not self._has_reset:
            self._check_stepping("send")  # raises the error that names what is wrong
        if self._held is None:
            raise RuntimeError("send() needs a recv() first: send the actions for the rows the last recv() returned")
        self.env.write_actions(actions, self._rows.start, self._rows.stop)
        self._engine.send(self._held)
        self._held = None

    def recv(self):
        if self._closed:
            self._check_open("recv")
        if self._held is not None or (not self._ready and not self._engine.in_flight):
            raise RuntimeError("recv() called with nothing pending; call async_reset() or send() first")
        held = self._ready.popleft() if self._ready else self._engine.recv()
        batch = self._batcher.batch((held,), self.env.log_info(self._engine.take_logs(held)))
        self._held, self._rows = held, batch.rows
        return batch

    def step(self, actions):
        """The synchronous fast path: every unit at once, no batch bookkeeping."""
        self._check_synchronous("step")
        self._check_stepping("step")
        self.env.write_actions(actions, 0, self.num_agents)
        self._ready.clear()
        self._held = None
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
        while self._engine.in_flight:
            self._engine.take_logs(self._engine.recv())  # episodes ended in steps the caller never received


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
