# Cython declarations of the threads engine (engine.hpp).
from libc.stdint cimport int32_t, int64_t
from libcpp.vector cimport vector

cdef extern from "puffercore/env.h":
    enum: PC_LOG_SLOTS
    ctypedef struct PcEnvSpec:
        pass

cdef extern from "engine.hpp" namespace "puffercore":
    cdef cppclass Engine:
        Engine(const PcEnvSpec* spec, void* envs, int64_t num_envs, int num_workers, int num_units,
               int64_t spin_ns, vector[int] cpus) except +
        void step_all() except + nogil
        void send(const int32_t* units, int count) except + nogil
        void recv(int32_t* units_out, int count) except + nogil
        void take_logs(const int32_t* units, int count, double* out) except +
        void take_all_logs(double* out)
        void close() nogil
        int num_units()
        int num_workers()
        int in_flight()
