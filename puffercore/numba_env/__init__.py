"""Envs written in Python syntax, compiled by numba into C functions that NativeEnv and
the vector engine step like any C env: no GIL and no Python in the loop.

    import gymnasium, numpy as np
    from puffercore import numba_env
    from puffercore.numba_env import rng_uniform

    STATE = [("position", np.float32), ("tick", np.int32)]

    def reset(state, obs, rng):
        state.position = rng_uniform(rng, -1.0, 1.0)
        state.tick = 0
        obs[0] = state.position

    def step(state, action, obs, rng, log):
        state.position += np.float32(0.1) * np.float32(2 * action - 1)
        state.tick += 1
        obs[0] = state.position
        terminal, truncated = abs(state.position) > 1, state.tick >= 100
        if terminal or truncated:
            log[0] += state.tick                       # log_names[0], summed per ended episode
        return 1.0, terminal, truncated                # reward, terminal, truncated

    Walk = numba_env.define("Walk", state=STATE, reset=reset, step=step, log_names=["episode_length"],
                            observation_space=gymnasium.spaces.Box(-2, 2, (1,), np.float32),
                            action_space=gymnasium.spaces.Discrete(2))
    env = Walk(num_envs=4096, seed=0)    # a NativeEnv: every backend, ppo.train(config, Walk)

The two functions are numba nopython Python, compiled when define() runs:
  reset(state, obs, rng)               start an episode: set `state`, write `obs`;
  step(state, action, obs, rng, log)   one tick: update `state`, write `obs`, return
                                       (reward, terminal, truncated).
`state` is one record of the state dtype (fields by attribute); `obs` this env's
observation row, shaped as the observation space; `action` an int for Discrete, else
this env's action row (int32 MultiDiscrete, float32 Box), already checked against the
action space; `rng` the env's PCG32 state for rng_float / rng_uniform / rng_below,
seeded from (seed, env index) as C envs are; `log` float32[len(log_names)], where step
adds an episode's statistics in the step that ends it. Autoreset is the ABI's: after a
step that ends an episode the wrapper copies `obs` to final_observations, counts the
episode and calls reset, so the caller sees the next episode's first observation.

Numba cfuncs cannot raise: an exception inside one is printed and the step goes on. So
the functions are compiled with numpy's error model (a division by zero gives inf or
nan, as in C) and actions are checked before step; code that raises on purpose (assert,
raise) or indexes out of bounds is a bug numba will not stop at run time.

Compiled code is cached next to the file that defines `step` (numba's cache=True) and is
recompiled when that file changes; a change in a helper imported from another file is
not seen (numba's rule): clear __pycache__ then.
"""

import ctypes
import dataclasses
import hashlib
import os
import re
import sys
import threading
import time
import types
import weakref

import gymnasium
import numpy as np

try:
    import numba
    from numba.core.errors import NumbaError
    from numba.extending import intrinsic
except ImportError as error:
    raise ImportError(f"puffercore.numba_env needs numba ({error}): pip install 'puffercore[numba]'") from None

from puffercore.ocean.native import NativeEnv
from puffercore.ocean.runtime_spec import HEADER, RuntimeSpec

__all__ = ["NumbaEnv", "define", "rng_below", "rng_float", "rng_next", "rng_uniform"]

_JIT = {"error_model": "numpy"}  # no ZeroDivisionError: nothing may raise inside a cfunc
_LOG_SLOTS = 16  # PC_LOG_SLOTS: slot 0 counts episodes, log_names name slots 1..15

# ---- PCG32 over the env's PcEnv.rng, as native/include/puffercore/rng.h -----------------
# rng is a uint64[2] view of (state, inc). uint64 constants everywhere: numba turns
# uint64 mixed with a Python int into float64.
_MULTIPLIER = np.uint64(6364136223846793005)
_LOW32 = np.uint64(0xFFFFFFFF)


@numba.njit(cache=True, **_JIT)
def rng_next(rng):
    """pc_rng_next: the next 32 random bits (as a uint64)."""
    old = rng[0]
    rng[0] = old * _MULTIPLIER + rng[1]
    xorshifted = (((old >> np.uint64(18)) ^ old) >> np.uint64(27)) & _LOW32
    rot = old >> np.uint64(59)
    return ((xorshifted >> rot) | (xorshifted << ((np.uint64(32) - rot) & np.uint64(31)))) & _LOW32


@numba.njit(cache=True, **_JIT)
def rng_float(rng):
    """pc_rng_float: a float32 uniform in [0, 1) with 24 random bits."""
    return np.float32(rng_next(rng) >> np.uint64(8)) * np.float32(1.0 / 16777216.0)


@numba.njit(cache=True, **_JIT)
def rng_uniform(rng, low, high):
    """pc_rng_uniform: a float32 uniform in [low, high), computed in float32 as C does."""
    low, high = np.float32(low), np.float32(high)
    return low + (high - low) * rng_float(rng)


@numba.njit(cache=True, **_JIT)
def rng_below(rng, bound):
    """pc_rng_below: an unbiased integer in [0, bound), for bound in [1, 2**32)."""
    bound = np.uint64(bound)
    product = rng_next(rng) * bound
    if product & _LOW32 < bound:
        threshold = ((_LOW32 - bound + np.uint64(1)) & _LOW32) % bound  # (uint32)(-bound) % bound
        while product & _LOW32 < threshold:
            product = rng_next(rng) * bound
    return np.int64(product >> np.uint64(32))


# ---- the C side: pointer casts and the two cfunc bodies --------------------------------


# Byte offsets of the PcEnv header fields (numba code cannot read a dict global).
_OBSERVATIONS_AT, _FINAL_OBSERVATIONS_AT, _ACTIONS_AT = HEADER["observations"], HEADER["final_observations"], HEADER["actions"]
_REWARDS_AT, _TERMINALS_AT, _TRUNCATIONS_AT = HEADER["rewards"], HEADER["terminals"], HEADER["truncations"]
_RNG_AT, _LOG_AT = HEADER["rng"], HEADER["log"]


@intrinsic
def _pointer(typingctx, address):
    """The void* at an integer address (numba has no int-to-pointer cast of its own)."""
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(numba.types.voidptr))
    return numba.types.voidptr(address), codegen


@intrinsic
def _address(typingctx, pointer):
    """A void* as an integer, for byte offsets."""
    def codegen(context, builder, signature, args):
        return builder.ptrtoint(args[0], context.get_value_type(numba.types.uintp))
    return numba.types.uintp(pointer), codegen


@numba.njit(cache=True, **_JIT)
def _load_pointer(address):
    """The pointer stored at `address` (a PcEnv buffer field), as a void*."""
    return _pointer(numba.carray(_pointer(address), 1, np.uint64)[0])


@numba.njit(cache=True, inline="always")
def _scalar_action(actions):
    return actions[0]


@numba.njit(cache=True, inline="always")
def _row_action(actions):
    return actions


# The bodies of the reset and step cfuncs. Each env compiles them with its own globals
# (_compile), which bind the names marked noqa here (its layout, its spaces and the
# user's functions); numba freezes those values into the machine code.
def _reset_body(env):
    base = _address(env)
    state = numba.carray(_pointer(base + STATE_AT), 1, STATE_DTYPE)[0]  # noqa: F821
    obs = numba.carray(_load_pointer(base + _OBSERVATIONS_AT), OBS_SHAPE, OBS_DTYPE)  # noqa: F821
    user_reset(state, obs, numba.carray(_pointer(base + _RNG_AT), 2, np.uint64))  # noqa: F821


def _step_body(env):
    base = _address(env)
    state = numba.carray(_pointer(base + STATE_AT), 1, STATE_DTYPE)[0]  # noqa: F821
    obs = numba.carray(_load_pointer(base + _OBSERVATIONS_AT), OBS_SHAPE, OBS_DTYPE)  # noqa: F821
    rng = numba.carray(_pointer(base + _RNG_AT), 2, np.uint64)
    log = numba.carray(_pointer(base + _LOG_AT), _LOG_SLOTS, np.float32)
    actions = numba.carray(_load_pointer(base + _ACTIONS_AT), ACT_SHAPE, ACT_DTYPE)  # noqa: F821
    reward, terminal, truncated = user_step(state, take_action(actions), obs, rng, log[1:NUM_LOG + 1])  # noqa: F821
    numba.carray(_load_pointer(base + _REWARDS_AT), 1, np.float32)[0] = reward
    numba.carray(_load_pointer(base + _TERMINALS_AT), 1, np.uint8)[0] = 1 if terminal else 0
    numba.carray(_load_pointer(base + _TRUNCATIONS_AT), 1, np.uint8)[0] = 1 if truncated else 0
    if terminal or truncated:
        numba.carray(_load_pointer(base + _FINAL_OBSERVATIONS_AT), OBS_SHAPE, OBS_DTYPE)[...] = obs  # noqa: F821
        log[0] += np.float32(1)
        user_reset(state, obs, rng)  # noqa: F821


_CFUNC_SIGNATURE = numba.types.void(numba.types.voidptr)
with open(__file__, "rb") as _source:
    _SOURCE_DIGEST = hashlib.sha256(_source.read()).hexdigest()


# ---- definitions ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Definition:
    """What define() was given, checked; plain values, so a class pickled by value
    (cloudpickle, a class from __main__ sent to a worker process) compiles again there."""
    name: str
    state_dtype: np.dtype
    observation_space: gymnasium.spaces.Box
    action_space: gymnasium.spaces.Space
    reset: object
    step: object
    log_names: tuple


@dataclasses.dataclass(frozen=True)
class _Compiled:
    spec: RuntimeSpec
    state_at: int
    cfuncs: tuple  # the numba CFunc objects own the machine code the spec points to


_COMPILED = weakref.WeakKeyDictionary()  # env class -> _Compiled, for the life of the class
# numba's compiler is not safe to enter from two threads; this also makes compiling a
# class happen once when two threads make its first env at the same time.
_COMPILE_LOCK = threading.RLock()


class NumbaEnv(NativeEnv):
    """Base of the classes define() makes: a NativeEnv whose reset and step are numba
    cfuncs. `compile_seconds` (a class attribute) is how long compiling took, a cache
    hit included."""

    metadata = {"render_modes": [], "render_fps": 50}
    definition: Definition
    compile_seconds: float

    def __init__(self, num_envs=1, seed=0, buffers=None, render_mode=None):
        compiled = _compile(type(self))
        # The spaces come back from the spec's bounds, in the shapes the user gave them.
        super().__init__(compiled.spec.capsule(), num_envs, seed, buffers, render_mode,
                         obs_shape=self.definition.observation_space.shape,
                         act_shape=self.definition.action_space.shape)

    def env_state(self, index):
        """A copy of sub-env `index`'s state record (its fields by name: state["x"])."""
        dtype = self.definition.state_dtype
        address = self.env_address(index) + _COMPILED[type(self)].state_at  # IndexError, RuntimeError if closed
        return np.frombuffer((ctypes.c_char * dtype.itemsize).from_address(address), dtype)[0].copy()


def define(name, *, state, observation_space, action_space, reset, step, log_names=()):
    """A NumbaEnv subclass named `name` (see the module docstring), compiled now: a
    function numba cannot type raises TypeError naming it. `state`: a structured dtype,
    or its fields as [(name, dtype) or (name, dtype, shape), ...]. The class's module is
    the caller's, so assign it to a module attribute of the same name for other processes
    to import it."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be a Python identifier, got {name!r}")
    definition = Definition(name, _check_state(state), _check_observation_space(observation_space),
                            _check_action_space(action_space), _check_function("reset", reset),
                            _check_function("step", step), _check_log_names(log_names))
    cls = type(name, (NumbaEnv,), {"definition": definition, "__doc__": f"{name}: a numba env (puffercore.numba_env)",
                                   "__module__": sys._getframe(1).f_globals.get("__name__", "__main__")})
    _compile(cls)
    return cls


def _check_state(state):
    try:
        dtype = np.dtype(state)
    except (TypeError, ValueError) as error:
        raise TypeError(f"state must be a structured dtype or a list of (name, dtype[, shape]) fields: {error}") from None
    if dtype.names is None or not dtype.names:
        raise TypeError(f"state must have at least one named field, got dtype {dtype}")
    for field in dtype.names:
        kind = dtype.fields[field][0].base.kind
        if kind not in "biuf":
            raise TypeError(f"state field {field!r} must be a bool, int or float (or an array of them), "
                            f"got {dtype.fields[field][0]}")
    # C alignment, whatever offsets the caller's dtype had: the record sits in a C struct.
    return np.dtype([(field, dtype.fields[field][0]) for field in dtype.names], align=True)


def _check_observation_space(space):
    if (not isinstance(space, gymnasium.spaces.Box) or space.dtype not in (np.float32, np.uint8)
            or len(space.shape) == 0):
        raise TypeError(f"observation_space must be a float32 or uint8 Box of at least 1 dimension, got {space!r}")
    return space


def _check_action_space(space):
    if isinstance(space, gymnasium.spaces.Discrete):
        return space
    if isinstance(space, gymnasium.spaces.MultiDiscrete) and space.nvec.ndim == 1:
        return space
    if isinstance(space, gymnasium.spaces.Box) and space.dtype == np.float32 and len(space.shape) > 0:
        return space
    raise TypeError(f"action_space must be Discrete, 1-d MultiDiscrete or a float32 Box of at least 1 dimension, "
                    f"got {space!r}")


def _check_function(name, function):
    if isinstance(function, numba.core.registry.CPUDispatcher):
        return function
    if not isinstance(function, types.FunctionType):
        raise TypeError(f"{name} must be a Python function (or a numba.njit one), got {function!r}")
    return numba.njit(inline="always", **_JIT)(function)  # into the cfunc body: no call per step


def _check_log_names(log_names):
    if isinstance(log_names, str):
        raise TypeError(f"log_names must be a list of names, got the string {log_names!r}")
    names = tuple(log_names)
    if len(names) >= _LOG_SLOTS:
        raise ValueError(f"log_names: at most {_LOG_SLOTS - 1} names, got {len(names)}")
    for log_name in names:
        if not isinstance(log_name, str) or not log_name or log_name == "episodes":
            raise ValueError(f"log_names must be non-empty strings other than 'episodes' (the episode count "
                             f"info already has), got {log_name!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"log_names must be distinct, got {list(names)}")
    return names


# ---- compiling --------------------------------------------------------------------------


def _compile(cls):
    """The cfuncs and spec of `cls`, compiled on first use (define(), or a first env of a
    class unpickled in another process)."""
    with _COMPILE_LOCK:
        if cls in _COMPILED:
            return _COMPILED[cls]
        start = time.perf_counter()
        definition = cls.definition
        dtype = definition.state_dtype
        state_at = _round_up(HEADER["size"], dtype.alignment)
        env_size = _round_up(state_at + dtype.itemsize, max(8, dtype.alignment))  # every struct of the array aligned
        observation_space, action_space = definition.observation_space, definition.action_space
        scalar_action = isinstance(action_space, gymnasium.spaces.Discrete)
        act_shape = (1,) if scalar_action else action_space.shape
        env_globals = {
            "STATE_AT": state_at, "STATE_DTYPE": dtype, "NUM_LOG": len(definition.log_names),
            "OBS_SHAPE": observation_space.shape, "OBS_DTYPE": observation_space.dtype,
            "ACT_SHAPE": act_shape, "ACT_DTYPE": np.dtype(np.float32 if action_space.dtype == np.float32 else np.int32),
            "take_action": _scalar_action if scalar_action else _row_action,
            "user_reset": definition.reset, "user_step": definition.step}
        layout = repr((HEADER, sorted((key, repr(value)) for key, value in env_globals.items()
                                      if not key.startswith(("user_", "take_")))))
        cfuncs = tuple(_cfunc(definition, body, env_globals, layout) for body in (_reset_body, _step_body))
        compiled = _Compiled(
            RuntimeSpec(definition.name, env_size, observation_space, action_space, definition.log_names,
                        cfuncs[0].address, cfuncs[1].address),
            state_at, cfuncs)
        cls.compile_seconds = time.perf_counter() - start
        _COMPILED[cls] = compiled
        return compiled


def _cfunc(definition, body, env_globals, layout):
    """`body` compiled with `env_globals` as a C function `void (*)(void* env)`.

    Cached as if written in the file of the user's step, so numba recompiles it when that
    file changes. Its qualified name, which names the cache entry, carries a digest of
    everything else the machine code depends on (this module, the layout, which user
    functions), so two envs, or two versions of puffercore, never share an entry."""
    kind = body.__name__.strip("_").removesuffix("_body")
    user_function = getattr(definition, kind).py_func
    filename = user_function.__code__.co_filename
    digest = hashlib.sha256(repr((_SOURCE_DIGEST, layout, [
        (function.py_func.__module__, function.py_func.__qualname__, function.py_func.__code__.co_firstlineno)
        for function in (definition.reset, definition.step)])).encode()).hexdigest()[:12]
    qualname = f"{definition.name}.{kind}_{digest}"
    code = body.__code__.replace(co_filename=filename, co_name=kind)
    function = types.FunctionType(code, {**globals(), **env_globals}, kind)
    function.__qualname__, function.__module__ = qualname, user_function.__module__
    try:
        # A file that does not exist (a notebook cell, exec'd source) has nowhere to cache.
        return numba.cfunc(_CFUNC_SIGNATURE, cache=os.path.isfile(filename), **_JIT)(function)
    except (NumbaError, KeyError) as error:
        contract = ("step(state, action, obs, rng, log) -> (reward, terminal, truncated)" if kind == "step"
                    else "reset(state, obs, rng)")
        if isinstance(error, KeyError):  # what numba raises for a record field that does not exist
            message = f"unknown field {error.args[0]!r}; the state's fields are {list(definition.state_dtype.names)}"
        else:
            message = re.sub(r"\x1b\[[0-9;]*m", "", str(error))  # numba colors its messages
        raise TypeError(f"{definition.name}: numba cannot compile {kind} ({user_function.__qualname__}, expected "
                        f"{contract}):\n{message}") from None


def _round_up(value, multiple):
    return (value + multiple - 1) // multiple * multiple
