# cython: boundscheck=False, wraparound=False
"""Python handle on the C++ threads engine. The Python vector env (puffercore.vector)
validates arguments; this layer only converts and releases the GIL while native code
steps or waits."""

from libc.stdint cimport int64_t
from libc.string cimport memset
from libcpp.vector cimport vector

cimport engine
from engine cimport PC_LOG_SLOTS, PcEnvSpec

import numpy as np


cdef class ThreadEngine:
    cdef engine.Engine* handle
    cdef object owner  # keeps the env array (and its buffers) alive while workers run
    cdef object sums  # float64[PC_LOG_SLOTS]: what take_logs returns, reused
    cdef double[::1] sums_view

    def __cinit__(self, owner, size_t spec_address, size_t envs_address, int64_t num_envs,
                  int num_workers, int num_batches, int64_t spin_ns, cpus=()):
        cdef vector[int] cpu_list = list(cpus)
        self.owner = owner
        self.sums = np.zeros(PC_LOG_SLOTS, dtype=np.float64)
        self.sums_view = self.sums
        self.handle = new engine.Engine(<const PcEnvSpec*>spec_address, <void*>envs_address,
                                        num_envs, num_workers, num_batches, spin_ns, cpu_list)

    def __dealloc__(self):
        if self.handle != NULL:
            with nogil:
                self.handle.close()
            del self.handle
            self.handle = NULL

    def close(self):
        if self.handle != NULL:
            with nogil:
                self.handle.close()

    def step_all(self):
        with nogil:
            self.handle.step_all()

    def send(self, int batch):
        with nogil:
            self.handle.send(batch)

    def recv(self):
        """The id of the oldest batch in flight, once all its envs have stepped."""
        cdef int batch
        with nogil:
            batch = self.handle.recv()
        return batch

    def take_logs(self, batch=None):
        """The episode-log sums the workers gathered for `batch` (default: all) since
        last taken, as float64[PC_LOG_SLOTS]; taking clears them. The array is the same
        one every call, valid until the next: it is read once per step, and a new array
        each time cost more than the step's bookkeeping."""
        memset(&self.sums_view[0], 0, PC_LOG_SLOTS * sizeof(double))
        if batch is None:
            self.handle.take_all_logs(&self.sums_view[0])
        else:
            self.handle.take_logs(batch, &self.sums_view[0])
        return self.sums

    @property
    def in_flight(self):
        return self.handle.in_flight()
