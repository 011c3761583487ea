"""The serial backend: the reference every other backend is compared with."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from puffercore.env import PufferEnv, check_actions, check_seed
from puffercore.vector.common import (RESET_AFTER_FAILURE, Batcher, BatchStepper, EnvFactory, VectorEnv,
                                     check_batching, merge_infos)


class Serial(VectorEnv):
    """The reference backend: every env stepped in turn on the calling thread. Given
    `buffers` (rows of a bigger vector), it is itself a sub-env that vectors can nest."""

    def __init__(self, env_creator, num_envs, num_workers=None, batch_size=None, seed=0, buffers=None, **env_kwargs):
        num_envs, batch_size = check_batching(num_envs, batch_size)
        if num_workers not in (None, 1):
            raise ValueError(f"num_workers must be None or 1 for the serial backend, got {num_workers!r}")
        self._default_seed = check_seed(seed)
        self.batch_size = batch_size
        self.num_creator_envs = num_envs
        self.envs: list[PufferEnv] = []
        try:
            self._create_envs(env_creator, num_envs, buffers, env_kwargs)
        except BaseException:
            self.close()
            raise
        # Batch b is envs [b*N, (b+1)*N), always one block: the Batcher's unit is a batch.
        self._num_batches = num_envs // batch_size
        self._batcher = Batcher(self.buffers, self._num_batches, batch_size, 1)
        self._ready: collections.deque[int] = collections.deque()  # batches recv may return
        self._batch_infos: dict[int, list[dict]] = {}
        self._awaiting_actions: int | None = None  # batch returned by the last recv
        self._awaiting_rows = slice(0)  # its rows
        self._has_reset = False

    def _create_envs(self, env_creator, num_envs, buffers, env_kwargs) -> None:
        factory = EnvFactory(env_creator, env_kwargs)
        probe = factory.probe
        probe.close()
        self._adopt_spaces(probe)
        rows, sub_envs = probe.num_agents, probe.num_envs
        self.num_agents, self.num_envs = num_envs * rows, num_envs * sub_envs
        self._init_buffers(buffers)
        self._sub_envs_per_env = sub_envs
        for index in range(num_envs):
            self.envs.append(factory(self.buffers.rows(index * rows, (index + 1) * rows)))
        rows_per_batch = self.batch_size * rows
        self._steppers = [
            BatchStepper(self.envs[first : first + self.batch_size],
                         self.buffers.rows(first * rows, first * rows + rows_per_batch))
            for first in range(0, num_envs, self.batch_size)
        ]

    def async_reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self._check_open("async_reset")
        seed = self._reset_seed(seed)
        self._ready = collections.deque(range(self._num_batches))
        self._batch_infos = {batch: [] for batch in self._ready}
        for index, env in enumerate(self.envs):
            env.env_index_base = self.env_index_base + index * self._sub_envs_per_env
            self._batch_infos[index // self.batch_size].append(env.reset(seed=seed, options=options)[1])
        self._awaiting_actions = None
        self._has_reset = True
        self._failure = None

    def send(self, actions: Any) -> None:
        self._check_stepping("send")
        if self._awaiting_actions is None:
            raise RuntimeError("send() needs a recv() first: send the actions for the rows the last recv() returned")
        batch, rows = self._awaiting_actions, self._awaiting_rows
        np.copyto(self.actions[rows], check_actions(actions, self.single_action_space, rows.stop - rows.start))
        self._awaiting_actions = None
        stepper = self._steppers[batch]
        try:
            self._batch_infos[batch].extend(stepper())
        except BaseException as error:
            # The env's own exception, as the reference backend raises it, and what now.
            self._failure = f"env {batch * self.batch_size + stepper.failed} raised"
            self._ready.clear()
            if hasattr(error, "add_note"):  # Python >= 3.11
                error.add_note(f"({self._failure} in a serial vector env: {RESET_AFTER_FAILURE})")
            raise
        self._ready.append(batch)

    def recv(self):
        self._check_not_failed("recv")
        if not self._ready:
            raise RuntimeError("recv() called with nothing pending; call async_reset() or send() first")
        batch = self._ready.popleft()
        info = merge_infos(self._batch_infos[batch])
        self._batch_infos[batch] = []
        result = self._batcher.batch((batch,), info)
        self._awaiting_actions, self._awaiting_rows = batch, result.rows
        return result

    def render(self):
        """The render of env 0, as the threads backend renders its sub-env 0."""
        self._check_open("render")
        return self.envs[0].render()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for env in self.envs:
                env.close()
