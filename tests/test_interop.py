"""puffercore vector envs as a gymnasium VectorEnv and as a stable-baselines3 VecEnv: the
API contracts those frameworks rely on, over native and Python envs, flat and nested."""

import gymnasium
import numpy as np
import pytest

import puffercore.vector
from puffercore.interop.gymnasium_vector import GymnasiumVectorEnv
from puffercore.ocean import CartPole, Connect4Env


def python_cartpoles(num_envs=4, backend="serial"):
    return puffercore.vector.make(lambda: gymnasium.make("CartPole-v1"), num_envs, backend=backend, seed=0)


@pytest.mark.parametrize("make", [lambda: puffercore.vector.make(CartPole, 4, backend="threads", seed=0),
                                  lambda: python_cartpoles(4, "processes"), python_cartpoles],
                         ids=["native-threads", "python-processes", "python-serial"])
def test_gymnasium_vector_env_contract(make):
    envs = GymnasiumVectorEnv(make())
    assert isinstance(envs, gymnasium.vector.VectorEnv) and envs.num_envs == 4
    assert envs.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.SAME_STEP
    assert envs.observation_space.shape == (4, 4) and envs.action_space.shape == (4,)
    obs, infos = envs.reset(seed=3)
    assert envs.observation_space.contains(obs) and infos == {}
    finals = episodes = 0
    for _ in range(200):
        obs, rewards, terminations, truncations, infos = envs.step(np.ones(4, np.int64))  # pushing right: falls
        assert obs.shape == (4, 4) and rewards.dtype == np.float64 and terminations.dtype == np.bool_
        done = terminations | truncations
        if done.any():
            np.testing.assert_array_equal(infos["_final_obs"], done)
            for row in np.flatnonzero(done):
                final = infos["final_obs"][row]
                assert final.shape == (4,) and abs(final[2]) > 0.2  # the pole had fallen: angle past 12 degrees
                assert not np.array_equal(final, obs[row])  # the returned observation starts the next episode
            finals += done.sum()
            episodes += infos["_episode"].sum()
            np.testing.assert_array_equal(infos["episode"]["l"][done] > 0, True)
    assert finals > 0 and episodes == finals
    with pytest.raises(ValueError, match="seed must be an int or None"):
        envs.reset(seed=[1, 2, 3, 4])
    envs.close()


@pytest.mark.parametrize("make", [lambda: puffercore.vector.make(CartPole, 4, backend="threads", seed=0),
                                  python_cartpoles], ids=["native-threads", "python-serial"])
def test_gymnasium_vector_env_reports_episodes_as_record_episode_statistics_does(make):
    """CleanRL's loop reads infos["episode"] and infos["_episode"]: the same numbers as
    gymnasium's wrapper gives on the same episodes, with no wrapper to add."""
    ours = GymnasiumVectorEnv(make())
    theirs = gymnasium.wrappers.vector.RecordEpisodeStatistics(GymnasiumVectorEnv(make(), episode_statistics=False))
    ours.reset(seed=5)
    theirs.reset(seed=5)
    actions = np.random.default_rng(0).integers(0, 2, (300, 4))
    ended = 0
    for step_actions in actions:
        *_, our_infos = ours.step(step_actions)
        *_, their_infos = theirs.step(step_actions)
        assert ("episode" in our_infos) == ("episode" in their_infos)
        if "episode" in their_infos:
            np.testing.assert_array_equal(our_infos["_episode"], their_infos["_episode"])
            for key in ("r", "l"):
                np.testing.assert_array_equal(our_infos["episode"][key], their_infos["episode"][key])
            assert (our_infos["episode"]["t"][our_infos["_episode"]] > 0).all()
            ended += our_infos["_episode"].sum()
    assert ended > 20  # random CartPole episodes last about 22 steps
    ours.close()
    theirs.close()


def test_gymnasium_vector_env_same_seed_same_episodes():
    def rollout():
        envs = GymnasiumVectorEnv(python_cartpoles())
        obs, _ = envs.reset(seed=11)
        trace = [obs]
        for step in range(30):
            trace.append(envs.step(np.full(4, step % 2))[0])
        envs.close()
        return np.stack(trace)

    np.testing.assert_array_equal(rollout(), rollout())


def test_gymnasium_vector_env_nested_observations_and_staggered_refusal():
    envs = GymnasiumVectorEnv(puffercore.vector.make(Connect4Env, 3, backend="threads", seed=0))
    assert isinstance(envs.single_observation_space, gymnasium.spaces.Dict)
    obs, _ = envs.reset(seed=0)
    assert set(obs) == {"action_mask", "board"} and obs["board"].shape == (3, 2, 6, 7)
    assert envs.observation_space.contains(obs)
    legal = obs["action_mask"].argmax(1)
    obs, *_ = envs.step(legal)
    assert obs["action_mask"].shape == (3, 7)
    envs.close()
    staggered = puffercore.vector.make(CartPole, 4, backend="threads", batch_size=2)
    with pytest.raises(ValueError, match="needs a synchronous vector env"):
        GymnasiumVectorEnv(staggered)
    staggered.close()


def test_sb3_vec_env_contract_and_learning():
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import VecNormalize

    from puffercore.interop.sb3 import SB3VecEnv

    venv = SB3VecEnv(python_cartpoles(4, "processes"))
    venv.seed(5)
    obs = venv.reset()
    assert obs.shape == (4, 4) and venv.num_envs == 4
    terminal_seen = False
    for _ in range(100):
        venv.step_async(np.ones(4, np.int64))
        obs, rewards, dones, infos = venv.step_wait()
        assert len(infos) == 4 and rewards.dtype == np.float32
        for row in np.flatnonzero(dones):
            terminal_seen = True
            assert infos[row]["terminal_observation"].shape == (4,)
            assert infos[row]["TimeLimit.truncated"] is False  # fell, not timed out
            assert infos[row]["episode"]["l"] > 0 and infos[row]["episode"]["r"] == infos[row]["episode"]["l"]
    assert terminal_seen
    assert venv.get_attr("num_envs") == [4] * 4 and venv.env_is_wrapped(sb3.common.monitor.Monitor) == [True] * 4
    with pytest.raises(RuntimeError, match="needs a step_async"):
        venv.step_wait()
    # SB3 trains on it, its own wrappers on top, and logs episodes from our infos.
    model = sb3.PPO("MlpPolicy", VecNormalize(venv), n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=512)
    assert len(model.ep_info_buffer) > 0
    venv.close()
