"""numba_env's C side: the reset and step cfuncs around a definition's functions, and
the PcEnvSpec (ocean/runtime_spec.pyx) that points to them.

Each env class gets two `void (*)(void* env)` cfuncs. Their bodies below read the env's
PcEnv header (buffer pointers, PCG32 state, log slots) at the byte offsets HEADER gives,
view its state record and rows as arrays, and call the user's functions, which numba
inlines. The bodies are compiled per class with that class's layout as globals (the
names marked noqa), which numba freezes into the machine code."""

import collections
import dataclasses
import hashlib
import os
import re
import threading
import time
import types
import weakref

import gymnasium
import numba
import numpy as np
from numba.core.errors import NumbaError
from numba.extending import intrinsic

from puffercore.numba_env.rng import JIT
from puffercore.ocean.runtime_spec import HEADER, RuntimeSpec

LOG_SLOTS = 16  # PC_LOG_SLOTS: slot 0 counts episodes, log_names name slots 1..15

# Byte offsets of the PcEnv header fields (numba code cannot read a dict global).
_OBSERVATIONS_AT, _FINAL_OBSERVATIONS_AT, _ACTIONS_AT = HEADER["observations"], HEADER["final_observations"], HEADER["actions"]
_REWARDS_AT, _TERMINALS_AT, _TRUNCATIONS_AT = HEADER["rewards"], HEADER["terminals"], HEADER["truncations"]
_MASKS_AT, _RNG_AT, _LOG_AT = HEADER["masks"], HEADER["rng"], HEADER["log"]

# What a multi-agent env's reset and step get: its rows of every buffer, one array each
# (row k is agent k; actions [agents] for Discrete, else [agents, act]).
Agents = collections.namedtuple(
    "Agents", ["actions", "observations", "final_observations", "rewards", "terminals", "truncations", "masks"])


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


@numba.njit(cache=True, **JIT)
def _load_pointer(address):
    """The pointer stored at `address` (a PcEnv buffer field), as a void*."""
    return _pointer(numba.carray(_pointer(address), 1, np.uint64)[0])


@numba.njit(cache=True, inline="always")
def _scalar_action(actions):
    return actions[0]


@numba.njit(cache=True, inline="always")
def _row_action(actions):
    return actions


# ---- single-agent bodies: the user's step returns (reward, terminal, truncated) and the
# wrapper does the ABI's autoreset.
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
    log = numba.carray(_pointer(base + _LOG_AT), LOG_SLOTS, np.float32)
    actions = numba.carray(_load_pointer(base + _ACTIONS_AT), ACT_SHAPE, ACT_DTYPE)  # noqa: F821
    reward, terminal, truncated = user_step(state, take_action(actions), obs, rng, log[1:NUM_LOG + 1])  # noqa: F821
    numba.carray(_load_pointer(base + _REWARDS_AT), 1, np.float32)[0] = reward
    numba.carray(_load_pointer(base + _TERMINALS_AT), 1, np.uint8)[0] = 1 if terminal else 0
    numba.carray(_load_pointer(base + _TRUNCATIONS_AT), 1, np.uint8)[0] = 1 if truncated else 0
    if terminal or truncated:
        numba.carray(_load_pointer(base + _FINAL_OBSERVATIONS_AT), OBS_SHAPE, OBS_DTYPE)[...] = obs  # noqa: F821
        log[0] += np.float32(1)
        user_reset(state, obs, rng)  # noqa: F821


# ---- multi-agent bodies: the user's functions get the env's rows (Agents) and restart
# agents themselves; the wrapper clears rewards and flags first and counts the episodes.
def _agents_body(base):
    return Agents(
        numba.carray(_load_pointer(base + _ACTIONS_AT), ACT_SHAPE, ACT_DTYPE),  # noqa: F821
        numba.carray(_load_pointer(base + _OBSERVATIONS_AT), OBS_SHAPE, OBS_DTYPE),  # noqa: F821
        numba.carray(_load_pointer(base + _FINAL_OBSERVATIONS_AT), OBS_SHAPE, OBS_DTYPE),  # noqa: F821
        numba.carray(_load_pointer(base + _REWARDS_AT), AGENTS, np.float32),  # noqa: F821
        numba.carray(_load_pointer(base + _TERMINALS_AT), AGENTS, np.bool_),  # noqa: F821
        numba.carray(_load_pointer(base + _TRUNCATIONS_AT), AGENTS, np.bool_),  # noqa: F821
        numba.carray(_load_pointer(base + _MASKS_AT), AGENTS, np.bool_))  # noqa: F821


def _reset_agents_body(env):
    base = _address(env)
    state = numba.carray(_pointer(base + STATE_AT), 1, STATE_DTYPE)[0]  # noqa: F821
    user_reset(state, agents_of(base), numba.carray(_pointer(base + _RNG_AT), 2, np.uint64))  # noqa: F821


def _step_agents_body(env):
    base = _address(env)
    state = numba.carray(_pointer(base + STATE_AT), 1, STATE_DTYPE)[0]  # noqa: F821
    agents = agents_of(base)  # noqa: F821
    agents.rewards[:] = 0
    agents.terminals[:] = False
    agents.truncations[:] = False
    log = numba.carray(_pointer(base + _LOG_AT), LOG_SLOTS, np.float32)
    user_step(state, agents, numba.carray(_pointer(base + _RNG_AT), 2, np.uint64), log[1:NUM_LOG + 1])  # noqa: F821
    ended = 0
    for k in range(AGENTS):  # noqa: F821
        ended += agents.terminals[k] | agents.truncations[k]
    log[0] += np.float32(ended)


_CFUNC_SIGNATURE = numba.types.void(numba.types.voidptr)
with open(__file__, "rb") as _source:
    _SOURCE_DIGEST = hashlib.sha256(_source.read()).hexdigest()
CONTRACTS = {
    ("reset", False): "reset(state, obs, rng)",
    ("step", False): "step(state, action, obs, rng, log) -> (reward, terminal, truncated)",
    ("reset", True): "reset(state, agents, rng)",
    ("step", True): "step(state, agents, rng, log), returning nothing",
}


@dataclasses.dataclass(frozen=True)
class Compiled:
    spec: RuntimeSpec
    state_at: int
    cfuncs: tuple  # the numba CFunc objects own the machine code the spec points to


_COMPILED = weakref.WeakKeyDictionary()  # env class -> Compiled, for the life of the class
# numba's compiler is not safe to enter from two threads; this also makes compiling a
# class happen once when two threads make its first env at the same time.
_COMPILE_LOCK = threading.RLock()


def compiled(cls):
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
        act_shape = () if scalar_action else action_space.shape
        rows = () if definition.agents is None else (definition.agents,)
        env_globals = {
            "STATE_AT": state_at, "STATE_DTYPE": dtype, "NUM_LOG": len(definition.log_names),
            "OBS_SHAPE": rows + observation_space.shape, "OBS_DTYPE": observation_space.dtype,
            "ACT_SHAPE": (rows + act_shape) or (1,),  # a single agent's Discrete action: one int32
            "AGENTS": definition.agents or 1,
            "ACT_DTYPE": np.dtype(np.float32 if action_space.dtype == np.float32 else np.int32),
            "take_action": _scalar_action if scalar_action else _row_action,
            "user_reset": definition.reset, "user_step": definition.step}
        layout = repr((HEADER, sorted((key, repr(value)) for key, value in env_globals.items()
                                      if not key.startswith(("user_", "take_")))))
        if definition.agents is None:
            bodies = (_reset_body, _step_body)
        else:
            env_globals["agents_of"] = numba.njit(inline="always", **JIT)(_with_globals(_agents_body, env_globals))
            bodies = (_reset_agents_body, _step_agents_body)
        cfuncs = tuple(_cfunc(definition, body, env_globals, layout) for body in bodies)
        result = Compiled(
            RuntimeSpec(definition.name, env_size, observation_space, action_space, definition.log_names,
                        cfuncs[0].address, cfuncs[1].address, rows=definition.agents or 1),
            state_at, cfuncs)
        cls.compile_seconds = time.perf_counter() - start
        _COMPILED[cls] = result
        return result


def _with_globals(body, env_globals, **code_changes):
    """`body` as a function whose globals are this module's and `env_globals`."""
    return types.FunctionType(body.__code__.replace(**code_changes), {**globals(), **env_globals}, body.__name__)


def _cfunc(definition, body, env_globals, layout):
    """`body` compiled with `env_globals` as a C function `void (*)(void* env)`.

    Cached as if written in the file of the user's step, so numba recompiles it when that
    file changes. Its qualified name, which names the cache entry, carries a digest of
    everything else the machine code depends on (this module, the layout, which user
    functions), so two envs, or two versions of puffercore, never share an entry."""
    kind = "reset" if body.__name__.startswith("_reset") else "step"
    user_function = getattr(definition, kind).py_func
    filename = user_function.__code__.co_filename
    digest = hashlib.sha256(repr((_SOURCE_DIGEST, layout, [
        (function.py_func.__module__, function.py_func.__qualname__, function.py_func.__code__.co_firstlineno)
        for function in (definition.reset, definition.step)])).encode()).hexdigest()[:12]
    function = _with_globals(body, env_globals, co_filename=filename, co_name=kind)
    function.__qualname__, function.__module__ = f"{definition.name}.{kind}_{digest}", user_function.__module__
    try:
        # A file that does not exist (a notebook cell, exec'd source) has nowhere to cache.
        return numba.cfunc(_CFUNC_SIGNATURE, cache=os.path.isfile(filename), **JIT)(function)
    except (NumbaError, KeyError) as error:
        if isinstance(error, KeyError):  # what numba raises for a record field that does not exist
            message = f"unknown field {error.args[0]!r}; the state's fields are {list(definition.state_dtype.names)}"
        else:
            message = re.sub(r"\x1b\[[0-9;]*m", "", str(error))  # numba colors its messages
        contract = CONTRACTS[kind, definition.agents is not None]
        raise TypeError(f"{definition.name}: numba cannot compile {kind} ({user_function.__qualname__}, expected "
                        f"{contract}):\n{message}") from None


def _round_up(value, multiple):
    return (value + multiple - 1) // multiple * multiple
