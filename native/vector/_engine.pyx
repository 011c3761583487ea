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


# ---- process-shared words (processes backend) --------------------------------------

cdef extern from "shm_sync.h":
    unsigned int pc_shm_load(unsigned int* word) nogil
    void pc_shm_store(unsigned int* word, unsigned int value) nogil
    unsigned int pc_shm_add(unsigned int* word, unsigned int value) nogil
    void pc_shm_wake_all(unsigned int* word) nogil
    unsigned int pc_shm_wait_change(unsigned int* word, unsigned int old, long long spin_ns,
                                    long long timeout_ns) nogil


cdef class SharedWords:
    """Atomic access to a uint32 array living in shared memory, with futex waits that
    wake across processes. Indices are checked here so native code never strays."""
    cdef unsigned int[::1] words

    def __init__(self, unsigned int[::1] words):
        self.words = words

    cdef unsigned int* at(self, Py_ssize_t index) except NULL:
        if index < 0 or index >= self.words.shape[0]:
            raise IndexError(f"shared word index {index} out of range [0, {self.words.shape[0]})")
        return &self.words[index]

    def load(self, Py_ssize_t index):
        return pc_shm_load(self.at(index))

    def store(self, Py_ssize_t index, unsigned int value):
        pc_shm_store(self.at(index), value)

    def add(self, Py_ssize_t index, unsigned int value=1):
        return pc_shm_add(self.at(index), value)

    def wake(self, Py_ssize_t index):
        cdef unsigned int* word = self.at(index)
        with nogil:
            pc_shm_wake_all(word)

    def wait_change(self, Py_ssize_t index, unsigned int old, double spin, double timeout):
        """Block (GIL released) until word != old or `timeout` seconds pass, spinning
        for the first `spin` seconds; return the word."""
        cdef unsigned int* word = self.at(index)
        cdef long long timeout_ns = <long long>(timeout * 1e9)
        cdef long long spin_ns = <long long>(spin * 1e9)
        cdef unsigned int value
        with nogil:
            value = pc_shm_wait_change(word, old, spin_ns, timeout_ns)
        return value
