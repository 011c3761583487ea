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

Multi-agent envs (define(..., agents=K): K rows per env) get their rows instead:
  reset(state, agents, rng)            write agents.observations (and masks);
  step(state, agents, rng, log)        read agents.actions[k], write every row's
                                       observations, rewards, terminals, truncations,
                                       masks, and final_observations of rows that end.
`agents` is an Agents tuple of arrays, row k = agent k. Rewards and flags are cleared
before step; each row flagged terminal or truncated counts as one episode. Restarting
an agent whose episode ended is the env's own business (snake.py respawns a snake in
the same tick), as in C. Helpers that reset and step call are decorated with `jit`.

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
import sys
import types

import gymnasium
import numpy as np

try:
    import numba
except ImportError as error:
    raise ImportError(f"puffercore.numba_env needs numba ({error}): pip install 'puffercore[numba]'") from None

from puffercore.numba_env.compiler import _COMPILED, LOG_SLOTS, Agents, compiled
from puffercore.numba_env.rng import JIT, rng_below, rng_float, rng_next, rng_uniform
from puffercore.ocean.native import NativeEnv

__all__ = ["Agents", "NumbaEnv", "define", "jit", "rng_below", "rng_float", "rng_next", "rng_uniform"]

# For the helper functions that reset and step call: inlined into the cfuncs (which are
# cached) and unable to raise on a division by zero, as reset and step. Inlined, not
# compiled apart: numba names a compiled function taking a state record after a counter
# that restarts with each process, so two such functions cached for two state dtypes
# (two configs of one env) can load under one name and run with the wrong layout.
jit = numba.njit(inline="always", **JIT)


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
    agents: int | None  # None: the single-agent contract
    config: dict
    render: object
    render_rgb_array: object


class NumbaEnv(NativeEnv):
    """Base of the classes define() makes: a NativeEnv whose reset and step are numba
    cfuncs. `compile_seconds` (a class attribute) is how long compiling took, a cache
    hit included."""

    definition: Definition
    compile_seconds: float

    def __init__(self, num_envs=1, seed=0, buffers=None, render_mode=None):
        spec = compiled(type(self)).spec
        # The spaces come back from the spec's bounds, in the shapes the user gave them.
        super().__init__(spec.capsule(), num_envs, seed, buffers, render_mode,
                         obs_shape=self.definition.observation_space.shape,
                         act_shape=self.definition.action_space.shape)

    def env_state(self, index):
        """A copy of sub-env `index`'s state record (fields by name or attribute: state.x)."""
        return self._state_record(self.env_address(index)).copy()  # IndexError, RuntimeError if closed

    def _state_record(self, env_address):
        """The state record of the env struct at `env_address`, in place."""
        dtype = self.definition.state_dtype
        address = env_address + _COMPILED[type(self)].state_at
        return np.frombuffer((ctypes.c_char * dtype.itemsize).from_address(address), dtype).view(np.recarray)[0]

    def _configure(self, address):
        record = self._state_record(address)  # of the struct NativeEnv copies to every env
        for field, value in self.definition.config.items():
            record[field] = value

    def _render_ansi(self, address):
        return self.definition.render(self._state_record(address).copy())

    def _render_rgb_array(self, address):
        return self.definition.render_rgb_array(self._state_record(address).copy())


def define(name, *, state, observation_space, action_space, reset, step, log_names=(), agents=None, config=None,
           render=None, render_rgb_array=None, render_fps=50):
    """A NumbaEnv subclass named `name` (see the module docstring), compiled now: a
    function numba cannot type raises TypeError naming it. `state`: a structured dtype,
    or its fields as [(name, dtype) or (name, dtype, shape), ...]. `agents`: rows per
    env, for the multi-agent contract. `config`: {field: value} set in every env's state
    before its first reset. `render`: a Python function of a copy of sub-env 0's state
    record that returns its text picture (render_mode="ansi"); `render_rgb_array`: one
    returning its picture as a uint8 [height, width, 3] array (render_mode="rgb_array",
    what `puffercore eval --video` records, at `render_fps` frames a second). Both run in
    Python, not numba: draw with NumPy. The class's module is
    the caller's, so assign it to a module attribute of the same name for other processes
    to import it."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be a Python identifier, got {name!r}")
    state_dtype = _check_state(state)
    if render is not None and not callable(render):
        raise TypeError(f"render must be a function of the state record returning a string, got {render!r}")
    if render_rgb_array is not None and not callable(render_rgb_array):
        raise TypeError(f"render_rgb_array must be a function of the state record returning a uint8 "
                        f"[height, width, 3] array, got {render_rgb_array!r}")
    if isinstance(render_fps, bool) or not isinstance(render_fps, (int, float)) or not render_fps > 0:
        raise ValueError(f"render_fps must be a positive number, got {render_fps!r}")
    definition = Definition(name, state_dtype, _check_observation_space(observation_space),
                            _check_action_space(action_space), _check_function("reset", reset),
                            _check_function("step", step), _check_log_names(log_names), _check_agents(agents),
                            _check_config(config, state_dtype), render, render_rgb_array)
    modes = [mode for mode, function in (("ansi", render), ("rgb_array", render_rgb_array)) if function is not None]
    cls = type(name, (NumbaEnv,), {
        "definition": definition, "__doc__": f"{name}: a numba env (puffercore.numba_env)",
        "metadata": {"render_modes": modes, "render_fps": render_fps},
        "__module__": sys._getframe(1).f_globals.get("__name__", "__main__")})
    compiled(cls)
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
        if field in _RECORD_ATTRIBUTES:
            raise ValueError(f"state field {field!r} has the name of an attribute of NumPy records: state.{field} "
                             f"would read NumPy's {field}, not the field, in a render function; rename it "
                             f"(e.g. {field}_ or grid_{field})")
    # C alignment, whatever offsets the caller's dtype had: the record sits in a C struct.
    return np.dtype([(field, dtype.fields[field][0]) for field in dtype.names], align=True)


# A render function reads the state as a NumPy record, whose own attributes (size, shape,
# max, ...) win over fields of the same name.
_RECORD_ATTRIBUTES = frozenset(name for name in dir(np.record) if not name.startswith("_"))


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
        function = function.py_func
    if not isinstance(function, types.FunctionType):
        raise TypeError(f"{name} must be a Python function (or a numba.njit one), got {function!r}")
    return jit(function)  # into the cfunc body: no call per step (and see jit)


def _check_log_names(log_names):
    if isinstance(log_names, str):
        raise TypeError(f"log_names must be a list of names, got the string {log_names!r}")
    names = tuple(log_names)
    if len(names) >= LOG_SLOTS:
        raise ValueError(f"log_names: at most {LOG_SLOTS - 1} names, got {len(names)}")
    for log_name in names:
        if not isinstance(log_name, str) or not log_name or log_name == "episodes":
            raise ValueError(f"log_names must be non-empty strings other than 'episodes' (the episode count "
                             f"info already has), got {log_name!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"log_names must be distinct, got {list(names)}")
    return names


def _check_agents(agents):
    if agents is not None and (isinstance(agents, bool) or not isinstance(agents, int) or agents < 1):
        raise ValueError(f"agents must be None (the single-agent contract) or a positive int, got {agents!r}")
    return agents


def _check_config(config, state_dtype):
    config = dict(config or {})
    record = np.zeros((), state_dtype)
    for field, value in config.items():
        if field not in state_dtype.names:
            raise ValueError(f"config field {field!r} is not a state field; the state's fields are "
                             f"{list(state_dtype.names)}")
        try:
            record[field] = value
        except (TypeError, ValueError) as error:
            raise ValueError(f"config field {field!r}: {error}") from None
    return config
