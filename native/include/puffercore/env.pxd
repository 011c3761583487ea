# Cython declarations of env.h (the env ABI) for env bindings: `from puffercore.env
# cimport PcEnvSpec, spec_capsule`. Ships with the headers in puffercore.get_include(),
# so envs outside the source tree build against an installed puffercore.

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from cpython.pycapsule cimport PyCapsule_New

cdef extern from "puffercore/env.h" nogil:
    int PC_ABI_VERSION
    enum: PC_LOG_SLOTS
    enum PcDtype:
        PC_FLOAT32
        PC_UINT8
        PC_INT32

    ctypedef struct PcRng:
        uint64_t state
        uint64_t inc

    ctypedef struct PcEnv:
        void* observations
        void* final_observations
        void* actions
        float* rewards
        uint8_t* terminals
        uint8_t* truncations
        uint8_t* masks
        PcRng rng
        float log[16]

    ctypedef struct PcBounds:
        float low
        float high
        const float* lows
        const float* highs

    ctypedef struct PcEnvSpec:
        int32_t abi_version
        const char* name
        size_t env_size
        int32_t rows
        int32_t obs_size
        int32_t obs_dtype
        int32_t act_size
        int32_t act_dtype
        int32_t num_log
        const char* const* log_names
        void (*init)(void* env)
        void (*reset)(void* env)
        void (*step)(void* env)
        void (*close)(void* env)
        PcBounds obs_bounds
        PcBounds act_bounds

    size_t pc_dtype_size(int32_t dtype)
    void* pc_env_at(const PcEnvSpec* spec, void* envs, int64_t index)
    void pc_env_bind(const PcEnvSpec* spec, PcEnv* env, int64_t index, void* observations,
                     void* final_observations, void* actions, float* rewards,
                     uint8_t* terminals, uint8_t* truncations, uint8_t* masks)
    void pc_reset_range(const PcEnvSpec* spec, void* envs, int64_t begin, int64_t end,
                        uint64_t seed, uint64_t index_base)
    void pc_step_range(const PcEnvSpec* spec, void* envs, int64_t begin, int64_t end)
    void pc_drain_logs(const PcEnvSpec* spec, void* envs, int64_t begin, int64_t end, double* out)

cdef extern from "puffercore/rng.h" nogil:
    void pc_rng_seed(PcRng* rng, uint64_t seed, uint64_t stream)


cdef inline object spec_capsule(const PcEnvSpec* spec):
    """Wrap an env's static spec for puffercore.ocean.NativeEnv.__init__ (which reads
    capsules of exactly this name)."""
    return PyCapsule_New(<void*>spec, b"puffercore.PcEnvSpec", NULL)
