"""Numba envs (puffercore.numba_env): the numba CartPole and Snake against the C ones --
same config, seed and actions, identical transitions -- on every backend, PPO on them,
and the errors a definition gets."""

import os
import subprocess
import sys

import gymnasium
import numpy as np
import pytest

numba = pytest.importorskip("numba", reason="puffercore.numba_env needs numba (pip install 'puffercore[numba]')")

import puffercore.vector  # noqa: E402
from puffercore import numba_env, ppo  # noqa: E402
from puffercore.numba_env import rng_below, rng_float  # noqa: E402
from puffercore.numba_env.cartpole import STATE, NumbaCartPole, reset, step  # noqa: E402
from puffercore.numba_env.snake import numba_snake  # noqa: E402
from puffercore.ocean import CartPole, Snake  # noqa: E402

SPACES = dict(observation_space=gymnasium.spaces.Box(-5, 5, (4,), np.float32), action_space=gymnasium.spaces.Discrete(2))


def assert_same_steps(ours, theirs, steps, seed=0):
    """Step both with the same random actions; every buffer (final observations of the
    rows that ended, masks) and info must agree bit for bit."""
    rng = np.random.default_rng(seed)
    np.testing.assert_array_equal(ours.reset(seed=seed)[0], theirs.reset(seed=seed)[0])
    episodes = 0
    for t in range(steps):
        actions = rng.integers(0, ours.single_action_space.n, ours.num_agents).astype(np.int32)
        mine, reference = ours.step(actions), theirs.step(actions)
        for name, a, b in zip(("observations", "rewards", "terminals", "truncations"), mine, reference):
            np.testing.assert_array_equal(a, b, err_msg=f"{name} differ at step {t}")
        ended = mine[2] | mine[3]
        np.testing.assert_array_equal(ours.final_observations[ended], theirs.final_observations[ended])
        np.testing.assert_array_equal(ours.masks, theirs.masks, err_msg=f"masks differ at step {t}")
        assert mine[4] == reference[4], f"info differs at step {t}"
        episodes += mine[4].get("episodes", 0)
    return episodes


def test_matches_c_cartpole_bit_for_bit():
    num_envs = 32
    ours, theirs = NumbaCartPole(num_envs=num_envs, seed=7), CartPole(num_envs=num_envs, seed=7)
    assert assert_same_steps(ours, theirs, 2000) > 1000  # many resets: the RNG streams agree
    np.testing.assert_array_equal(ours.final_observations, theirs.final_observations)
    # a reseeded reset, and a shifted env index base, reseed as C envs do
    ours.env_index_base = theirs.env_index_base = 5
    assert_same_steps(ours, theirs, 200, seed=123)
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


# A grid crowded enough (13 of 16 cells taken) that free cells are often found by the scan
# after the random probes, and snakes die all the time.
CROWDED_SNAKE = dict(width=4, height=4, num_snakes=3, num_food=10, vision=1)


@pytest.mark.parametrize("config", [{}, CROWDED_SNAKE], ids=["default", "crowded"])
def test_snake_matches_c_snake_bit_for_bit(config):
    """Multi-agent: every row's observation, reward, flags, mask and final observation,
    the logs and the picture, with deaths, meals and respawns in the same tick."""
    ours, theirs = (cls(num_envs=8, seed=5, render_mode="ansi", **config) for cls in (numba_snake, Snake))
    assert ours.num_agents == theirs.num_agents == 8 * (config or {"num_snakes": 4})["num_snakes"]
    assert assert_same_steps(ours, theirs, 400, seed=5) > 50
    assert ours.render() == theirs.render()
    assert ours.env_state(0).num_snakes == ours.num_agents // 8  # config fields are state fields


def check_snake_configs(runs):
    """Snake configs against the C Snake, in a fresh interpreter (the test below): each
    of `runs` is "config=fresh" (compiled here) or "config=cached" (loaded from numba's cache)."""
    from puffercore.numba_env.compiler import compiled
    from puffercore.numba_env.snake import snake_class

    configs = {"default": {}, "crowded": CROWDED_SNAKE}
    for run in runs:
        name, origin = run.split("=")
        ours, theirs = (cls(num_envs=4, seed=5, **configs[name]) for cls in (numba_snake, Snake))
        assert assert_same_steps(ours, theirs, 200, seed=5) > 0, run
        hits = [cfunc.cache_hits for cfunc in compiled(snake_class(**configs[name])).cfuncs]
        assert hits == ([1, 1] if origin == "cached" else [0, 0]), (run, hits)


def test_configs_cached_by_two_processes_run_side_by_side(tmp_path):
    """The cache path of two configs (two state layouts) made by different processes:
    one process caches a config; another compiles a second and loads the first; a third
    loads both. Each must come from where expected and match the C Snake (numba names
    functions typed on a record after a per-process counter, which is why numba_env.jit
    inlines helpers: no such name may be shared by two cached configs)."""
    script = ("import sys; sys.path.insert(0, sys.argv[1]); from test_numba_env import check_snake_configs; "
              "check_snake_configs(sys.argv[2:])")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    tests = os.path.dirname(os.path.abspath(__file__))
    for runs in (["default=fresh"], ["crowded=fresh", "default=cached"], ["crowded=cached", "default=cached"]):
        # cwd: not the checkout, whose puffercore/ (no built extensions) would shadow the installed one
        result = subprocess.run([sys.executable, "-c", script, tests, *runs], env=env, cwd=tmp_path,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"{runs}:\n{result.stderr[-3000:]}"


ENV_PAIRS = {"cartpole": (NumbaCartPole, CartPole), "snake": (numba_snake, Snake)}


@pytest.mark.parametrize("pair", ENV_PAIRS)
@pytest.mark.parametrize("backend, kwargs", [("serial", {}), ("threads", {"num_workers": 2}),
                                             ("processes", {"num_workers": 2})])
def test_every_backend_matches_c(pair, backend, kwargs):
    num_envs = 4 if backend == "processes" else 64
    ours, theirs = (puffercore.vector.make(cls, num_envs, backend=backend, seed=3, **kwargs)
                    for cls in ENV_PAIRS[pair])
    try:
        assert assert_same_steps(ours, theirs, 300, seed=3) > 0
    finally:
        ours.close()
        theirs.close()


@pytest.mark.parametrize("pair", ENV_PAIRS)
def test_ppo_trains_it(pair, tmp_path):
    config = ppo.PPOConfig(num_envs=8, horizon=16, minibatch_size=64, update_epochs=2, hidden_size=16,
                           total_timesteps=8 * 16 * 3, quiet=True, tensorboard=False, run_dir=str(tmp_path / "run"))
    trainer = ppo.train(config, ENV_PAIRS[pair][0])
    assert trainer.global_step >= 8 * 16 * 3


@pytest.mark.parametrize("make", [NumbaCartPole, numba_snake])
def test_actions_are_checked_before_step(make):
    env = make(num_envs=2, seed=0)
    env.reset()
    actions = np.zeros(env.num_agents, np.int32)
    actions[-1] = env.single_action_space.n  # one past the last action, in the last row
    with pytest.raises(ValueError):
        env.step(actions)


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
        if isinstance(action_space, gymnasium.spaces.MultiDiscrete):  # each column against its own bounds
            for bad in ([[1, -1], [0, 2], [-1, 0]], [[1, -1], [0, 1], [-2, 0]], [[2**32, -1], [0, 1], [-1, 0]]):
                with pytest.raises(ValueError, match="out of range"):
                    env.step(np.array(bad, np.int64))


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


def reset_pairs(state, agents, rng):
    state.tick = 0
    agents.observations[:] = 0


def step_pairs(state, agents, rng, log):
    """Two agents add their Box actions to their observations; agent 0 is masked out after
    its first tick; agent 1's episode is truncated every third tick."""
    state.tick += 1
    for k in range(2):
        agents.observations[k] += agents.actions[k]
        agents.rewards[k] = k + 1
    agents.masks[0] = state.tick < 2
    if state.tick % 3 == 0:
        agents.truncations[1] = True
        agents.final_observations[1] = agents.observations[1]
        agents.observations[1] = 0
        log[0] += state.tick


PAIRS = dict(state=[("tick", np.int32)], reset=reset_pairs, log_names=["ticks"], agents=2,
             observation_space=gymnasium.spaces.Box(-9, 9, (2,), np.float32),
             action_space=gymnasium.spaces.Box(-1, 1, (2,), np.float32))


def test_multi_agent_rows():
    """Per-row actions, observations, rewards, masks, final observations; the wrapper
    clears rewards and flags before each step and counts each ended row as an episode."""
    Pairs = numba_env.define("Pairs", step=step_pairs, **PAIRS)
    env = Pairs(num_envs=3, seed=0)
    assert env.num_agents == 6 and env.observations.shape == (6, 2)
    env.reset()
    actions = np.tile(np.array([[0.5, -0.25], [1.0, 0.5]], np.float32), (3, 1))
    for tick in range(1, 4):
        obs, rewards, terminals, truncations, info = env.step(actions)
        np.testing.assert_array_equal(rewards, np.tile([1, 2], 3))
        np.testing.assert_array_equal(env.masks, np.tile([tick < 2, True], 3))
        assert not terminals.any() and truncations.tolist() == [False, tick == 3] * 3
    np.testing.assert_array_equal(obs[::2], 3 * actions[::2])
    np.testing.assert_array_equal(obs[1::2], 0)
    np.testing.assert_array_equal(env.final_observations[1::2], 3 * actions[1::2])
    assert info == {"episodes": 3.0, "ticks": 3.0}
    assert not env.step(actions)[3].any()  # flags cleared in the next step


def test_multi_agent_typing_errors_name_function_and_field():
    def misspelt_row(state, agents, rng, log):
        agents.reward[0] = 1.0  # Agents has `rewards`

    with pytest.raises(TypeError, match=r"(?s)Bad: numba cannot compile step \(.*misspelt_row, expected "
                                        r"step\(state, agents, rng, log\), returning nothing.*reward"):
        numba_env.define("Bad", step=misspelt_row, **PAIRS)

    def misspelt_field(state, agents, rng, log):
        state.ticks += 1

    with pytest.raises(TypeError, match=r"(?s)Bad: numba cannot compile step \(.*misspelt_field.*unknown field "
                                        r"'ticks'; the state's fields are \['tick'\]"):
        numba_env.define("Bad", step=misspelt_field, **PAIRS)

    def single_agent_reset(state, obs, rng):
        obs[0] = rng  # a uint64[2] array into a float32 element: numba refuses

    with pytest.raises(TypeError, match=r"numba cannot compile reset \(.*single_agent_reset, expected "
                                        r"reset\(state, agents, rng\)"):
        numba_env.define("Bad", step=step_pairs, **PAIRS | {"reset": single_agent_reset})


@pytest.mark.parametrize("change, message", [
    (dict(name="not a name"), "name must be a Python identifier"),
    (dict(agents=0), "agents must be None .* or a positive int"),
    (dict(config={"speed": 1}), "config field 'speed' is not a state field; the state's fields are"),
    (dict(config={"tick": "fast"}), "config field 'tick'"),
    (dict(render="ansi"), "render must be a function"),
    (dict(state=np.float32), "state must have at least one named field"),
    (dict(state=[("board", object)]), "state must be a structured dtype|state field 'board'"),
    (dict(observation_space=gymnasium.spaces.Discrete(3)), "observation_space must be"),
    (dict(action_space=gymnasium.spaces.Box(-1, 1, (2,), np.float64)), "action_space must be"),
    (dict(step="step"), "step must be a Python function"),
    (dict(log_names="episode_return"), "log_names must be a list"),
    (dict(log_names=["episodes"]), "log_names must be non-empty strings other than 'episodes'"),
    (dict(log_names=["a", "a"]), "log_names must be distinct"),
    (dict(log_names=[f"s{k}" for k in range(16)]), "at most 15 names"),
    (dict(state=[("size", np.int32)]), "state field 'size' has the name of an attribute of NumPy records"),
    (dict(state=[("x", np.float32), ("max", np.float32)]), r"state field 'max' .* rename it"),
    (dict(render_rgb_array="picture"), "render_rgb_array must be a function"),
    (dict(render_fps=0), "render_fps must be a positive number"),
])
def test_definition_errors_name_the_argument(change, message):
    arguments = dict(name="Bad", state=STATE, reset=reset, step=step, **SPACES) | change
    with pytest.raises((TypeError, ValueError), match=message):
        numba_env.define(arguments.pop("name"), **arguments)


def test_config_is_set_before_the_first_reset():
    def reset_counter(state, obs, rng):
        obs[0] = state.start + state.tick  # start: config, never written by the env
        state.tick = 0

    def step_counter(state, action, obs, rng, log):
        return 0.0, False, False

    Counter = numba_env.define("Counter", state=[("start", np.int32), ("tick", np.int32)], reset=reset_counter,
                               step=step_counter, config={"start": 7}, **SPACES)
    env = Counter(num_envs=2, seed=0)
    np.testing.assert_array_equal(env.reset()[0][:, 0], 7)
    assert env.env_state(1).start == 7


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


def test_numba_snake_draws_the_c_snakes_rgb_array_picture():
    ours = numba_snake(num_envs=2, seed=3, render_mode="rgb_array")
    theirs = Snake(num_envs=2, seed=3, render_mode="rgb_array")
    assert ours.metadata["render_modes"] == ["ansi", "rgb_array"]
    ours.reset(seed=3)
    theirs.reset(seed=3)
    actions = np.random.default_rng(0).integers(0, 4, (30, ours.num_agents))
    for step_actions in actions:
        ours.step(step_actions)
        theirs.step(step_actions)
        np.testing.assert_array_equal(ours.render(), theirs.render())


# docs/authoring.md's picture of the corridor, on the template's env (what new-env --numba writes)
PICTURE_MODULE = """
import numpy as np
from puffercore import numba_env
from puffercore.numba_env.template import STATE, Template, reset, step


def picture(state):
    frame = np.zeros((16, 9 * 16, 3), np.uint8)
    frame[:, 8 * 16:] = (60, 200, 90)
    cell = min(max(int(state.position), 0), 8)
    frame[4:12, cell * 16 + 4:cell * 16 + 12] = 255
    return frame


Corridor = numba_env.define("Corridor", state=STATE, reset=reset, step=step, log_names=["episode_length"],
                            observation_space=Template.definition.observation_space,
                            action_space=Template.definition.action_space, render_rgb_array=picture,
                            render_fps=10)
"""


def test_a_numba_env_with_a_picture_records_eval_video(tmp_path, monkeypatch, capsys):
    pytest.importorskip("imageio_ffmpeg", reason="the video extra (pip install 'puffercore[video]')")
    import imageio.v2 as imageio

    from puffercore.__main__ import main

    (tmp_path / "lit_corridor.py").write_text(PICTURE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lit_corridor", raising=False)
    main(["train", "lit_corridor:Corridor", "--total-timesteps", "512", "--vec.num-envs", "8", "--train.horizon",
          "16", "--train.minibatch-size", "64", "--quiet", "--tensorboard", "false", "--run-dir", str(tmp_path / "run")])
    video = str(tmp_path / "corridor.mp4")
    main(["eval", "lit_corridor:Corridor", "--checkpoint", str(tmp_path / "run"), "--episodes", "2", "--max-steps",
          "40", "--video", video])
    assert f"video: {video}" in capsys.readouterr().out
    with imageio.get_reader(video, format="FFMPEG") as reader:
        assert reader.get_meta_data()["fps"] == 10
        frames = [frame for frame in reader]
    assert 2 <= len(frames) <= 40 and frames[0].shape == (16, 144, 3)
    assert (frames[0][:, 128:, 1] > 150).all()  # the exit's green, through the codec
