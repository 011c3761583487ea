"""Episode statistics have one implementation (`env.EpisodeMeans`): the numbers a
vector's infos report, the episodes the SB3 adapter hands SB3 and what the PPO trainer
logs agree, for an env that reports its own return (Atari's raw game score beside
clipped rewards) and for one that does not (the adapter sums its rewards)."""

import functools

import gymnasium
import numpy as np
import pytest

import puffercore.vector
from puffercore import ppo
from puffercore.env import EpisodeMeans
from puffercore.seeding import derive_seed

POINTS = 3.0  # every step scores this many points


class Game(gymnasium.Env):
    """Games of `lives` lives; a life lasts 2 to 4 steps (drawn from the env's seed), or
    3 with `fixed_length`. With `reports`, the learner's reward is the sign of the
    points (clipped) and each lost life but the last is an end for the learner only
    (`episode_continues`), the game's end reporting its raw score as `episode_return`,
    as `puffercore.atari` does; without, the reward is the points and the info empty."""

    observation_space = gymnasium.spaces.Box(0, 1, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, reports=True, lives=2, fixed_length=False):
        self.reports, self.lives, self.fixed_length = reports, lives, fixed_length
        self.lives_left = 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        if self.lives_left == 0:  # a new game; else the next life of this one
            self.lives_left, self.score = self.lives, 0.0
        self.steps, self.life_length = 0, 3 if self.fixed_length else int(self.np_random.integers(2, 5))
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.steps += 1
        self.score += POINTS
        reward = 1.0 if self.reports else POINTS
        if self.steps < self.life_length:
            return np.zeros(1, np.float32), reward, False, False, {}
        self.lives_left -= 1
        if self.lives_left:
            return np.zeros(1, np.float32), reward, True, False, {"episode_continues": True}
        return np.zeros(1, np.float32), reward, True, False, {"episode_return": self.score} if self.reports else {}


REPORTS_ITS_OWN = dict(reports=True, lives=2)
REPORTS_NOTHING = dict(reports=False, lives=1)


def reference_games(num_envs, steps, seed, **kwargs):
    """(raw score, length) of every game the envs finish within `steps` steps, played
    on the bare gymnasium envs seeded as a vector seeds its sub-envs."""
    games = []
    for index in range(num_envs):
        env = Game(**kwargs)
        env.reset(seed=derive_seed(seed, index))
        length = 0
        for _ in range(steps):
            _, _, terminal, _, info = env.step(0)
            length += 1
            if terminal:
                if not info.get("episode_continues"):
                    games.append((length * POINTS, length))
                    length = 0
                env.reset()
    return games


def vector_numbers(num_envs, steps, seed, **kwargs):
    vec = puffercore.vector.make(functools.partial(Game, **kwargs), num_envs, backend="serial", seed=seed)
    vec.reset(seed=seed)
    means = EpisodeMeans()
    for _ in range(steps):
        means.add(vec.step(np.zeros(num_envs, np.int64))[4])
    vec.close()
    info = means.drain()
    return info["episodes"], info["episode_return"], info["episode_length"]


def sb3_numbers(num_envs, steps, seed, **kwargs):
    pytest.importorskip("stable_baselines3")
    from puffercore.interop.sb3 import SB3VecEnv

    venv = SB3VecEnv(puffercore.vector.make(functools.partial(Game, **kwargs), num_envs, backend="serial"))
    venv.seed(seed)
    venv.reset()
    episodes = []
    for _ in range(steps):
        venv.step_async(np.zeros(num_envs, np.int64))
        infos = venv.step_wait()[3]
        episodes += [info["episode"] for info in infos if "episode" in info]
    venv.close()
    return len(episodes), np.mean([e["r"] for e in episodes]), np.mean([e["l"] for e in episodes])


@pytest.mark.parametrize("kwargs", [REPORTS_ITS_OWN, REPORTS_NOTHING], ids=["reports-its-return", "reports-nothing"])
def test_vector_infos_and_sb3_report_the_same_episodes(kwargs):
    num_envs, steps, seed = 4, 60, 7
    games = reference_games(num_envs, steps, seed, **kwargs)
    expected = (len(games), np.mean([score for score, _ in games]), np.mean([length for _, length in games]))
    assert len({length for _, length in games}) > 1  # episodes of several lengths: the weighting counts
    np.testing.assert_allclose(vector_numbers(num_envs, steps, seed, **kwargs), expected)
    # SB3 used to sum the clipped rewards of each life itself: 1 per step of a life.
    np.testing.assert_allclose(sb3_numbers(num_envs, steps, seed, **kwargs), expected)


@pytest.mark.parametrize("kwargs", [REPORTS_ITS_OWN, REPORTS_NOTHING], ids=["reports-its-return", "reports-nothing"])
def test_the_trainer_logs_what_the_vector_and_sb3_report(kwargs, tmp_path):
    kwargs = {**kwargs, "fixed_length": True}  # the trainer's own seeds and budget: the same game every time
    lives = kwargs["lives"]
    config = ppo.PPOConfig(total_timesteps=4 * 16 * 3, num_envs=4, horizon=16, minibatch_size=32, update_epochs=1,
                           backend="serial", hidden_size=8, log_interval=1e9, tensorboard=False, quiet=True,
                           run_dir=str(tmp_path / "run"))
    trainer = ppo.train(config, functools.partial(Game, **kwargs))
    rows = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
    header, last = rows[0].split(","), rows[-1].split(",")
    logged = dict(zip(header, last))
    game_length = 3 * lives
    assert float(logged["episode_return"]) == game_length * POINTS and float(logged["episode_length"]) == game_length
    assert trainer.recent_return() == game_length * POINTS
    _, sb3_return, sb3_length = sb3_numbers(4, 40, 0, **kwargs)
    _, vector_return, vector_length = vector_numbers(4, 40, 0, **kwargs)
    assert sb3_return == vector_return == game_length * POINTS and sb3_length == vector_length == game_length


def test_episode_means_weigh_by_episodes_per_statistic_and_merge():
    means = EpisodeMeans()
    means.add({"episodes": 3.0, "episode_return": 2.0, "win_rate": 1.0})
    means.add({})  # no episode ended
    means.add_episode({"episode_return": 6.0})
    other = EpisodeMeans()
    other.add({"episodes": 4.0, "episode_return": 1.0, "win_rate": 0.5})
    means.merge(other)
    assert means.drain() == {"episodes": 8.0, "episode_return": (6.0 + 6.0 + 4.0) / 8, "win_rate": (3.0 + 2.0) / 7}
    assert means.drain() == {}
