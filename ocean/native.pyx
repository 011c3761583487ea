# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The one generic binding of C envs: `NativeEnv`, a PufferEnv around an array of env
structs that share puffercore's env ABI (native/include/puffercore/env.h).

An env binding (ocean/<name>/<name>.pyx, or a user's own .pyx) subclasses NativeEnv:
its `__init__` checks its keyword arguments and calls `NativeEnv.__init__` with
`spec_capsule(&ITS_SPEC)`; its `_configure(address)` writes the config fields of one env
struct. NativeEnv does the rest: builds the spaces the spec declares, allocates the env
array, binds the buffers (its own, or slices of shared ones handed in as `buffers=`),
seeds, validates actions, steps with the GIL released, drains episode logs into `info`,
renders through the subclass's `_render_<mode>(address)` (`_render_ansi`,
`_render_rgb_array`), and frees everything in `close()`.

For the vector engine (the threads backend steps envs without Python):
  spec_address  a `const PcEnvSpec*`: this instance's copy of the spec, with the sizes
                that depend on config filled in;
  envs_address  the env array: `num_envs` structs of spec.env_size bytes, bound to
                `buffers` and ready for pc_step_range / pc_reset_range /
                pc_drain_logs on any slice [begin, end) from any thread.
Both stay valid until `close()`; the engine must keep the NativeEnv alive meanwhile.
"""

import os

import numpy as np

cimport numpy as cnp
from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.math cimport isfinite
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memset

from puffercore.env cimport (
    PC_ABI_VERSION, PC_FLOAT32, PC_INT32, PC_LOG_SLOTS, PC_UINT8, PcBounds, PcEnv, PcEnvSpec,
    pc_drain_logs, pc_dtype_size, pc_env_at, pc_env_bind, pc_reset_range, pc_step_range)
from puffercore.checks import check_int
from puffercore.env import PufferEnv, check_actions, check_seed
from puffercore.spaces import flat_bounds, spec_spaces

cnp.import_array()

_OBS_DTYPES = {PC_FLOAT32: np.dtype(np.float32), PC_UINT8: np.dtype(np.uint8)}
ILLEGAL_MOVES = ("error", "lose")

# An env's own test of its rows' actions (the env struct, its slice of the action
# buffer): nonzero when legal. Envs with action masks pass one to reject_illegal_actions.
ctypedef int (*ActionCheck)(const void* env, const void* actions) noexcept nogil


cdef class _EnvArray:
    """The C side of a NativeEnv: the spec copy, the env array and the step path."""

    cdef PcEnvSpec spec
    cdef char* envs
    cdef int64_t count
    cdef uint64_t index_base
    cdef bint needs_reset
    cdef object pending_seed
    cdef object log_names
    cdef cnp.ndarray obs_buffer, action_buffer, reward_buffer, terminal_buffer, truncation_buffer
    # Discrete/MultiDiscrete bounds per action column, for the fast action check.
    cdef int32_t[::1] action_low, action_high
    cdef ActionCheck action_check  # NULL unless reject_illegal_actions was called
    # Set by a threads vector env while its engine holds the env array: closing then
    # would free memory the engine steps, so close() refuses.
    cdef public object stepped_by

    def __init__(self, spec, num_envs, seed, buffers, render_mode, *, rows=None, env_size=None, obs_size=None,
                 obs_shape=None, act_shape=None):
        num_envs = check_int(num_envs, "num_envs", 1)
        seed = check_seed(seed)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.num_envs = int(num_envs)
        self.render_mode = render_mode
        self.pending_seed = seed if seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
        self._bind_spec(spec, self.num_envs, rows, env_size, obs_size, obs_shape, act_shape)
        self._init_buffers(buffers)
        self._allocate()

    def __dealloc__(self):
        self._free_envs()

    cdef void _free_envs(self) noexcept:
        cdef int64_t i
        if self.envs == NULL:
            return
        if self.spec.close != NULL:
            for i in range(self.count):
                self.spec.close(pc_env_at(&self.spec, self.envs, i))
        free(self.envs)
        self.envs = NULL

    @property
    def spec_address(self):
        """Address of this instance's `PcEnvSpec` (see the module docstring)."""
        self._check_open()
        return <size_t>&self.spec

    @property
    def envs_address(self):
        """Address of the contiguous env array (see the module docstring)."""
        self._check_open()
        return <size_t>self.envs

    @property
    def env_size(self):
        return self.spec.env_size

    @property
    def env_index_base(self):
        """Global index of sub-env 0: sub-env j is seeded from (seed, env_index_base + j)."""
        return self.index_base

    @env_index_base.setter
    def env_index_base(self, value):
        value = check_int(value, "env_index_base", 0)
        self.index_base = value

    def env_address(self, int64_t index):
        """Address of the struct of sub-env `index`, for a binding's render."""
        self._check_open()
        if not 0 <= index < self.count:
            raise IndexError(f"env index must be in [0, {self.count}), got {index}")
        return <size_t>pc_env_at(&self.spec, self.envs, index)

    cdef _check_open(self):
        if self.envs == NULL:
            raise RuntimeError(f"{type(self).__name__} is closed")

    cdef _bind_spec(self, spec, int64_t num_envs, rows, env_size, obs_size, obs_shape, act_shape):
        """Copy the env's static spec, complete it with the sizes the binding gives, and
        build the spaces it declares."""
        cdef const PcEnvSpec* static = <const PcEnvSpec*>PyCapsule_GetPointer(spec, b"puffercore.PcEnvSpec")
        name = static.name.decode() if static.name != NULL else type(self).__name__
        # The version before the copy: a spec of another ABI may be shorter than PcEnvSpec
        # (abi_version and name sit first in every version).
        if static.abi_version != PC_ABI_VERSION:
            raise RuntimeError(f"{name}: its spec is for env ABI {static.abi_version}, this puffercore's is "
                               f"{PC_ABI_VERSION}; rebuild the env against this puffercore")
        self.spec = static[0]
        if self.spec.reset == NULL or self.spec.step == NULL:
            raise RuntimeError(f"{name}: spec needs reset and step functions")
        if not 0 <= self.spec.num_log < PC_LOG_SLOTS:
            raise RuntimeError(f"{name}: num_log must be in [0, {PC_LOG_SLOTS - 1}], got {self.spec.num_log}")
        if (self.spec.obs_dtype not in _OBS_DTYPES or self.spec.act_dtype not in (PC_INT32, PC_FLOAT32)
                or self.spec.act_size <= 0):
            raise RuntimeError(f"{name}: spec needs obs_dtype PC_FLOAT32 or PC_UINT8, act_dtype PC_INT32 or "
                               f"PC_FLOAT32 and a positive act_size")
        self.spec.rows = _fill(name, "rows", self.spec.rows, rows)
        self.spec.env_size = _fill(name, "env_size", self.spec.env_size, env_size)
        self.spec.obs_size = _fill(name, "obs_size", self.spec.obs_size, obs_size)
        if self.spec.env_size < sizeof(PcEnv):
            raise RuntimeError(f"{name}: env_size {self.spec.env_size} is smaller than the PcEnv header")
        self.log_names = [self.spec.log_names[k].decode() for k in range(self.spec.num_log)]
        self.count = num_envs
        self.num_agents = num_envs * self.spec.rows
        self._build_spaces(name, obs_shape, act_shape)

    cdef _build_spaces(self, name, obs_shape, act_shape):
        """single_observation_space and single_action_space as the spec declares them
        (puffercore.spaces.spec_spaces; the shapes, when given, replace flat rows)."""
        try:
            self.single_observation_space, self.single_action_space = spec_spaces(
                *_bounds(&self.spec.obs_bounds, self.spec.obs_size), _OBS_DTYPES[self.spec.obs_dtype],
                *_bounds(&self.spec.act_bounds, self.spec.act_size), self.spec.act_dtype == PC_INT32,
                obs_shape, act_shape)
        except ValueError as error:
            raise RuntimeError(f"{name}: no spaces fit the spec: {error}") from None
        tree = getattr(self, "observation_tree", None)  # set by bindings of envs with action masks
        if tree is not None and tree.flat_space != self.single_observation_space:
            raise RuntimeError(f"{name}: the observation tree's {tree.flat_space} is not the spec's "
                               f"{self.single_observation_space}")
        low, high = flat_bounds(self.single_action_space) if self.spec.act_dtype == PC_INT32 else ([], [])
        self.action_low = np.asarray(low, dtype=np.int32)
        self.action_high = np.asarray(high, dtype=np.int32)

    cdef _allocate(self):
        """One env struct is configured by the binding, then copied to every slot."""
        cdef size_t size = self.spec.env_size
        cdef int64_t i
        self._free_envs()  # __init__ called again
        cdef char* prototype = <char*>calloc(1, size)
        if prototype == NULL:
            raise MemoryError("cannot allocate an env struct")
        try:
            self._configure(<size_t>prototype)
            self.envs = <char*>calloc(self.count, size)
            if self.envs == NULL:
                raise MemoryError(f"cannot allocate {self.count} envs of {size} bytes")
            for i in range(self.count):
                memcpy(self.envs + i * size, prototype, size)
        finally:
            free(prototype)

        self.obs_buffer = self.observations
        self.action_buffer = self.actions
        self.reward_buffer = self.rewards
        self.terminal_buffer = self.terminals
        self.truncation_buffer = self.truncations
        cdef PcEnv* env
        for i in range(self.count):
            env = <PcEnv*>pc_env_at(&self.spec, self.envs, i)
            pc_env_bind(&self.spec, env, i, cnp.PyArray_DATA(self.obs_buffer),
                        cnp.PyArray_DATA(self.final_observations), cnp.PyArray_DATA(self.action_buffer),
                        <float*>cnp.PyArray_DATA(self.reward_buffer),
                        <unsigned char*>cnp.PyArray_DATA(self.terminal_buffer),
                        <unsigned char*>cnp.PyArray_DATA(self.truncation_buffer),
                        <unsigned char*>cnp.PyArray_DATA(self.masks))
            if self.spec.init != NULL:
                self.spec.init(env)
        self.needs_reset = True

    def reset(self, seed=None, options=None):
        """Reset every sub-env. With a seed, sub-env j is reseeded from
        (seed, env_index_base + j); without one the random streams continue (the first
        reset uses the constructor's seed)."""
        self._check_open()
        seed = check_seed(seed)
        if options:
            raise ValueError(f"options: {type(self).__name__} takes no reset options, got {options!r}")
        if seed is None:
            seed, self.pending_seed = self.pending_seed, None
        if seed is not None and seed >= 2**64:
            raise ValueError(f"seed must be below 2**64, got {seed}")
        self.masks.fill(True)
        self.reward_buffer.fill(0)
        self.terminal_buffer.fill(False)
        self.truncation_buffer.fill(False)
        cdef int64_t i
        if seed is None:
            for i in range(self.count):
                self.spec.reset(pc_env_at(&self.spec, self.envs, i))
        else:
            pc_reset_range(&self.spec, self.envs, 0, self.count, <uint64_t>seed, self.index_base)
        self.pending_seed = None
        self.needs_reset = False
        return self.obs_buffer, {}

    def step(self, actions):
        """Step every sub-env once (same-step autoreset); returns the env's own buffers
        (observations, rewards, terminals, truncations) and the episode info."""
        if self.envs == NULL or self.needs_reset:
            self._check_open()
            raise RuntimeError(f"{type(self).__name__}: call reset() before step()")
        self.write_actions(actions)
        with nogil:
            pc_step_range(&self.spec, self.envs, 0, self.count)
        return self.obs_buffer, self.reward_buffer, self.terminal_buffer, self.truncation_buffer, self.drain_info()

    cpdef write_actions(self, actions, int64_t begin=0, int64_t end=-1):
        """Copy the actions of rows [begin, end) (default: all) into the action buffer.
        The common cases -- an ndarray of the buffer's shape and dtype, or int64 for
        integer actions (a policy's default) -- are checked and copied here in C, as
        per-step Python overhead dominates at small env counts; anything else,
        or any value out of range, goes through check_actions, which converts it or
        raises the error naming the problem. The threads engine writes its batches here."""
        if end < 0:
            end = self.num_agents
        if not 0 <= begin <= end <= self.num_agents:
            raise IndexError(f"rows [{begin}, {end}) outside [0, {self.num_agents})")
        cdef cnp.ndarray target = self.action_buffer[begin:end]
        if not (cnp.PyArray_Check(actions) and self._write_fast(<cnp.ndarray>actions, target)):
            np.copyto(target, check_actions(actions, self.single_action_space, end - begin))
        if self.action_check != NULL:
            self._check_legal(begin, end)

    def reject_illegal_actions(self, size_t check_address):
        """For envs whose legal actions depend on their state (those with an action mask
        in the observation): from now on write_actions -- hence step and every vector
        backend -- raises ValueError before any env steps when the C function at
        `check_address` (an `ActionCheck`: env struct, its actions -> nonzero if legal)
        refuses a written action. It reads the envs' own state, so the verdict holds
        whatever was written to the observations. The message starts with the
        subclass's `_describe_illegal_action(row, env_index)`."""
        self.action_check = <ActionCheck>check_address

    cdef _check_legal(self, int64_t begin, int64_t end):
        self._check_open()
        cdef int64_t rows = self.spec.rows, i
        cdef size_t action_bytes = self.spec.act_size * pc_dtype_size(self.spec.act_dtype)
        cdef char* actions = <char*>cnp.PyArray_DATA(self.action_buffer)
        for i in range(begin // rows, (end + rows - 1) // rows):
            if not self.action_check(pc_env_at(&self.spec, self.envs, i), actions + i * rows * action_bytes):
                raise ValueError(
                    f"{self._describe_illegal_action(i * rows, self.index_base + i)} (an illegal move); choose among "
                    "the actions whose action_mask entry is 1 (observation_tree.unflatten(obs)['action_mask']), "
                    "or pass illegal_move='lose'")

    cdef bint _write_fast(self, cnp.ndarray actions, cnp.ndarray target):
        """Check and copy `actions` into `target` in C when they are a C-contiguous array
        of target's shape and of its dtype -- or int64 for integer actions, what NumPy and
        torch give by default, narrowed here; False, with nothing written, otherwise."""
        cdef int ndim = cnp.PyArray_NDIM(target), d
        cdef int kind = cnp.PyArray_TYPE(actions)
        cdef bint narrow = self.spec.act_dtype != PC_FLOAT32 and kind == cnp.NPY_INT64
        if (cnp.PyArray_NDIM(actions) != ndim or not (kind == cnp.PyArray_TYPE(target) or narrow)
                or not cnp.PyArray_ISCARRAY_RO(actions)):
            return False
        for d in range(ndim):
            if cnp.PyArray_DIM(actions, d) != cnp.PyArray_DIM(target, d):
                return False
        cdef void* source = cnp.PyArray_DATA(actions)
        cdef void* destination = cnp.PyArray_DATA(target)
        cdef int64_t count = cnp.PyArray_SIZE(target), rows = cnp.PyArray_DIM(target, 0)
        if self.spec.act_dtype == PC_FLOAT32:
            if not _all_finite(<float*>source, count):
                return False
        elif narrow:
            if not _ints_in_range(<int64_t*>source, rows, self.action_low.shape[0], &self.action_low[0],
                                  &self.action_high[0]):
                return False
            _narrow(<int64_t*>source, <int32_t*>destination, count)
            return True
        elif not _ints_in_range(<int32_t*>source, rows, self.action_low.shape[0], &self.action_low[0],
                                &self.action_high[0]):
            return False
        if source != destination:  # a fresh slice of the buffer is not `target`
            memcpy(destination, source, cnp.PyArray_NBYTES(target))
        return True

    cpdef dict drain_info(self, int64_t begin=0, int64_t end=-1):
        """Episode means over the sub-envs in [begin, end) (default: all) that ended an
        episode this step. Only those can hold logs (an env logs when an episode ends,
        which flags one of its rows), so scanning the flag bytes spares touching every
        env struct."""
        self._check_open()
        if end < 0:
            end = self.count
        if not 0 <= begin <= end <= self.count:
            raise IndexError(f"envs [{begin}, {end}) outside [0, {self.count})")
        cdef double sums[PC_LOG_SLOTS]
        memset(sums, 0, sizeof(sums))
        cdef const uint8_t* terminals = <uint8_t*>cnp.PyArray_DATA(self.terminal_buffer)
        cdef const uint8_t* truncations = <uint8_t*>cnp.PyArray_DATA(self.truncation_buffer)
        cdef int64_t rows = self.spec.rows, i, row
        for i in range(begin, end):
            for row in range(i * rows, (i + 1) * rows):
                if terminals[row] | truncations[row]:
                    pc_drain_logs(&self.spec, self.envs, i, i + 1, sums)
                    break
        return self.log_info(<double[:PC_LOG_SLOTS]> sums)

    cpdef dict log_info(self, const double[:] sums):
        """The info dict for episode-log sums laid out as pc_drain_logs adds them: the
        episode count, then one sum per log name; {} when no episode ended."""
        if sums[0] == 0:
            return {}
        info = {"episodes": sums[0]}
        for k, name in enumerate(self.log_names):
            info[name] = sums[k + 1] / sums[0]
        return info

    def close(self):
        """Free the env array. Idempotent; the buffers stay readable. Refused while a
        threads vector env steps this env (close the vector env instead)."""
        if self.stepped_by is not None:
            raise RuntimeError(f"{type(self).__name__} is stepped by a {self.stepped_by} vector env; close that "
                               f"instead (vec.close())")
        self._free_envs()


ctypedef fused action_int:
    int32_t
    int64_t


# The range check compares each value's offset from `low` as an unsigned number: one
# compare per value, which compilers vectorize with plain SSE2, where a signed min/max
# reduction needs SSE4.1 and ran three times slower on x86-64's baseline.
cdef bint _ints_in_range(const action_int* values, int64_t rows, int64_t width,
                         const int32_t* low, const int32_t* high) noexcept nogil:
    """Whether every column k of values[rows, width] lies in [low[k], high[k]]. For int64
    values (the bounds are int32, so a value in range fits int32) an offset in range is
    also below 2**32."""
    cdef int64_t i, k
    cdef uint32_t span = <uint32_t>high[0] - <uint32_t>low[0]
    cdef uint64_t bad = 0, offset
    if width == 1:
        for i in range(rows):
            if action_int is int32_t:
                bad |= (<uint32_t>values[i] - <uint32_t>low[0]) > span
            else:
                offset = <uint64_t>values[i] - <uint64_t><int64_t>low[0]
                bad |= (offset >> 32) | ((<uint32_t>offset) > span)
        return bad == 0
    for i in range(rows):
        for k in range(width):
            if values[i * width + k] < low[k] or values[i * width + k] > high[k]:
                return False
    return True


cdef void _narrow(const int64_t* source, int32_t* destination, int64_t count) noexcept nogil:
    cdef int64_t i
    for i in range(count):
        destination[i] = <int32_t>source[i]


cdef bint _all_finite(const float* values, int64_t count) noexcept nogil:
    cdef bint finite = True
    for i in range(count):
        finite &= isfinite(values[i]) != 0
    return finite


cdef tuple _bounds(const PcBounds* bounds, int32_t size):
    """A spec's bounds as flat float32 (low, high) arrays of `size` elements."""
    low = np.full(size, bounds.low, np.float32)
    high = np.full(size, bounds.high, np.float32)
    if bounds.lows != NULL:
        low[:] = <float[:size]> <float*> bounds.lows
    if bounds.highs != NULL:
        high[:] = <float[:size]> <float*> bounds.highs
    return low, high


def _fill(name, field, int64_t from_spec, given):
    """A spec size: the static one, or the binding's when the spec leaves it 0."""
    if from_spec == 0:
        if given is None or given <= 0:
            raise RuntimeError(f"{name}: spec leaves {field} to the binding, which must pass a positive {field}=")
        return given
    if given is not None and given != from_spec:
        raise RuntimeError(f"{name}: {field}={given} contradicts the spec's {from_spec}")
    return from_spec


class NativeEnv(_EnvArray, PufferEnv):
    """Base class of env bindings (see the module docstring).

    Subclass contract: call `super().__init__(spec_capsule(&SPEC), num_envs, seed,
    buffers, render_mode)`, passing `rows=` / `env_size=` / `obs_size=` when the spec
    leaves them 0; `single_observation_space` and `single_action_space` come from the
    spec. Implement `_configure(address)` to write config fields into one env struct,
    and `_render_<mode>(address)` for each mode in `metadata["render_modes"]` ("ansi": a
    string, "rgb_array": a uint8 [height, width, 3] array). Envs with
    state-dependent legal actions set `observation_tree` (spaces.masked_observation_tree)
    before, call `reject_illegal_actions(check_address)` after (for
    illegal_move="error", see ILLEGAL_MOVES) and implement
    `_describe_illegal_action(row, env_index)`, the start of the error message.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 50}

    def _configure(self, address):
        """Write this instance's config into the env struct at `address` (an int)."""

    def render(self):
        """A picture of sub-env 0 in the render_mode given at construction (None without one)."""
        if self.render_mode is None:
            return None
        return getattr(self, f"_render_{self.render_mode}")(self.env_address(0))
