# cython: boundscheck=False, wraparound=False
"""Python handle on the C++ threads engine. The Python vector env (puffercore.vector)
validates arguments; this layer only converts and releases the GIL while native code
steps or waits."""

from libc.stdint cimport int32_t, int64_t
from libcpp.vector cimport vector

cimport engine
from engine cimport PC_LOG_SLOTS, PcEnvSpec

import numpy as np


cdef class ThreadEngine:
    cdef engine.Engine* handle
    cdef object owner  # keeps the env array (and its buffers) alive while workers run

    def __cinit__(self, owner, size_t spec_address, size_t envs_address, int64_t num_envs,
                  int num_workers, int num_units, int64_t spin_ns, cpus=()):
        cdef vector[int] cpu_list = list(cpus)
        self.owner = owner
        self.handle = new engine.Engine(<const PcEnvSpec*>spec_address, <void*>envs_address,
                                        num_envs, num_workers, num_units, spin_ns, cpu_list)

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

    def send(self, const int32_t[::1] units):
        with nogil:
            self.handle.send(&units[0], <int>units.shape[0])

    def recv(self, int32_t[::1] units_out):
        with nogil:
            self.handle.recv(&units_out[0], <int>units_out.shape[0])

    def take_logs(self, const int32_t[::1] units=None):
        """The episode-log sums the workers gathered for `units` (default: all) since
        last taken, as float64[PC_LOG_SLOTS]; taking clears them."""
        sums = np.zeros(PC_LOG_SLOTS, dtype=np.float64)
        cdef double[::1] out = sums
        if units is None:
            self.handle.take_all_logs(&out[0])
        elif units.shape[0]:
            self.handle.take_logs(&units[0], <int>units.shape[0], &out[0])
        return sums

    @property
    def in_flight(self):
        return self.handle.in_flight()
