"""The contract every ocean env keeps: gymnasium's env checker, seeding, same-step
autoreset, buffers handed in, episode info, the vector-engine interface, bad input."""

import ctypes

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import puffercore
from puffercore.env import Buffers, GymnasiumView, PufferEnv
from puffercore.ocean import AzulEnv, Busy, CartPole, Connect4Env, NativeEnv, Snake, Squared

# One row per env so that GymnasiumView applies; Snake with one snake.
SINGLE_ROW = {
    "cartpole": (CartPole, {}),
    "cartpole_continuous": (CartPole, {"continuous": True}),
    "squared": (Squared, {"size": 5}),
    "snake": (Snake, {"width": 8, "height": 6, "num_snakes": 1, "num_food": 3, "vision": 2}),
    # random actions play full columns: let them lose instead of raising
    "connect4": (Connect4Env, {"opponent": "random", "illegal_move": "lose"}),
    "azul": (AzulEnv, {"num_players": 3, "illegal_move": "lose"}),
    "busy": (Busy, {"length": 7, "max_cost_us": 5.0}),
}
# Several rows per env for the multi-row tests.
MULTI_ROW = {**SINGLE_ROW, "snake": (Snake, {"width": 8, "height": 6, "num_snakes": 3, "num_food": 3, "vision": 2})}
try:  # the numba port of Snake (puffercore[numba]) keeps the same contract
    from puffercore.numba_env.snake import numba_snake
except ImportError:
    pass
else:
    SINGLE_ROW["numba_snake"] = (numba_snake, SINGLE_ROW["snake"][1])
    MULTI_ROW["numba_snake"] = (numba_snake, MULTI_ROW["snake"][1])


def random_actions(env, rng, steps):
    space = env.single_action_space
    if isinstance(space, gymnasium.spaces.Discrete):
        return rng.integers(0, space.n, size=(steps, env.num_agents), dtype=np.int32)
    return rng.uniform(-1, 1, size=(steps, env.num_agents, *space.shape)).astype(np.float32)


def rollout(env, actions, seed):
    obs, _ = env.reset(seed=seed)
    frames = [obs.copy()]
    for action in actions:
        obs, rew, term, trunc, _ = env.step(action)
        frames += [obs.copy(), rew.copy(), term.copy(), trunc.copy(), env.final_observations.copy()]
    return frames


def assert_same_frames(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name", SINGLE_ROW)
def test_check_env_through_gymnasium_view(name):
    cls, kwargs = SINGLE_ROW[name]
    env = cls(num_envs=1, seed=0, render_mode="ansi", **kwargs)
    assert isinstance(env, PufferEnv) and isinstance(env, NativeEnv)
    check_env(GymnasiumView(env), skip_render_check=False)
    env.close()


@pytest.mark.parametrize("name", MULTI_ROW)
def test_same_seed_same_trajectories_and_env_indices_differ(name):
    cls, kwargs = MULTI_ROW[name]
    a, b = cls(num_envs=4, seed=0, **kwargs), cls(num_envs=4, seed=0, **kwargs)
    actions = random_actions(a, np.random.default_rng(1), 200)
    assert_same_frames(rollout(a, actions, seed=7), rollout(b, actions, seed=7))
    first = rollout(a, actions[:1], seed=7)[0]
    rows = a.num_agents // a.num_envs
    assert not np.array_equal(first[:rows], first[rows : 2 * rows]), "env 0 and env 1 start alike"
    other_seed = rollout(a, actions[:1], seed=8)[0]
    assert not np.array_equal(first, other_seed)


@pytest.mark.parametrize("name", MULTI_ROW)
def test_env_index_base_gives_the_rows_of_a_larger_env(name):
    cls, kwargs = MULTI_ROW[name]
    whole = cls(num_envs=5, seed=0, **kwargs)
    part = cls(num_envs=2, seed=0, **kwargs)
    part.env_index_base = 3
    rows = whole.num_agents // whole.num_envs
    actions = random_actions(whole, np.random.default_rng(2), 100)
    whole_frames = rollout(whole, actions, seed=11)
    part_frames = rollout(part, actions[:, 3 * rows :], seed=11)
    assert_same_frames([f[3 * rows :] for f in whole_frames], part_frames)


def test_reset_without_seed_continues_the_streams_and_the_first_uses_the_constructor_seed():
    np.testing.assert_array_equal(CartPole(num_envs=3, seed=5).reset()[0], CartPole(num_envs=3).reset(seed=5)[0])
    env = CartPole(num_envs=3, seed=5)
    first = env.reset()[0].copy()
    assert not np.array_equal(first, env.reset()[0])
    np.testing.assert_array_equal(first, env.reset(seed=5)[0])


@pytest.mark.parametrize("name", MULTI_ROW)
def test_shared_buffers_are_written_in_place(name):
    cls, kwargs = MULTI_ROW[name]
    probe = cls(num_envs=1, **kwargs)
    rows = probe.num_agents
    shared = Buffers.allocate(4 * rows, probe.single_observation_space, probe.single_action_space)
    low = cls(num_envs=2, seed=0, buffers=shared.rows(0, 2 * rows), **kwargs)
    high = cls(num_envs=2, seed=0, buffers=shared.rows(2 * rows, 4 * rows), **kwargs)
    high.env_index_base = 2
    alone = cls(num_envs=4, seed=0, **kwargs)
    actions = random_actions(alone, np.random.default_rng(3), 50)
    low.reset(seed=1), high.reset(seed=1), alone.reset(seed=1)
    np.testing.assert_array_equal(shared.observations, alone.observations)
    for action in actions:
        np.copyto(shared.actions, action)
        low.step(low.actions), high.step(high.actions), alone.step(action)
        np.testing.assert_array_equal(shared.observations, alone.observations)
        np.testing.assert_array_equal(shared.rewards, alone.rewards)
        np.testing.assert_array_equal(shared.terminals, alone.terminals)


def test_same_step_autoreset_keeps_final_observations():
    env = CartPole(num_envs=64, seed=0)
    obs, _ = env.reset()
    previous = obs.copy()
    ended = 0
    for _ in range(100):
        obs, _, term, trunc, _ = env.step(np.ones(64, np.int32))
        done = term | trunc
        ended += done.sum()
        final = env.final_observations[done]
        # the ended episode's last state is past a threshold, the new first state is fresh
        assert np.all((np.abs(final[:, 0]) > 2.4) | (np.abs(final[:, 2]) > 12 * 2 * np.pi / 360))
        assert np.all(np.abs(obs[done]) <= 0.05)
        assert np.all(np.abs(obs[~done] - previous[~done]).max(axis=1) < 1.0)
        previous = obs.copy()
    assert ended > 64


def test_info_means_match_the_episodes_seen_in_the_buffers():
    env = Squared(num_envs=32, seed=0, size=5)
    env.reset()
    rng = np.random.default_rng(0)
    length = np.zeros(32)
    episodes = 0.0
    for _ in range(300):
        _, rew, term, trunc, info = env.step(rng.integers(0, 5, 32, dtype=np.int32))
        length += 1
        done = term | trunc
        if done.any():
            assert info["episodes"] == done.sum()
            np.testing.assert_allclose(info["episode_return"], rew[done].mean(), rtol=1e-6)
            np.testing.assert_allclose(info["episode_length"], length[done].mean(), rtol=1e-6)
            episodes += info["episodes"]
        else:
            assert info == {}
        length[done] = 0
    assert episodes > 50


def test_vector_engine_interface_exposes_the_instance_spec_and_env_array():
    """The threads engine reads the spec copy and the env array through these addresses."""

    class Spec(ctypes.Structure):  # the head of PcEnvSpec, as laid out by env.h
        _fields_ = [("abi_version", ctypes.c_int32), ("name", ctypes.c_char_p), ("env_size", ctypes.c_size_t),
                    ("rows", ctypes.c_int32), ("obs_size", ctypes.c_int32), ("obs_dtype", ctypes.c_int32),
                    ("act_size", ctypes.c_int32), ("act_dtype", ctypes.c_int32)]

    env = Snake(num_envs=3, num_snakes=5, vision=3)
    spec = Spec.from_address(env.spec_address)
    assert (spec.name, spec.rows, spec.obs_size, spec.env_size) == (b"Snake", 5, 49, env.env_size)
    # the env array: env i's PcEnv header starts with its observation row pointer
    observations_of_env_2 = ctypes.c_void_p.from_address(env.envs_address + 2 * env.env_size).value
    assert observations_of_env_2 == env.observations.ctypes.data + 2 * 5 * 49
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.spec_address


@pytest.mark.parametrize("name", MULTI_ROW)
def test_render_ansi(name):
    cls, kwargs = MULTI_ROW[name]
    env = cls(num_envs=2, render_mode="ansi", **kwargs)
    env.reset()
    text = env.render()
    assert isinstance(text, str) and text.count("\n") >= 2
    assert cls(num_envs=1, **kwargs).render() is None


def test_get_include_ships_the_cython_declarations():
    import os

    assert os.path.isfile(os.path.join(puffercore.get_include(), "puffercore", "env.pxd"))


# ---- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize("num_envs, error", [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError),
                                             ("4", TypeError), (None, TypeError)])
def test_num_envs_must_be_a_positive_int(num_envs, error):
    with pytest.raises(error, match="num_envs must be an int >= 1"):
        CartPole(num_envs=num_envs)


@pytest.mark.parametrize("cls", [CartPole, Squared, Snake, Connect4Env])
def test_unknown_kwargs_are_rejected(cls):
    with pytest.raises(TypeError, match="colour"):
        cls(num_envs=1, colour="red")


@pytest.mark.parametrize(
    "cls, kwargs, match",
    [
        (CartPole, {"continuous": 1}, "continuous"),
        (Squared, {"size": 4}, "size must be odd"),
        (Busy, {"max_cost_us": -1.0}, "max_cost_us"), (Busy, {"min_cost_us": 5.0, "max_cost_us": 1.0}, "min_cost_us"),
        (Busy, {"length": 0}, "length"),
        (Squared, {"size": 1}, "size"),
        (Squared, {"max_steps": 0}, "max_steps"),
        (Snake, {"width": 1}, "width"),
        (Snake, {"num_snakes": 0}, "num_snakes"),
        (Snake, {"vision": 0}, "vision"),
        (Snake, {"width": 3, "height": 3, "num_snakes": 5, "num_food": 5}, "fit"),
        (CartPole, {"render_mode": "human"}, "render_mode"),
        (CartPole, {"seed": -1}, "seed"),
    ],
)
def test_bad_config_is_rejected(cls, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        cls(num_envs=1, **kwargs)


@pytest.mark.parametrize(
    "actions, error, match",
    [
        (np.zeros(3, np.int32), ValueError, "shape"),
        (np.zeros((4, 1), np.int32), ValueError, "shape"),
        (np.zeros(4, np.float32), TypeError, "integers"),
        (np.array([0, 1, 2, 0], np.int32), ValueError, "out of range"),
        (np.array([0, 1, -1, 0], np.int64), ValueError, "out of range"),
        # int64 values that narrow to an action in range (2**32 + 1 -> 1) are still refused
        (np.array([0, 2**32 + 1, 0, 0], np.int64), ValueError, "out of range"),
        (np.array([0, 0, -(2**32), 0], np.int64), ValueError, "out of range"),
        (np.array([0, 0, 0, 2**63 - 1], np.int64), ValueError, "out of range"),
        ("left", ValueError, "shape"),
    ],
)
def test_bad_discrete_actions(actions, error, match):
    env = CartPole(num_envs=4)
    env.reset()
    with pytest.raises(error, match=match):
        env.step(actions)
    env.step(np.array([0, 1, 1, 0], np.int64))  # other int dtypes and lists are converted
    env.step([0, 1, 1, 0])


def test_int64_actions_are_written_as_the_buffer_dtype_and_a_refused_write_changes_nothing():
    env = Snake(num_envs=3, num_snakes=2)  # 6 rows, actions 0-3
    env.reset(seed=1)
    actions = np.array([0, 1, 2, 3, 3, 1])
    env.write_actions(actions)
    assert env.actions.dtype == np.int32 and env.actions.tolist() == actions.tolist()
    env.write_actions(np.array([2, 1], np.int64), 2, 4)
    assert env.actions.tolist() == [0, 1, 2, 1, 3, 1]
    with pytest.raises(ValueError, match="out of range"):
        env.write_actions(np.array([0, 0, 0, 4, 0, 0], np.int64))
    assert env.actions.tolist() == [0, 1, 2, 1, 3, 1]


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_bad_continuous_actions(bad):
    env = CartPole(num_envs=2, continuous=True)
    env.reset()
    with pytest.raises(ValueError, match="finite"):
        env.step(np.array([[0.5], [bad]], np.float32))
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(2, np.float32))
    env.step(np.array([[0.5], [3.0]]))  # float64 is converted; values are clipped to [-1, 1]


def test_non_contiguous_actions_take_the_checked_path():
    env = Snake(num_envs=2, num_snakes=2)
    env.reset()
    strided = (np.arange(8, dtype=np.int32) % 4)[::2]
    assert not strided.flags.c_contiguous
    env.step(strided)
    with pytest.raises(ValueError, match="out of range"):
        env.step((np.arange(8, dtype=np.int32) + 4)[::2])


def test_bad_buffers():
    space = CartPole().single_observation_space
    good = Buffers.allocate(4, space, gymnasium.spaces.Discrete(2))
    with pytest.raises(ValueError, match="observations"):
        CartPole(num_envs=4, buffers=Buffers.allocate(5, space, gymnasium.spaces.Discrete(2)))
    wrong_dtype = Buffers(**{**good.__dict__, "actions": np.zeros(4, np.int64)})
    with pytest.raises(ValueError, match="actions"):
        CartPole(num_envs=4, buffers=wrong_dtype)
    strided = Buffers(**{**good.__dict__, "rewards": np.zeros(8, np.float32)[::2]})
    with pytest.raises(ValueError, match="contiguous"):
        CartPole(num_envs=4, buffers=strided)
    with pytest.raises(TypeError, match="terminals"):
        CartPole(num_envs=4, buffers=Buffers(**{**good.__dict__, "terminals": [False] * 4}))


def test_lifecycle_errors():
    env = CartPole(num_envs=2)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(2, np.int32))
    env.reset()
    with pytest.raises(ValueError, match="options"):
        env.reset(options={"low": -0.1})
    with pytest.raises(ValueError, match="seed"):
        env.reset(seed=2**64)
    with pytest.raises(ValueError, match="env_index_base"):
        env.env_index_base = -1
    env.close()
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.step(np.zeros(2, np.int32))
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()
    with CartPole(num_envs=1) as scoped:
        scoped.reset()
    with pytest.raises(RuntimeError, match="closed"):
        scoped.reset()


def test_a_spec_comes_in_a_capsule():
    """(Wrong specs are refused too: tests/test_env_spec.py.)"""
    with pytest.raises(ValueError, match="PyCapsule"):
        NativeEnv("not a capsule", 1, 0, None, None)


@pytest.mark.parametrize("name", MULTI_ROW)
def test_serial_vector_of_single_envs_equals_one_multi_env(name):
    """Per-index seeding: the vector's env j is sub-env j of one big env, row for row."""
    cls, kwargs = MULTI_ROW[name]
    vector = puffercore.vector.make(cls, 4, backend="serial", seed=0, **kwargs)
    whole = cls(num_envs=4, seed=0, **kwargs)
    actions = random_actions(whole, np.random.default_rng(5), 60)
    assert_same_frames(rollout(vector, actions, seed=9), rollout(whole, actions, seed=9))
    vector.close()


def test_busy_steps_cost_the_drawn_time_and_follow_the_game():
    import time
    env = Busy(num_envs=4, seed=0, length=3, min_cost_us=200.0, max_cost_us=400.0)
    env.reset(seed=1)
    start = time.perf_counter()
    steps = 23  # the next step is the 8th episode's last
    for _ in range(steps):
        _, rewards, terminals, truncations, info = env.step(np.ones(4, np.int32))
        assert (rewards == 1).all() and not terminals.any()
    elapsed = time.perf_counter() - start
    assert elapsed >= steps * 4 * 200e-6  # every env spun at least min_cost_us each step
    _, _, _, truncations, info = env.step(np.zeros(4, np.int32))
    assert truncations.all() and info["episode_length"] == 3
