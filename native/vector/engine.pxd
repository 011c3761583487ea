# Cython declarations of the threads engine (engine.hpp).
from libc.stdint cimport int64_t
from libcpp.vector cimport vector

cdef extern from "puffercore/env.h":
    enum: PC_LOG_SLOTS
    ctypedef struct PcEnvSpec:
        pass

cdef extern from "engine.hpp" namespace "puffercore":
    cdef cppclass Engine:
        Engine(const PcEnvSpec* spec, void* envs, int64_t num_envs, int num_workers, int num_batches,
               int64_t spin_ns, vector[int] cpus) except +
        void step_all() except + nogil
        void send(int batch) except + nogil
        int recv() except + nogil
        void take_logs(int batch, double* out) except +
        void take_all_logs(double* out)
        void close() nogil
        int num_batches()
        int num_workers()
        int in_flight()
