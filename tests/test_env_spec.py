"""The env ABI's spec (native/include/puffercore/env.h, version 2): the spaces every env
declares in C are what its binding presents, specs that are wrong or of another ABI
version are refused before any native code runs, and episode logs reach `info` under
the names they were declared with."""

import ctypes

import numpy as np
import pytest
from gymnasium import spaces

from puffercore.ocean import AzulEnv, Busy, CartPole, Connect4Env, Memory, NativeEnv, Snake, Squared
from puffercore.ocean.runtime_spec import RuntimeSpec
from puffercore.spaces import SpaceTree, spec_spaces

# The spaces the bindings wrote out by hand before the spec declared them (ABI 1).
_CARTPOLE_HIGH = np.array([4.8, np.inf, 24 * np.pi / 180, np.inf], dtype=np.float32)
_MASKED = lambda actions, board: SpaceTree(spaces.Dict(  # noqa: E731
    {"action_mask": spaces.Box(0.0, 1.0, (actions,), np.float32), "board": board})).flat_space
HAND_WRITTEN = {
    "cartpole": (CartPole, {}, spaces.Box(-_CARTPOLE_HIGH, _CARTPOLE_HIGH, dtype=np.float32), spaces.Discrete(2)),
    "cartpole_continuous": (CartPole, {"continuous": True}, spaces.Box(-_CARTPOLE_HIGH, _CARTPOLE_HIGH,
                                                                      dtype=np.float32),
                            spaces.Box(-1.0, 1.0, (1,), dtype=np.float32)),
    "squared": (Squared, {"size": 5}, spaces.Box(0, 2, (25,), dtype=np.uint8), spaces.Discrete(5)),
    "snake": (Snake, {"vision": 2}, spaces.Box(0, 4, (25,), dtype=np.uint8), spaces.Discrete(4)),
    "connect4": (Connect4Env, {}, _MASKED(7, spaces.Box(0.0, 1.0, (2, 6, 7), np.float32)), spaces.Discrete(7)),
    "azul": (AzulEnv, {}, _MASKED(300, spaces.Box(0.0, np.inf, (412,), np.float32)), spaces.Discrete(300)),
    "busy": (Busy, {}, spaces.Box(0.0, 1.0, (2,), dtype=np.float32), spaces.Discrete(2)),
    "memory": (Memory, {}, spaces.Box(0.0, 1.0, (3,), dtype=np.float32), spaces.Discrete(2)),
}


def assert_same_space(actual, expected):
    """Equal as gymnasium sees it, and bound for bound (Box.__eq__ only compares with allclose)."""
    assert actual == expected and type(actual) is type(expected) and actual.dtype == expected.dtype
    if isinstance(expected, spaces.Box):
        np.testing.assert_array_equal(actual.low, expected.low)
        np.testing.assert_array_equal(actual.high, expected.high)


@pytest.mark.parametrize("name", HAND_WRITTEN)
def test_spaces_come_from_the_spec_and_equal_the_hand_written_ones(name):
    cls, kwargs, observation_space, action_space = HAND_WRITTEN[name]
    env = cls(num_envs=2, **kwargs)
    assert_same_space(env.single_observation_space, observation_space)
    assert_same_space(env.single_action_space, action_space)
    env.close()


class Bounds(ctypes.Structure):
    _fields_ = [("low", ctypes.c_float), ("high", ctypes.c_float),
                ("lows", ctypes.c_void_p), ("highs", ctypes.c_void_p)]


class Spec(ctypes.Structure):  # PcEnvSpec as env.h lays it out
    _fields_ = [("abi_version", ctypes.c_int32), ("name", ctypes.c_char_p), ("env_size", ctypes.c_size_t),
                ("rows", ctypes.c_int32), ("obs_size", ctypes.c_int32), ("obs_dtype", ctypes.c_int32),
                ("act_size", ctypes.c_int32), ("act_dtype", ctypes.c_int32), ("num_log", ctypes.c_int32),
                ("log_names", ctypes.c_void_p), ("init", ctypes.c_void_p), ("reset", ctypes.c_void_p),
                ("step", ctypes.c_void_p), ("close", ctypes.c_void_p), ("obs_bounds", Bounds),
                ("act_bounds", Bounds)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_CAPSULE_NAME = ctypes.c_char_p(b"puffercore.PcEnvSpec")  # the capsule keeps this pointer


def static_spec(cls, **fields):
    """A copy of the static spec of env class `cls` (sizes left to the binding back at 0),
    with `fields` changed, to hand to NativeEnv."""
    with cls(num_envs=1) as env:
        spec = Spec.from_buffer_copy(Spec.from_address(env.spec_address))
    if cls is Squared:
        spec.obs_size = 0
    for field, value in fields.items():
        setattr(spec, field, value)
    return spec


def make(spec, **kwargs):
    return NativeEnv(_capsule_new(ctypes.addressof(spec), _CAPSULE_NAME, None), 1, 0, None, None, **kwargs)


def test_a_spec_is_an_env_with_no_binding_code():
    env = make(static_spec(Squared), obs_size=9)
    assert_same_space(env.single_observation_space, spaces.Box(0, 2, (9,), np.uint8))
    assert_same_space(env.single_action_space, spaces.Discrete(5))
    env.close()


@pytest.mark.parametrize("version", [1, 3])
def test_a_spec_of_another_abi_version_is_refused(version):
    with pytest.raises(RuntimeError, match=rf"Squared: its spec is for env ABI {version}, this puffercore's is 2; "
                                           "rebuild the env"):
        make(static_spec(Squared, abi_version=version), obs_size=9)


@pytest.mark.parametrize("field, value, match", [
    ("obs_bounds", Bounds(3.0, 2.0), "observation bounds must have low <= high"),
    ("obs_bounds", Bounds(float("nan"), 2.0), "observation bounds must have low <= high"),
    ("obs_bounds", Bounds(0.0, 256.0), "uint8 observation bounds must be integers in"),
    ("obs_bounds", Bounds(0.5, 2.0), "uint8 observation bounds must be integers in"),
    ("act_bounds", Bounds(0.0, 4.5), "discrete action bounds must be int32 integers"),
    ("act_bounds", Bounds(0.0, float("inf")), "discrete action bounds must be int32 integers"),
    ("act_bounds", Bounds(1.0, 0.0), "action bounds must have low <= high"),
    ("act_dtype", 7, "act_dtype PC_INT32 or PC_FLOAT32"),
    ("act_size", 0, "a positive act_size"),
])
def test_a_spec_with_impossible_spaces_is_refused(field, value, match):
    with pytest.raises(RuntimeError, match=match):
        make(static_spec(Squared, **{field: value}), obs_size=9)


def test_sizes_left_to_the_binding_must_be_given_and_fixed_ones_kept():
    with pytest.raises(RuntimeError, match="spec leaves obs_size to the binding, which must pass a positive"):
        make(static_spec(Squared))
    with pytest.raises(RuntimeError, match="obs_size=5 contradicts the spec's 4"):
        make(static_spec(CartPole), obs_size=5)
    with pytest.raises(RuntimeError, match=r"observation shape \(2, 3\) does not hold the 4 elements"):
        make(static_spec(CartPole), obs_shape=(2, 3))


def test_an_observation_tree_must_lay_out_the_spec_space():
    """Envs with action masks describe their rows as a tree; it must be the spec's space."""
    wrong = SpaceTree(spaces.Dict({"action_mask": spaces.Box(0.0, 1.0, (2,), np.float32),
                                   "board": spaces.Box(0.0, 1.0, (2,), np.float32)}))
    with pytest.raises(RuntimeError, match="observation tree's .* is not the spec's"):
        type("Broken", (CartPole,), {"observation_tree": wrong})(num_envs=1)


def test_spec_spaces_reshape_for_envs_that_present_shaped_rows():
    low, high = np.zeros(6, np.float32), np.arange(1, 7, dtype=np.float32)
    observation, action = spec_spaces(low, high, np.float32, -np.ones(6, np.float32), np.ones(6, np.float32),
                                      discrete=False, obs_shape=(2, 3), act_shape=(3, 2))
    assert_same_space(observation, spaces.Box(low.reshape(2, 3), high.reshape(2, 3), dtype=np.float32))
    assert_same_space(action, spaces.Box(-1.0, 1.0, (3, 2), dtype=np.float32))
    _, action = spec_spaces(low, high, np.float32, np.array([-1, 0], np.float32), np.array([1, 4], np.float32),
                            discrete=True)
    assert_same_space(action, spaces.MultiDiscrete([3, 5], start=[-1, 0]))


def test_runtime_specs_carry_the_spaces_declared_in_python():
    """What numba envs build on: the spaces become the spec's bounds and come back."""
    observation, action = spaces.Box(0, 5, (2, 3), np.uint8), spaces.MultiDiscrete([3, 4], start=[-1, 0])
    spec = RuntimeSpec("Shaped", 4096, observation, action, ["a"], 1, 1)  # never reset nor stepped
    env = NativeEnv(spec.capsule(), 2, 0, None, None, obs_shape=(2, 3))
    assert_same_space(env.single_observation_space, observation)
    assert_same_space(env.single_action_space, action)
    assert env.observations.shape == (2, 2, 3)
    env.close()
    with pytest.raises(ValueError, match="float32 values"):
        RuntimeSpec("Huge", 4096, observation, spaces.Discrete(2**24 + 2), [], 1, 1)


# Each env's episode statistics, in the order its C header declares them.
LOG_NAMES = {
    "cartpole": ["episode_return", "episode_length"],
    "squared": ["episode_return", "episode_length"],
    "snake": ["episode_return", "episode_length", "snake_length"],
    "connect4": ["episode_return", "episode_length", "win_rate", "loss_rate", "draw_rate", "illegal_move_rate"],
    "azul": ["episode_return", "episode_length", "score", "score_margin", "win_rate", "loss_rate", "draw_rate",
             "illegal_move_rate"],
    "busy": ["episode_return", "episode_length"],
    "memory": ["episode_return", "episode_length"],
}


def first_info(env, seed=0):
    """The info of the first step in which episodes end, under random legal actions."""
    env.reset(seed=seed)
    env.single_action_space.seed(seed)
    for _ in range(2000):
        _, _, _, _, info = env.step(np.stack([env.single_action_space.sample() for _ in range(env.num_agents)]))
        if info:
            return info
    raise AssertionError("no episode ended")


@pytest.mark.parametrize("name", LOG_NAMES)
def test_log_names_and_values_line_up(name):
    cls, kwargs, _, _ = HAND_WRITTEN[name]
    kwargs = {**kwargs, **{"busy": {"length": 5, "max_cost_us": 0.0}, "connect4": {"illegal_move": "lose"},
                           "azul": {"illegal_move": "lose", "opponent": "random"}}.get(name, {})}
    env = cls(num_envs=8, seed=1, **kwargs)
    info = first_info(env)
    assert list(info) == ["episodes"] + LOG_NAMES[name]
    assert info["episodes"] >= 1 and info["episode_length"] >= 1
    if name == "cartpole":  # reward 1 per step
        assert info["episode_return"] == info["episode_length"]
    if name == "busy":  # truncated after `length` steps; action 1 earns 1
        assert info["episode_length"] == 5 and 0 <= info["episode_return"] <= 5
    if name == "memory":  # reward +-1 at the query, `delay` + 1 steps in
        assert info["episode_length"] == 5 and -1 <= info["episode_return"] <= 1
    if name == "snake":  # born one cell long, +1 per meal (one cell longer), -1 for the death
        assert info["episode_return"] == pytest.approx(info["snake_length"] - 2)
    if name in ("connect4", "azul"):  # every game ends in exactly one of these
        assert info["win_rate"] + info["loss_rate"] + info["draw_rate"] == pytest.approx(1.0)
    env.close()
