"""Policies of the user's own (ppo.ActorCritic): the README's custom CNN trained, resumed
and evaluated; `--policy module:attr`; a recurrent one; the compiled update; what a
checkpoint records and never imports; errors that name what was wrong."""

import dataclasses
import os
import pathlib
import warnings

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from puffercore import checkpoint, ppo, run
from puffercore.__main__ import main
from puffercore.spaces import SpaceTree

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def board_cnn(monkeypatch):
    """The README's BoardCNN, imported as `connect4_cnn` from examples/ (the folder alone
    on the path: the repository root would shadow the installed package)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import connect4_cnn

    return connect4_cnn.BoardCNN


def connect4_config(run_dir, **overrides) -> ppo.PPOConfig:
    values = dict(total_timesteps=2 * 32 * 8, num_envs=32, horizon=8, minibatch_size=128, update_epochs=2,
                  quiet=True, tensorboard=False, run_dir=str(run_dir), compile="false")
    return ppo.PPOConfig.for_env("connect4", **{**values, **overrides})


def test_custom_cnn_trains_resumes_and_evaluates(tmp_path, board_cnn):
    run_dir = tmp_path / "run"
    trainer = ppo.train(connect4_config(run_dir, eval_interval=1, eval_episodes=2), "connect4", policy=board_cnn)
    assert isinstance(trainer.policy, board_cnn) and trainer.update == 2
    assert (run_dir / "best.pt").exists()  # evaluation during training played it too
    assert trainer.losses["loss/minibatches"] == 4  # it learned: 2 epochs of 2 minibatches
    saved = checkpoint.load(run_dir / run.CHECKPOINT_NAME)
    assert saved["policy"]["name"] == "connect4_cnn:BoardCNN"
    assert saved["policy"]["observation_tree"]["keys"] == ["action_mask", "board"]
    assert any(name.startswith("body.0.") for name in saved["model"])

    with pytest.raises(ValueError, match=r"trained with the policy 'connect4_cnn:BoardCNN'.*--policy connect4_cnn:Board"):
        ppo.train({"total_timesteps": 4 * 32 * 8}, resume=str(run_dir))
    resumed = ppo.train({"total_timesteps": 4 * 32 * 8}, resume=str(run_dir), policy=board_cnn)
    assert resumed.update == 4 and isinstance(resumed.policy, board_cnn)
    before = {name: tensor.clone() for name, tensor in saved["model"].items()}
    after = checkpoint.load(run_dir / run.CHECKPOINT_NAME)["model"]
    assert any(not torch.equal(before[name], after[name]) for name in before)  # the resumed run trained it

    returns = ppo.evaluate(str(run_dir), episodes=3, policy=board_cnn)
    assert len(returns) == 3 and all(value in (-1.0, 0.0, 1.0) for value in returns)
    with pytest.raises(ValueError, match="code a checkpoint names is never imported"):
        ppo.evaluate(str(run_dir), episodes=1)


def test_cli_policy_module_attribute(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))  # main() imports module:attribute from the path (and the cwd)
    run_dir = str(tmp_path / "run")
    flags = ["--total-timesteps", "512", "--vec.num-envs", "32", "--train.horizon", "8", "--train.minibatch-size", "128",
             "--quiet", "--tensorboard", "false", "--compile", "false"]
    main(["train", "connect4", "--policy", "connect4_cnn:BoardCNN", "--run-dir", run_dir, *flags])
    assert checkpoint.load(os.path.join(run_dir, run.CHECKPOINT_NAME))["policy"]["name"] == "connect4_cnn:BoardCNN"
    main(["eval", "--checkpoint", run_dir, "--episodes", "2", "--policy", "connect4_cnn:BoardCNN"])
    assert "2 episodes, mean return" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "--checkpoint", run_dir, "--episodes", "2"])
    assert exit_info.value.code == 2
    assert "If you trust it, pass it yourself (`--policy connect4_cnn:BoardCNN`)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "connect4", "--policy", "no_such_module_here:Net", "--run-dir", str(tmp_path / "x"), *flags])
    assert "policy 'no_such_module_here:Net': cannot import module" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--resume", run_dir, "--total-timesteps", "1024", "--policy", "connect4_cnn:Other"])
    assert "module 'connect4_cnn' has no attribute 'Other'" in capsys.readouterr().err


def test_a_checkpoint_naming_a_policy_never_imports_it(tmp_path, monkeypatch):
    """A file that names code (a planted module on the path, which would write a marker
    when imported) is refused by resume, eval, Policy.load and export alike."""
    monkeypatch.syspath_prepend(str(tmp_path))
    marker = tmp_path / "imported"
    (tmp_path / "planted_policy.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass Net: pass\n")
    run_dir = tmp_path / "run"
    ppo.train(ppo.PPOConfig.for_env("cartpole", total_timesteps=256 * 16, quiet=True, tensorboard=False,
                                    run_dir=str(run_dir)), "cartpole")
    path = run_dir / run.CHECKPOINT_NAME
    state = checkpoint.load(path)
    assert state["policy"]["name"] == "builtin"
    state["policy"]["name"] = "planted_policy:Net"
    checkpoint.save(path, state)
    attempts = [lambda: ppo.train({"total_timesteps": 256 * 32}, resume=str(run_dir)),
                lambda: ppo.evaluate(str(run_dir), episodes=1),
                lambda: ppo.Policy.load(str(run_dir)),
                lambda: ppo.export_policy(str(run_dir), "torchscript")]
    for attempt in attempts:
        with pytest.raises(ValueError, match="'planted_policy:Net'; code a checkpoint names is never imported"):
            attempt()
    assert not marker.exists()


class WrongParams(ppo.ActorCritic):
    def __init__(self, observation_space, action_space, observation_tree=None):
        super().__init__(observation_space, action_space, observation_tree)
        self.net = nn.Linear(observation_space.shape[0], self.head.size + 1)

    def forward(self, observations):
        out = self.net(observations)
        return out, out[:, 0]


class UnsqueezedValue(WrongParams):
    def forward(self, observations):
        out = self.net(observations)
        return out[:, :-1], out[:, :1]


def test_a_policy_returning_wrong_shapes_is_named(tmp_path):
    config = ppo.PPOConfig.for_env("cartpole", total_timesteps=256 * 16, quiet=True, tensorboard=False,
                                   run_dir=str(tmp_path / "run"))
    with pytest.raises(ValueError, match=r"WrongParams.forward returned params of shape \(\d+, 3\) for \d+ "
                                         r"observations; expected \(\d+, 2\)"):
        ppo.train(config, "cartpole", policy=WrongParams)
    with pytest.raises(ValueError, match=r"UnsqueezedValue.forward returned a value of shape \(\d+, 1\).*squeeze"):
        ppo.train(config, "cartpole", policy=UnsqueezedValue)
    with pytest.raises(TypeError, match="made a Linear, not a puffercore.ppo.ActorCritic"):
        ppo.train(config, "cartpole", policy=lambda observation_space, action_space, tree: nn.Linear(4, 2))
    with pytest.raises(ValueError, match="policy must be module:attribute"):
        ppo.train(config, "cartpole", policy="WrongParams")
    with pytest.raises(ValueError, match=r"value_norm \(PopArt\) needs the policy's value layer as `critic`"):
        ppo.train(dataclasses.replace(config, value_norm=True), "cartpole", policy=WrongParams)


class GRUPolicy(ppo.ActorCritic):
    """A recurrent policy of the user's: a GRU cell, its state one [batch, 16] tensor."""

    def __init__(self, observation_space, action_space, observation_tree=None):
        super().__init__(observation_space, action_space, observation_tree)
        self.cell = nn.GRUCell(observation_space.shape[0], 16)
        self.actor, self.critic = nn.Linear(16, self.head.size), nn.Linear(16, 1)

    def initial_state(self, batch, device):
        return (torch.zeros(batch, 16, device=device),)

    def forward(self, observations, state):
        hidden = self.cell(observations.float(), state[0])
        return self.actor(hidden), self.critic(hidden).squeeze(-1), (hidden,)


def test_a_recurrent_policy_of_ones_own_trains_on_whole_rows(tmp_path):
    config = ppo.PPOConfig.for_env("memory", total_timesteps=64 * 20 * 2, quiet=True, tensorboard=False,
                                   run_dir=str(tmp_path / "run"), lstm=False)
    trainer = ppo.Trainer("memory", config, run_dir=str(tmp_path / "run"), policy=GRUPolicy)
    try:
        assert trainer.recurrent and trainer.rollout["state_0"].shape == (64, 16)
        trainer.reset_envs()
        trainer.collect()
        # Replaying the rows from their stored state gives the log-probs collection took.
        view = trainer.rollout.transition_view()
        params, _ = trainer._replay_rows({**view, "obs": view["obs"]})
        replayed, _ = trainer.policy.head.evaluate(params.reshape(-1, params.shape[-1]), None,
                                                   view["action"].reshape(-1))
        live = view["mask"].reshape(-1)
        torch.testing.assert_close(replayed[live], view["log_prob"].reshape(-1)[live], atol=1e-5, rtol=0)
        trainer.learn()
    finally:
        trainer.close()
    trained = ppo.train(config, "memory", policy=GRUPolicy)
    assert trained.update == 2


def test_a_custom_policy_compiles(tmp_path, board_cnn, capsys):
    trainer = ppo.train(connect4_config(tmp_path / "run", total_timesteps=32 * 8, compile="true"), "connect4",
                        policy=board_cnn)
    assert trainer.update_step.compiled is not None and trainer.losses["compile_seconds"] > 0
    assert "torch.compile failed" not in capsys.readouterr().err


def test_resume_refuses_another_policy(tmp_path, board_cnn, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    run_dir = tmp_path / "run"
    ppo.train(connect4_config(run_dir, total_timesteps=32 * 8), "connect4")
    with pytest.raises(ValueError, match="trained with puffercore's built-in policy.*not 'connect4_cnn:BoardCNN'"):
        ppo.train({"total_timesteps": 2 * 32 * 8}, resume=str(run_dir), policy=board_cnn)
    other = tmp_path / "other"
    ppo.train(connect4_config(other, total_timesteps=32 * 8), "connect4", policy=board_cnn)
    (tmp_path / "another_policy.py").write_text("from connect4_cnn import BoardCNN as Net\n")
    with pytest.raises(ValueError, match="trained with the policy 'connect4_cnn:BoardCNN', not 'another_policy:Net'"):
        ppo.evaluate(str(other), episodes=1, policy="another_policy:Net")


def test_builtin_checkpoints_before_policy_records_still_resume(tmp_path):
    """A checkpoint without the "policy" entry (earlier puffercore) is the built-in policy's."""
    run_dir = tmp_path / "run"
    config = ppo.PPOConfig.for_env("cartpole", quiet=True, tensorboard=False, run_dir=str(run_dir))
    rollout = config.num_envs * config.horizon
    ppo.train(dataclasses.replace(config, total_timesteps=rollout), "cartpole")
    path = run_dir / run.CHECKPOINT_NAME
    state = checkpoint.load(path)
    del state["policy"]
    checkpoint.save(path, state)
    assert ppo.train({"total_timesteps": 2 * rollout}, resume=str(run_dir)).update == 2
    assert len(ppo.evaluate(str(run_dir), episodes=1)) == 1
    np.testing.assert_array_equal(checkpoint.load(path)["policy"]["observation_space"]["shape"], [4])


# ---- Dict observations of mixed dtypes in a policy of one's own ----------------------------------
class DictTarget(gymnasium.Env):
    """Mixed-dtype Dict observations (float32, int64, int8 leaves: one byte row each); reward
    for the action that matches the `count` leaf, episodes of 8 steps."""

    observation_space = spaces.Dict({"position": spaces.Box(-2, 2, (3,), np.float32), "count": spaces.Discrete(3),
                                     "grid": spaces.Box(0, 3, (2, 2), np.int8)})
    action_space = spaces.Discrete(3)

    def _observe(self):
        self.observation = self.observation_space.sample()
        return self.observation

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.steps = 0
        return self._observe(), {}

    def step(self, action):
        reward = float(action == self.observation["count"])
        self.steps += 1
        return self._observe(), reward, False, self.steps >= 8, {}


class RawBytes(ppo.ActorCritic):
    """`observations.float()` straight into a Linear: on a mixed Dict, byte values."""

    def __init__(self, observation_space, action_space, observation_tree=None):
        super().__init__(observation_space, action_space, observation_tree)
        self.net = nn.Linear(observation_space.shape[0], self.head.size + 1)

    def forward(self, observations):
        out = self.net(observations.float())
        return out[:, :-1], out[:, -1]


class Decoded(ppo.ActorCritic):
    """The module docstring's example: `decoded_size` inputs from `decode`."""

    def __init__(self, observation_space, action_space, observation_tree=None):
        super().__init__(observation_space, action_space, observation_tree)
        self.actor = nn.Sequential(nn.Linear(self.decoded_size, 16), nn.Tanh(), nn.Linear(16, self.head.size))
        self.critic = nn.Sequential(nn.Linear(self.decoded_size, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, observations):
        x = self.decode(observations)
        return self.actor(x), self.critic(x).squeeze(-1)


def test_a_mixed_dict_decodes_to_floats_and_raw_bytes_are_warned_once():
    tree = SpaceTree(DictTarget.observation_space)
    assert tree.is_bytes and tree.flat_space.dtype == np.uint8
    space = DictTarget.observation_space
    space.seed(3)
    samples = [space.sample() for _ in range(5)]
    rows = np.zeros((5, tree.size), np.uint8)
    tree.flatten({key: np.stack([sample[key] for sample in samples]) for key in space.spaces}, out=rows)

    decoded = Decoded(tree.flat_space, DictTarget.action_space, tree)
    floats = decoded.decode(torch.as_tensor(rows))
    assert decoded.decoded_size == 3 + 1 + 4 and floats.dtype == torch.float32 and floats.shape == (5, 8)
    for index, sample in enumerate(samples):  # leaves in the space's order: count, grid, position
        expected = np.concatenate([[sample["count"]], sample["grid"].ravel(), sample["position"]]).astype(np.float32)
        np.testing.assert_array_equal(floats[index].numpy(), expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decoded.output(torch.as_tensor(rows))

    raw = RawBytes(tree.flat_space, DictTarget.action_space, tree)
    with pytest.warns(UserWarning, match=r"RawBytes's Linear\(in_features=\d+.* gets the observations' raw bytes.*"
                                         r"self\.decode\(observations\) \(8 floats\)"):
        raw.output(torch.as_tensor(rows))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        raw.output(torch.as_tensor(rows))  # once


def test_a_custom_policy_trains_on_a_dict_env_and_acts_on_dict_observations(tmp_path):
    run_dir = str(tmp_path / "run")
    config = ppo.PPOConfig(num_envs=4, horizon=16, minibatch_size=32, update_epochs=1, total_timesteps=4 * 16 * 2,
                           backend="serial", quiet=True, tensorboard=False, run_dir=run_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        ppo.train(config, DictTarget, policy=Decoded)
    policy = ppo.Policy.load(run_dir, policy=Decoded)
    space = DictTarget.observation_space
    space.seed(5)
    samples = [space.sample() for _ in range(3)]
    one = policy.act(samples[0])
    assert one.shape == () and one == policy.act(policy.observation_tree.flatten(samples[0]))
    batch = {key: np.stack([sample[key] for sample in samples]) for key in space.spaces}
    np.testing.assert_array_equal(policy.act(batch), [policy.act(sample) for sample in samples])
    with pytest.raises(ValueError, match=r"observations must be one observation of Dict.* or a batch of them.*"
                                         r"observation\['grid'\] does not fit"):
        policy.act({**samples[0], "grid": np.zeros(3, np.int8)})
