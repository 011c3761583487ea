# cython: language_level=3
"""PcEnvSpecs made at run time, for envs whose reset and step are not compiled C but
C-callable functions produced while Python runs (numba cfuncs: puffercore.numba_env).

`RuntimeSpec` owns the spec and the strings and bounds it points to; NativeEnv copies
the struct but keeps reading `name` and `log_names` through the copy, so the RuntimeSpec
must outlive every env made from it (its owner keeps it for the life of the env class).
`HEADER` gives the PcEnv layout that such functions read the header with."""

import gymnasium
import numpy as np

from cpython.pycapsule cimport PyCapsule_New
from libc.stdlib cimport free, malloc

from puffercore.env cimport PC_ABI_VERSION, PC_FLOAT32, PC_INT32, PC_LOG_SLOTS, PC_UINT8, PcBounds, PcEnv, PcEnvSpec
from puffercore.spaces import flat_bounds


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
    "rng": _offset(&_probe, &_probe.rng),
    "log": _offset(&_probe, &_probe.log),
    "masks": _offset(&_probe, &_probe.masks),
}
DTYPES = {"float32": PC_FLOAT32, "uint8": PC_UINT8}  # of observations


cdef PcBounds _per_element(const float[::1] low, const float[::1] high):
    cdef PcBounds bounds
    bounds.lows, bounds.highs = &low[0], &high[0]
    return bounds


cdef class RuntimeSpec:
    """A PcEnvSpec from Python values: the spaces of one row (a float32 or uint8 Box;
    Discrete, 1-d MultiDiscrete or float32 Box), which the spec declares as flat bounds,
    the addresses of two `void (*)(void* env)` functions, and `rows` agent rows per env.
    Every value is checked here, since a wrong one would make NativeEnv step garbage."""

    cdef PcEnvSpec spec
    cdef bytes name_bytes
    cdef list log_bytes  # keeps the strings log_names points into
    cdef const char** log_names
    cdef object bounds  # keeps the float32 arrays the spec's bounds point into

    def __init__(self, name, size_t env_size, observation_space, action_space, log_names, size_t reset_address,
                 size_t step_address, *, int rows=1):
        if env_size < sizeof(PcEnv):
            raise ValueError(f"env_size must be at least sizeof(PcEnv) = {sizeof(PcEnv)}, got {env_size}")
        if not isinstance(observation_space, gymnasium.spaces.Box) or observation_space.dtype.name not in DTYPES:
            raise ValueError(f"observation_space must be a float32 or uint8 Box, got {observation_space!r}")
        discrete = isinstance(action_space, (gymnasium.spaces.Discrete, gymnasium.spaces.MultiDiscrete))
        if not discrete and not (isinstance(action_space, gymnasium.spaces.Box) and action_space.dtype == np.float32):
            raise ValueError(f"action_space must be Discrete, MultiDiscrete or a float32 Box, got {action_space!r}")
        if rows <= 0:
            raise ValueError(f"rows must be positive, got {rows}")
        if reset_address == 0 or step_address == 0:
            raise ValueError("reset_address and step_address must be addresses of functions, got 0")
        log_names = list(log_names)
        if len(log_names) >= PC_LOG_SLOTS:
            raise ValueError(f"at most {PC_LOG_SLOTS - 1} log names, got {len(log_names)}")
        bounds = flat_bounds(observation_space) + flat_bounds(action_space)  # obs low, high, act low, high
        self.bounds = [np.ascontiguousarray(bound, np.float32) for bound in bounds]
        if any((as_float32 != bound).any() for as_float32, bound in zip(self.bounds, bounds)):
            raise ValueError("the spaces' bounds must be float32 values (discrete ones below 2**24 in size)")
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
        self.spec.obs_size = self.bounds[0].size
        self.spec.obs_dtype = DTYPES[observation_space.dtype.name]
        self.spec.act_size = self.bounds[2].size
        self.spec.act_dtype = PC_INT32 if discrete else PC_FLOAT32
        self.spec.num_log = len(self.log_bytes)
        self.spec.log_names = self.log_names
        self.spec.init = NULL
        self.spec.reset = <void (*)(void*) noexcept nogil>reset_address
        self.spec.step = <void (*)(void*) noexcept nogil>step_address
        self.spec.close = NULL
        self.spec.obs_bounds = _per_element(self.bounds[0], self.bounds[1])
        self.spec.act_bounds = _per_element(self.bounds[2], self.bounds[3])

    def __dealloc__(self):
        free(self.log_names)

    def capsule(self):
        """The capsule NativeEnv.__init__ takes; valid while this RuntimeSpec lives."""
        return PyCapsule_New(&self.spec, b"puffercore.PcEnvSpec", NULL)
