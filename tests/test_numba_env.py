"""Numba envs (puffercore.numba_env): the numba CartPole against the C CartPole --
same seed and actions, identical transitions -- on every backend, PPO on it, and the
errors a definition gets."""

import os
import sys

import gymnasium
import numpy as np
import pytest

numba = pytest.importorskip("numba", reason="puffercore.numba_env needs numba (pip install 'puffercore[numba]')")

import puffercore.vector  # noqa: E402
from puffercore import numba_env, ppo  # noqa: E402
from puffercore.numba_env import rng_below, rng_float  # noqa: E402
from puffercore.numba_env.cartpole import STATE, NumbaCartPole, reset, step  # noqa: E402
from puffercore.ocean import CartPole  # noqa: E402

SPACES = dict(observation_space=gymnasium.spaces.Box(-5, 5, (4,), np.float32), action_space=gymnasium.spaces.Discrete(2))


def assert_same_steps(ours, theirs, steps, num_envs, seed=0):
    """Step both with the same random actions; every buffer and info must agree bit for bit."""
    rng = np.random.default_rng(seed)
    np.testing.assert_array_equal(ours.reset(seed=seed)[0], theirs.reset(seed=seed)[0])
    episodes = 0
    for t in range(steps):
        actions = rng.integers(0, 2, num_envs).astype(np.int32)
        mine, reference = ours.step(actions), theirs.step(actions)
        for name, a, b in zip(("observations", "rewards", "terminals", "truncations"), mine, reference):
            np.testing.assert_array_equal(a, b, err_msg=f"{name} differ at step {t}")
        assert mine[4] == reference[4], f"info differs at step {t}"
        episodes += mine[4].get("episodes", 0)
    return episodes


def test_matches_c_cartpole_bit_for_bit():
    num_envs = 32
    ours, theirs = NumbaCartPole(num_envs=num_envs, seed=7), CartPole(num_envs=num_envs, seed=7)
    assert assert_same_steps(ours, theirs, 2000, num_envs) > 1000  # many resets: the RNG streams agree
    np.testing.assert_array_equal(ours.final_observations, theirs.final_observations)
    # a reseeded reset, and a shifted env index base, reseed as C envs do
    ours.env_index_base = theirs.env_index_base = 5
    assert_same_steps(ours, theirs, 200, num_envs, seed=123)
    state = ours.env_state(3)
    assert state.dtype.names == tuple(name for name, _ in STATE)
    np.testing.assert_array_equal([state["x"], state["x_dot"], state["theta"], state["theta_dot"]],
                                  ours.observations[3])


def test_truncation_and_logs_match_c():
    """A balancing policy reaches the 500-step truncation; logs are the C env's."""
    ours, theirs = NumbaCartPole(num_envs=4, seed=1), CartPole(num_envs=4, seed=1)
    obs, _ = ours.reset()
    theirs.reset()
    truncated = 0
    for _ in range(1100):
        actions = (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int32)
        obs, rewards, terminals, truncations, info = ours.step(actions)
        reference = theirs.step(actions)
        np.testing.assert_array_equal(obs, reference[0])
        assert info == reference[4]
        truncated += int(truncations.sum())
    assert truncated > 0


@pytest.mark.parametrize("backend, kwargs", [("serial", {}), ("threads", {"num_workers": 2}),
                                             ("processes", {"num_workers": 2})])
def test_every_backend_matches_c(backend, kwargs):
    num_envs = 4 if backend == "processes" else 64
    ours = puffercore.vector.make(NumbaCartPole, num_envs, backend=backend, seed=3, **kwargs)
    theirs = puffercore.vector.make(CartPole, num_envs, backend=backend, seed=3, **kwargs)
    try:
        assert assert_same_steps(ours, theirs, 300, num_envs, seed=3) > 0
    finally:
        ours.close()
        theirs.close()


def test_ppo_trains_it(tmp_path):
    config = ppo.PPOConfig(num_envs=8, horizon=16, minibatch_size=64, update_epochs=2, hidden_size=16,
                           total_timesteps=8 * 16 * 3, quiet=True, tensorboard=False, run_dir=str(tmp_path / "run"))
    trainer = ppo.train(config, NumbaCartPole)
    assert trainer.global_step >= 8 * 16 * 3


def test_actions_are_checked_before_step():
    env = NumbaCartPole(num_envs=2, seed=0)
    env.reset()
    with pytest.raises(ValueError):
        env.step(np.array([0, 2], dtype=np.int32))


def test_compile_time_is_reported():
    assert 0 < NumbaCartPole.compile_seconds < 120


def test_rng_helpers():
    rng = np.array([0, 1], dtype=np.uint64)  # any state; inc must be odd
    draws = [rng_below(rng, 6) for _ in range(600)]
    assert set(draws) == set(range(6))
    floats = np.array([rng_float(rng) for _ in range(1000)])
    assert 0 <= floats.min() and floats.max() < 1 and np.all(floats == floats.astype(np.float32))  # float32 values


def test_other_spaces_and_state_arrays():
    """MultiDiscrete actions arrive as a row, Box actions as a float32 row; array fields work."""

    def reset_walk(state, obs, rng):
        state.position[:] = 0
        obs[:] = 0

    def step_walk(state, action, obs, rng, log):
        for k in range(2):
            state.position[k] += action[k]
            obs[k] = state.position[k]
        return -1.0, False, False

    for action_space in (gymnasium.spaces.MultiDiscrete([3, 3], start=[-1, -1]),
                         gymnasium.spaces.Box(-1, 1, (2,), np.float32)):
        Walk = numba_env.define("Walk", state=[("position", np.float32, (2,))], reset=reset_walk, step=step_walk,
                                observation_space=gymnasium.spaces.Box(-np.inf, np.inf, (2,), np.float32),
                                action_space=action_space)
        env = Walk(num_envs=3, seed=0)
        assert env.single_action_space == action_space  # carried through the run-time spec's bounds
        env.reset()
        actions = np.array([[1, -1], [0, 1], [-1, 0]], dtype=action_space.dtype)
        obs, rewards, *_ = env.step(actions)
        obs, rewards, *_ = env.step(actions)
        np.testing.assert_array_equal(obs, 2 * actions)
        np.testing.assert_array_equal(rewards, -1)


def test_typing_error_names_function_and_field():
    def bad_step(state, action, obs, rng, log):
        state.velocity += 1  # no such field
        return 1.0, False, False

    with pytest.raises(TypeError, match=r"(?s)Bad: numba cannot compile step \(.*bad_step.*velocity"):
        numba_env.define("Bad", state=STATE, reset=reset, step=bad_step, **SPACES)

    def no_return(state, action, obs, rng, log):
        state.tick += 1

    with pytest.raises(TypeError, match=r"expected step\(state, action, obs, rng, log\) -> \(reward, terminal"):
        numba_env.define("Bad", state=STATE, reset=reset, step=no_return, **SPACES)


@pytest.mark.parametrize("change, message", [
    (dict(name="not a name"), "name must be a Python identifier"),
    (dict(state=np.float32), "state must have at least one named field"),
    (dict(state=[("board", object)]), "state must be a structured dtype|state field 'board'"),
    (dict(observation_space=gymnasium.spaces.Discrete(3)), "observation_space must be"),
    (dict(action_space=gymnasium.spaces.Box(-1, 1, (2,), np.float64)), "action_space must be"),
    (dict(step="step"), "step must be a Python function"),
    (dict(log_names="episode_return"), "log_names must be a list"),
    (dict(log_names=["episodes"]), "log_names must be non-empty strings other than 'episodes'"),
    (dict(log_names=["a", "a"]), "log_names must be distinct"),
    (dict(log_names=[f"s{k}" for k in range(16)]), "at most 15 names"),
])
def test_definition_errors_name_the_argument(change, message):
    arguments = dict(name="Bad", state=STATE, reset=reset, step=step, **SPACES) | change
    with pytest.raises((TypeError, ValueError), match=message):
        numba_env.define(arguments.pop("name"), **arguments)


def test_no_ansi_render_and_closed_env():
    with pytest.raises(ValueError, match="render_mode"):
        NumbaCartPole(render_mode="ansi")
    env = NumbaCartPole(num_envs=2)
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.env_state(0)


def test_new_env_numba_writes_a_module_that_trains_from_the_cli(tmp_path, monkeypatch, capsys):
    from puffercore import checkpoint, run
    from puffercore.__main__ import main

    main(["new-env", "corridor", "--dir", str(tmp_path), "--numba"])
    assert "puffercore train corridor:Corridor" in capsys.readouterr().out
    assert os.listdir(tmp_path / "corridor") == ["corridor.py"]
    monkeypatch.syspath_prepend(str(tmp_path / "corridor"))
    monkeypatch.delitem(sys.modules, "corridor", raising=False)
    main(["train", "corridor:Corridor", "--total-timesteps", "512", "--vec.num-envs", "8", "--train.horizon", "16",
          "--train.minibatch-size", "64", "--quiet", "--tensorboard", "false", "--run-dir", str(tmp_path / "run")])
    saved = checkpoint.load(tmp_path / "run" / run.CHECKPOINT_NAME)
    assert saved["env"] == "corridor:Corridor" and saved["counters"]["global_step"] == 512
