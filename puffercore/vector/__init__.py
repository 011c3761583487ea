"""Vector envs: many sub-envs stepped as one PufferEnv over one set of buffers.

    vec = puffercore.vector.make(env_creator, num_envs, backend="serial", seed=0)
    obs, info = vec.reset()                          # synchronous (batch_size == num_envs)
    obs, rew, term, trunc, info = vec.step(actions)
    vec.async_reset(); obs, rew, term, trunc, info, env_ids, masks = vec.recv()
    vec.send(actions)                                # actions for the rows recv returned

`env_creator(**env_kwargs)` returns a PufferEnv (called again with `buffers=` so it
writes straight into the vector's buffers), a gymnasium Env (wrapped in GymnasiumEnv)
or a PettingZoo ParallelEnv (wrapped in PettingZooEnv). Every creator call is one
"env" of the vector: `env_ids` and `batch_size` count them, and its rows are
contiguous. (`num_envs` of the vector, as of any PufferEnv, counts independent
sub-envs, which differs when a creator returns a multi-env PufferEnv.)

Staggered batching: with `batch_size = N < num_envs = M` (N divides M), `recv` returns
the rows of N envs (fixed blocks, round-robin, on serial and threads; whichever workers
finish first on processes); `send` steps exactly the envs of the last `recv`. The `ale`
backend (`vector/ale.py`) runs Atari games on ale-py's C++ vector env, all envs at once.

The batch contract, the same on every backend: `recv()` returns a `Batch`, a tuple that
unpacks as `(obs, rew, term, trunc, info, env_ids, masks)` and carries every item by
name too, plus two more:

    batch = vec.recv()
    batch.final_observations   # the batch's rows of vec.final_observations
    batch.rows                 # those rows of the vector's buffers: a slice, or an index array
    batch.env_ids              # the envs of the batch, ascending; each owns its consecutive rows

When the batch's envs are one block of rows (always on serial and threads, and for
synchronous use),
its arrays are zero-copy views of the vector's buffers, `rows` is a slice, and the
views stay valid until the next `send`/`step`. A scattered batch (processes, when
workers finish out of order) is gathered into staging copies, valid until the next
`recv`, and `rows` is an index array: `vec.final_observations[batch.rows]` equals
`batch.final_observations` either way. A final observation is meaningful in the rows
that ended (`term | trunc`): the last observation of the ended episode, whose first
next observation is already in `obs` (same-step autoreset). `step()` returns the plain
5-tuple; its final observations are `vec.final_observations`.

Backends register in `BACKENDS`; each takes the arguments of `make` (minus `backend`).
"""

from __future__ import annotations

from typing import Any, Callable

from puffercore.env import PufferEnv
from puffercore.vector.ale import Ale
from puffercore.vector.common import Batch, merge_infos
from puffercore.vector.processes import Processes
from puffercore.vector.serial import Serial
from puffercore.vector.threads import Threads

BACKENDS: dict[str, type[PufferEnv]] = {"serial": Serial, "threads": Threads, "processes": Processes, "ale": Ale}


def make(
    env_creator: Callable[..., Any],
    num_envs: int,
    backend: str = "serial",
    num_workers: int | None = None,
    batch_size: int | None = None,
    seed: int = 0,
    timeout: float | None = None,
    **env_kwargs,
) -> PufferEnv:
    """A vector of `num_envs` envs from `env_creator(**env_kwargs)` on `backend`.
    `seed` seeds the first `reset()`/`async_reset()` that is given no seed.
    `timeout` (processes backend only; None: wait forever): seconds a worker may take over
    a step or reset before recv()/step()/reset() raises TimeoutError naming the worker and
    its envs; a hung worker stays hung, so close() the vector env, which kills it."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {sorted(BACKENDS)}, got {backend!r}")
    if timeout is not None:
        if backend != "processes":
            raise ValueError(f"timeout is an option of the processes backend only, got backend={backend!r}")
        env_kwargs["timeout"] = timeout
    return BACKENDS[backend](
        env_creator, num_envs, num_workers=num_workers, batch_size=batch_size, seed=seed, **env_kwargs
    )


__all__ = ["BACKENDS", "Ale", "Batch", "Processes", "Serial", "Threads", "make", "merge_infos"]
