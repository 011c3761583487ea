"""PPO takes whatever a user brings: ocean names, gymnasium ids, module:attribute, env
classes and creators, vector envs; the CLI's --config and the preset envs with opponents."""

import json
import os
import sys

import gymnasium
import numpy as np
import pytest
import torch

import puffercore.vector
from puffercore import checkpoint, env_sources, logger, ppo, run
from puffercore.__main__ import main
from puffercore.ocean import CartPole
from puffercore.ppo import PPOConfig

SMALL = dict(num_envs=8, horizon=16, minibatch_size=64, update_epochs=2, hidden_size=16,
             total_timesteps=8 * 16 * 2, quiet=True, tensorboard=False)
GUESS_MODULE = '''
import gymnasium
import numpy as np


class Guess(gymnasium.Env):
    """Say the hidden bit shown in the observation: reward 1 when right, 10 steps."""

    observation_space = gymnasium.spaces.Box(0, 1, (2,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return self._observe(), {}

    def _observe(self):
        self.bit = int(self.np_random.integers(2))
        return np.eye(2, dtype=np.float32)[self.bit]

    def step(self, action):
        reward = float(action == self.bit)
        self.steps += 1
        return self._observe(), reward, False, self.steps >= 10, {}


class Lives(gymnasium.Env):
    """Atari's episodic life in small: 3 lives of 4 steps, each step scoring 5 points
    of which the learner sees the sign; the info has the game's raw score at its end."""

    observation_space = gymnasium.spaces.Box(0, 1, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        if getattr(self, "lives", 0) == 0:
            self.lives, self.score = 3, 0.0
        self.steps = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.steps += 1
        self.score += 5.0
        if self.steps < 4:
            return np.zeros(1, np.float32), 1.0, False, False, {}
        self.lives -= 1
        info = {"episode_return": self.score} if self.lives == 0 else {"episode_continues": True}
        return np.zeros(1, np.float32), 1.0, True, False, info
'''


@pytest.fixture
def guess_module(tmp_path, monkeypatch):
    """A user's env module `guess_envs` on sys.path (no package, no registration)."""
    (tmp_path / "guess_envs.py").write_text(GUESS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "guess_envs", raising=False)
    return tmp_path


def test_resolve_names_classes_creators_and_vectors(guess_module):
    cartpole = env_sources.resolve("cartpole")
    assert cartpole.native and cartpole.creator is CartPole and cartpole.spec == "cartpole"
    for name in ("Acrobot-v1", "gymnasium:Acrobot-v1"):
        source = env_sources.resolve(name)
        assert not source.native and source.spec == "gymnasium:Acrobot-v1"
    imported = env_sources.resolve("guess_envs:Guess")
    assert imported.spec == "guess_envs:Guess" and not imported.native
    import guess_envs

    assert env_sources.resolve(guess_envs.Guess).spec == "guess_envs:Guess"  # a class names itself
    assert env_sources.resolve(CartPole).native
    assert env_sources.resolve(lambda: gymnasium.make("CartPole-v1")).spec is None  # a lambda can't be named
    vec = puffercore.vector.make(CartPole, 2, backend="serial")
    assert env_sources.resolve(vec).vector is vec
    vec.close()


@pytest.mark.parametrize("env, error, message", [
    ("pong", ValueError, "unknown env 'pong'; expected an ocean env"),
    ("gymnasium:Nope-v9", ValueError, "unknown gymnasium env id 'Nope-v9'"),
    ("no_such_module_xyz:Env", ValueError, "cannot import module 'no_such_module_xyz'"),
    ("json:NoSuchEnv", ValueError, "module 'json' has no attribute 'NoSuchEnv'"),
    (42, TypeError, "env must be a name, an env class, a creator or a vector env"),
])
def test_resolve_errors_name_what_was_expected(env, error, message):
    with pytest.raises(error, match=message):
        env_sources.resolve(env)


@pytest.mark.parametrize("num_workers, batch_size, vector_batch", [(2, None, 2), (2, 4, 1), (4, 4, 2)])
def test_native_envs_on_processes_get_the_workers_asked_for(num_workers, batch_size, vector_batch):
    """`train cartpole --vec.backend processes --vec.num-workers 2`: the native env is
    made in one block of sub-envs per worker (a batch is whole workers), so the workers
    asked for are what runs, and the env steps."""
    vec = env_sources.make_vector(env_sources.resolve("cartpole"), backend="processes", num_envs=8, num_workers=num_workers,
                           batch_size=batch_size, seed=0)
    try:
        assert (vec.num_workers, vec.num_envs, vec.batch_size) == (num_workers, 8, vector_batch)
        vec.async_reset(seed=0)
        for _ in range(3):
            batch = vec.recv()
            assert len(batch.observations) == (batch_size or 8)
            vec.send(np.zeros(len(batch.observations), np.int32))
    finally:
        vec.close()


@pytest.mark.parametrize("num_workers, batch_size, message", [
    (3, None, "num_workers must divide num_envs=8, got 3"),
    (2, 2, r"num_workers must be a multiple of num_envs / batch_size = 4 on the processes backend"),
])
def test_processes_worker_counts_are_refused_in_the_users_numbers(num_workers, batch_size, message):
    with pytest.raises(ValueError, match=message):
        env_sources.make_vector(env_sources.resolve("cartpole"), backend="processes", num_envs=8, num_workers=num_workers,
                         batch_size=batch_size)


def test_an_env_instance_is_refused_with_what_to_pass_instead():
    with pytest.raises(TypeError, match="got an env instance of TimeLimit.*pass TimeLimit \\(the class\\) or a lambda"):
        env_sources.resolve(gymnasium.make("CartPole-v1"))
    with pytest.raises(TypeError, match="got an env instance of CartPole"):
        ppo.Trainer(CartPole(num_envs=2), PPOConfig(**SMALL))


def test_evaluate_reports_the_games_raw_score_across_lives(tmp_path, guess_module):
    import guess_envs

    ppo.train(PPOConfig(**SMALL, backend="serial", run_dir=str(tmp_path)), guess_envs.Lives)
    # Each game: 3 lives of 4 steps at 5 points, whose learner's rewards (1 per step) sum to 4 per life.
    assert ppo.evaluate(str(tmp_path), episodes=2, env=guess_envs.Lives) == [60.0, 60.0]


def test_trains_a_user_class_a_creator_and_a_vector_env(tmp_path, guess_module):
    import guess_envs

    trainer = ppo.train(PPOConfig(**SMALL, backend="serial", run_dir=str(tmp_path / "class")), guess_envs.Guess)
    assert trainer.global_step == 8 * 16 * 2 and trainer.env_spec == "guess_envs:Guess"
    returns = ppo.evaluate(str(tmp_path / "class"), episodes=2, env="guess_envs:Guess")  # the checkpoint's, by name
    assert len(returns) == 2
    with pytest.raises(ValueError, match="the checkpoint names the env 'guess_envs:Guess', which is not one"):
        ppo.evaluate(str(tmp_path / "class"), episodes=2)  # a checkpoint never imports the code it names

    creator_dir = str(tmp_path / "creator")
    ppo.train(PPOConfig(**SMALL, backend="serial", run_dir=creator_dir), lambda: guess_envs.Guess())
    with pytest.raises(ValueError, match="has no importable name.*pass the env"):
        ppo.evaluate(creator_dir, episodes=1)
    assert len(ppo.evaluate(creator_dir, episodes=1, env=guess_envs.Guess)) == 1

    vec = puffercore.vector.make(CartPole, 8, backend="serial", seed=3)
    trainer = ppo.train(PPOConfig(**SMALL, run_dir=str(tmp_path / "vec")), vec)
    assert trainer.vec is vec and trainer.global_step == 8 * 16 * 2
    obs, _ = vec.reset()  # the caller's vector env is still open
    assert obs.shape == (8, 4)
    vec.close()


@pytest.mark.parametrize("kind", ["name", "class", "creator"])
def test_a_run_resolves_its_env_once(tmp_path, guess_module, monkeypatch, kind):
    """ppo.train resolves the env once, into the trainer's EnvSource, and passes that to
    the training envs, the evaluation env and the saved env spec."""
    import guess_envs

    env = {"name": "guess_envs:Guess", "class": guess_envs.Guess, "creator": lambda: guess_envs.Guess()}[kind]
    calls, resolve = [], env_sources.resolve
    monkeypatch.setattr(env_sources, "resolve", lambda env: calls.append(env) or resolve(env))
    config = PPOConfig.for_env(env, **SMALL, backend="serial", eval_interval=1, eval_episodes=1, run_dir=str(tmp_path))
    trainer = ppo.train(config, env)
    assert calls == [env] and trainer.env_spec == (None if kind == "creator" else "guess_envs:Guess")
    assert os.path.isfile(os.path.join(str(tmp_path), "best.pt"))  # the evaluation env ran


def test_cli_trains_module_attribute_and_config_files(tmp_path, guess_module, capsys):
    run_dir = str(tmp_path / "run")
    main(["train", "guess_envs:Guess", "--vec.backend", "serial", "--total-timesteps", "256", "--vec.num-envs", "8",
          "--train.horizon", "16", "--train.minibatch-size", "64", "--quiet", "--tensorboard", "false",
          "--run-dir", run_dir])
    with open(os.path.join(run_dir, "config.json")) as file:
        saved = json.load(file)
    assert saved["env"] == "guess_envs:Guess" and saved["train"]["horizon"] == 16
    main(["eval", "guess_envs:Guess", "--checkpoint", run_dir, "--episodes", "2"])  # the user's env, passed by them
    assert "2 episodes, mean return" in capsys.readouterr().out

    # A run's config.json trains again, its env named on the command line too (a file never
    # chooses code to import); flags override the file.
    again = str(tmp_path / "again")
    main(["train", "guess_envs:Guess", "--config", os.path.join(run_dir, "config.json"), "--run-dir", again,
          "--train.horizon", "8"])
    with open(os.path.join(again, "config.json")) as file:
        assert json.load(file) == {**saved, "run_dir": again, "train": {**saved["train"], "horizon": 8}}

    toml = tmp_path / "config.toml"
    toml.write_text('env = "cartpole"\nnum_envs = 8\nhorizon = 16\nminibatch_size = 64\ntotal_timesteps = 128\n'
                    f'quiet = true\ntensorboard = false\nrun_dir = "{tmp_path / "toml"}"\nbackend = "serial"\n')
    main(["train", "--config", str(toml)])
    assert checkpoint.load(tmp_path / "toml" / run.CHECKPOINT_NAME)["env"] == "cartpole"

    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SystemExit):
        main(["train", "--config", str(tmp_path / "bad.json")])
    assert "bad.json: not valid JSON" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["eval", "cartpole", "--checkpoint", run_dir])
    assert "was trained on 'guess_envs:Guess', not 'cartpole'" in capsys.readouterr().err


@pytest.mark.parametrize("env", ["connect4", "azul"])
def test_board_game_presets_train_against_their_opponents(tmp_path, env):
    config = PPOConfig.for_env(env, **{**SMALL, "total_timesteps": 8 * 16 * 3}, run_dir=str(tmp_path),
                               log_interval=0.0)
    trainer = ppo.train(config, env)
    assert trainer.global_step == 8 * 16 * 3 and trainer.policy.mask_leaf is not None
    rows = logger.read_csv(tmp_path / "metrics.csv")
    assert any("win_rate" in row for row in rows)
    # Illegal moves raise in these envs: training through the mask never made one.
    assert all(row.get("illegal_move_rate", 0.0) == 0.0 for row in rows)
    assert np.isfinite(trainer.losses["loss/loss"]) and torch.isfinite(trainer.rollout["value"]).all()


def test_mujoco_tasks_get_cleanrl_continuous_settings(tmp_path):
    pytest.importorskip("mujoco", reason="the mujoco extra (pip install 'puffercore[mujoco]')")
    for name in ("Hopper-v5", "gymnasium:Walker2d-v5"):
        config = PPOConfig.for_env(name)
        assert (config.horizon, config.minibatch_size, config.update_epochs, config.ent_coef) == (2048, 64, 10, 0.0)
        assert config.norm_obs and config.norm_reward and config.num_envs == 1
    # HalfCheetah's own tuned settings (rl-zoo's) over the MuJoCo preset, in any version.
    for name in ("HalfCheetah-v5", "gymnasium:HalfCheetah-v4"):
        config = PPOConfig.for_env(name)
        assert (config.horizon, config.update_epochs, config.gamma, config.hidden_size) == (512, 20, 0.98, 256)
        assert (config.log_std_init, config.ortho_init, config.anneal_lr) == (-2.0, False, False)
        assert config.norm_obs and config.norm_reward and config.num_envs == 1
    assert PPOConfig.for_env("HalfCheetah-v5", horizon=1024).horizon == 1024  # flags still override it
    assert PPOConfig.for_env("Acrobot-v1") == PPOConfig()  # no preset: the defaults
    config = PPOConfig.for_env("Hopper-v5", total_timesteps=2 * 256, horizon=256, quiet=True, tensorboard=False,
                               run_dir=str(tmp_path))
    trainer = ppo.train(config, "Hopper-v5")
    assert trainer.global_step == 512 and trainer.policy.head.is_continuous
    assert trainer.vec.observation_stats.count > 512  # float64 observations, normalized
    assert len(ppo.evaluate(str(tmp_path), episodes=1, max_steps=300)) == 1


def test_halfcheetah_preset_is_the_rl_zoo_settings_sb3_runs():
    """The preset and the SB3 side of bench/compare_mujoco.py are one set of settings (the
    README's "the same runs"), through the translation compare_mujoco's third side uses;
    settings it cannot translate are refused by name."""
    pytest.importorskip("mujoco", reason="the mujoco extra (pip install 'puffercore[mujoco]')")
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
    sys.path.insert(0, bench)
    try:
        from compare_learning import rl_zoo_overrides
        from compare_mujoco import TASKS
    finally:
        sys.path.remove(bench)
    settings = TASKS["HalfCheetah-v5"].sb3
    assert PPOConfig.for_env("HalfCheetah-v5", **rl_zoo_overrides(settings)) == PPOConfig.for_env("HalfCheetah-v5")
    for bad, message in ((dict(use_sde=True), "use_sde"), (dict(clip_range=("linear", 0.2)), "clip_range"),
                         (dict(policy_kwargs=dict(net_arch=dict(pi=[64], vf=[128]))), "net_arch"),
                         (dict(policy_kwargs=dict(squash_output=True)), "squash_output")):
        with pytest.raises(ValueError, match=message):
            rl_zoo_overrides({**settings, **bad})
