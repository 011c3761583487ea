# cython: language_level=3
"""PcEnvSpecs made at run time, for envs whose reset and step are not compiled C but
C-callable functions produced while Python runs (numba cfuncs: puffercore.numba_env).

`RuntimeSpec` owns the spec and the strings it points to; NativeEnv copies the struct
but keeps reading `name` and `log_names` through the copy, so the RuntimeSpec must
outlive every env made from it (its owner keeps it for the life of the env class).
`HEADER` gives the PcEnv layout that such functions read the header with."""

from cpython.pycapsule cimport PyCapsule_New
from libc.stdint cimport int32_t
from libc.stdlib cimport free, malloc

from puffercore.env cimport PC_ABI_VERSION, PC_FLOAT32, PC_INT32, PC_LOG_SLOTS, PC_UINT8, PcEnv, PcEnvSpec


cdef size_t _offset(PcEnv* env, void* field):
    return <size_t>field - <size_t>env


cdef PcEnv _probe
# Byte offsets of the PcEnv header fields, and its size: the pointers to the env's rows,
# then the PCG32 state, then the float log slots (see native/include/puffercore/env.h).
HEADER = {
    "size": sizeof(PcEnv),
    "observations": _offset(&_probe, &_probe.observations),
    "final_observations": _offset(&_probe, &_probe.final_observations),
    "actions": _offset(&_probe, &_probe.actions),
    "rewards": _offset(&_probe, &_probe.rewards),
    "terminals": _offset(&_probe, &_probe.terminals),
    "truncations": _offset(&_probe, &_probe.truncations),
    "masks": _offset(&_probe, &_probe.masks),
    "rng": _offset(&_probe, &_probe.rng),
    "log": _offset(&_probe, &_probe.log),
}
DTYPES = {"float32": PC_FLOAT32, "uint8": PC_UINT8, "int32": PC_INT32}


cdef class RuntimeSpec:
    """A PcEnvSpec from Python values and the addresses of two `void (*)(void* env)`
    functions; `rows` agent rows per env. Every value is checked here, since a wrong one
    would make NativeEnv step garbage."""

    cdef PcEnvSpec spec
    cdef bytes name_bytes
    cdef list log_bytes  # keeps the strings log_names points into
    cdef const char** log_names

    def __init__(self, name, size_t env_size, int32_t obs_size, obs_dtype, int32_t act_size, act_dtype,
                 log_names, size_t reset_address, size_t step_address, *, int32_t rows=1):
        if env_size < sizeof(PcEnv):
            raise ValueError(f"env_size must be at least sizeof(PcEnv) = {sizeof(PcEnv)}, got {env_size}")
        if obs_size <= 0 or act_size <= 0 or rows <= 0:
            raise ValueError(f"obs_size, act_size and rows must be positive, got {obs_size}, {act_size} and {rows}")
        if obs_dtype not in ("float32", "uint8"):
            raise ValueError(f"obs_dtype must be 'float32' or 'uint8', got {obs_dtype!r}")
        if act_dtype not in ("float32", "int32"):
            raise ValueError(f"act_dtype must be 'float32' or 'int32', got {act_dtype!r}")
        if reset_address == 0 or step_address == 0:
            raise ValueError("reset_address and step_address must be addresses of functions, got 0")
        log_names = list(log_names)
        if len(log_names) >= PC_LOG_SLOTS:
            raise ValueError(f"at most {PC_LOG_SLOTS - 1} log names, got {len(log_names)}")
        self.name_bytes = str(name).encode()
        self.log_bytes = [str(log_name).encode() for log_name in log_names]
        self.log_names = <const char**>malloc(max(len(self.log_bytes), 1) * sizeof(char*))
        if self.log_names == NULL:
            raise MemoryError("cannot allocate the log names")
        for k, log_name in enumerate(self.log_bytes):
            self.log_names[k] = <const char*>log_name
        self.spec.abi_version = PC_ABI_VERSION
        self.spec.name = <const char*>self.name_bytes
        self.spec.env_size = env_size
        self.spec.rows = rows
        self.spec.obs_size = obs_size
        self.spec.obs_dtype = DTYPES[obs_dtype]
        self.spec.act_size = act_size
        self.spec.act_dtype = DTYPES[act_dtype]
        self.spec.num_log = len(self.log_bytes)
        self.spec.log_names = self.log_names
        self.spec.init = NULL
        self.spec.reset = <void (*)(void*) noexcept nogil>reset_address
        self.spec.step = <void (*)(void*) noexcept nogil>step_address
        self.spec.close = NULL

    def __dealloc__(self):
        free(self.log_names)

    def capsule(self):
        """The capsule NativeEnv.__init__ takes; valid while this RuntimeSpec lives."""
        return PyCapsule_New(&self.spec, b"puffercore.PcEnvSpec", NULL)
