"""PPO trainer: storage and minibatches, action heads against torch.distributions,
masks, prioritized rows, config and CLI errors, learning, exact resume, LSTM memory."""

import dataclasses
import json
import os
import re
import shutil
import sys
import types

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces

import puffercore.emulation
import puffercore.vector
from puffercore import checkpoint, logger, plots, ppo, run, seeding
from puffercore.ppo.rollout import RolloutBuffer, iterate_minibatches, row_priorities
from puffercore.__main__ import main
from puffercore.ppo.default_policy import DefaultPolicy
from puffercore.ppo.policy import ActionHead
from puffercore.ppo import PPOConfig, make_policy


def small_config(**overrides) -> PPOConfig:
    values = dict(num_envs=8, horizon=16, minibatch_size=64, update_epochs=2, hidden_size=16,
                  total_timesteps=8 * 16 * 4, quiet=True, tensorboard=False, checkpoint_interval=2)
    return PPOConfig(**{**values, **overrides})


# ---- storage ------------------------------------------------------------------------------
def test_rollout_storage_and_transition_view_shapes():
    policy = DefaultPolicy(spaces.Box(-1, 1, (3,), np.float32), spaces.MultiDiscrete([2, 3]), lstm=True, hidden_size=8)
    rollout = RolloutBuffer(5, 7, spaces.Box(-1, 1, (3,), np.float32), policy, "cpu")
    # Only what needs the bootstrap slot is [N, T + 1]; per-transition fields are [N, T].
    assert rollout["obs"].shape == (5, 8, 3) and rollout["value"].shape == (5, 8) and rollout["mask"].shape == (5, 8)
    assert rollout["action"].shape == (5, 7, 2) and rollout["action"].dtype == torch.int64
    assert rollout["reward"].shape == rollout["terminal"].shape == rollout["final_value"].shape == (5, 7)
    assert rollout["state_0"].shape == (5, 8)  # per row: [N, hidden], hidden == T + 1 here on purpose
    rollout["advantage"] = torch.zeros(5, 7)
    view = rollout.transition_view()
    assert view["obs"].shape == (5, 7, 3) and view["reward"].shape == (5, 7) and view["advantage"].shape == (5, 7)
    assert view["state_0"].shape == (5, 8)
    rollout["obs"][2, 3] = 9.0
    rollout["reward"][2, 3] = 4.0
    assert view["obs"][2, 3, 0] == 9.0 and view["reward"][2, 3] == 4.0  # views, not copies
    assert all(view[name].data_ptr() == rollout[name].data_ptr() for name in rollout.fields)
    # collection writes through NumPy views of the fields, also of a field set anew
    rollout["reward"] = torch.zeros(5, 7)
    rollout.position[:] = 2
    slots = rollout.batch_slots(slice(0, 5))
    slots.store_transition({"reward": np.arange(5, dtype=np.float32), "terminal": np.zeros(5, bool),
                            "truncation": np.zeros(5, bool)})
    assert torch.equal(rollout["reward"][:, 1], torch.arange(5.0))


def test_iterate_minibatches_covers_every_transition_once():
    view = {"reward": torch.arange(12.0).reshape(3, 4), "obs": torch.arange(15.0).reshape(3, 5)[:, :4, None] * 2,
            "state_0": torch.zeros(3, 2)}
    seen = []
    for minibatch in iterate_minibatches(view, 5, torch.Generator().manual_seed(0)):
        index = minibatch["index"]
        assert len(index) <= 5 and "state_0" not in minibatch
        assert torch.equal(minibatch["reward"], (index // 4 * 4 + index % 4).float())  # transition n * T + t
        assert torch.equal(minibatch["obs"][:, 0], (index // 4 * 5 + index % 4).float() * 2)
        seen += index.tolist()
    assert sorted(seen) == list(range(12)) and seen != list(range(12))
    rows = list(iterate_minibatches(view, 2, torch.Generator().manual_seed(0), by_rows=True))
    assert [len(minibatch["index"]) for minibatch in rows] == [2, 1]
    assert rows[0]["reward"].shape == (2, 4) and rows[0]["state_0"].shape == (2, 2)


# ---- action heads --------------------------------------------------------------------------
def test_categorical_heads_match_torch_distributions():
    head = ActionHead(spaces.MultiDiscrete([3, 2], start=[1, -1]))
    logits = torch.randn(6, 5)
    actions, log_prob = head.sample(logits, None, torch.Generator().manual_seed(0))
    assert actions.shape == (6, 2)
    assert ((actions[:, 0] >= 1) & (actions[:, 0] <= 3)).all() and ((actions[:, 1] >= -1) & (actions[:, 1] <= 0)).all()
    first, second = torch.distributions.Categorical(logits=logits[:, :3]), torch.distributions.Categorical(logits=logits[:, 3:])
    expected = first.log_prob(actions[:, 0] - 1) + second.log_prob(actions[:, 1] + 1)
    torch.testing.assert_close(log_prob, expected)
    torch.testing.assert_close(head.evaluate(logits, None, actions)[1], first.entropy() + second.entropy())


def test_gaussian_head_matches_normal_and_clips_to_bounds():
    head = ActionHead(spaces.Box(-0.5, 0.5, (2,), np.float32))
    mean, log_std = torch.zeros(1000, 2), torch.tensor([0.3, -0.2])
    actions, log_prob = head.sample(mean, log_std, torch.Generator().manual_seed(0))
    reference = torch.distributions.Normal(mean, log_std.exp())
    torch.testing.assert_close(log_prob, reference.log_prob(actions).sum(-1))
    torch.testing.assert_close(head.evaluate(mean, log_std, actions)[1], reference.entropy().sum(-1))
    env_actions = head.to_env(actions)
    assert (np.abs(actions.numpy()) > 0.5).any() and np.abs(env_actions).max() <= 0.5


@pytest.mark.parametrize("activation, gain", [("tanh", 5 / 3), ("relu", 2 ** 0.5), ("gelu", 2 ** 0.5)])
def test_policy_initialisation_gains(activation, gain):
    policy = DefaultPolicy(spaces.Box(-1, 1, (4,), np.float32), spaces.Discrete(2), hidden_size=64, activation=activation)
    for encoder in (policy.encoder, policy.critic_encoder):
        hidden = encoder[0].weight
        # Orthogonal with gain g: W^T W = g^2 I (4 inputs < 64 outputs: columns orthonormal).
        torch.testing.assert_close(hidden.T @ hidden, gain ** 2 * torch.eye(4), atol=1e-5, rtol=0)
        assert float(encoder[0].bias.detach().abs().max()) == 0
    torch.testing.assert_close(policy.actor.weight @ policy.actor.weight.T, 1e-4 * torch.eye(2), atol=1e-8, rtol=0)
    assert float(policy.critic.weight.detach().norm()) == pytest.approx(1.0, abs=1e-5)
    assert all(float(layer.bias.detach().abs().max()) == 0 for layer in (policy.actor, policy.critic))
    recurrent = DefaultPolicy(spaces.Box(-1, 1, (4,), np.float32), spaces.Discrete(2), hidden_size=8, lstm=True, forget_bias=1.0)
    assert recurrent.lstm.bias_ih[8:16].eq(1.0).all() and recurrent.lstm.bias_ih[:8].eq(0).all()
    assert recurrent.critic_encoder is None  # the critic reads the LSTM state

def test_policy_sb3_style_initialisation():
    """ortho_init=False keeps torch's default init (SB3's ortho_init=False: uniform within
    1/sqrt(fan_in), biases too, no 0.01 policy head); log_std_init sets the starting std."""
    torch.manual_seed(0)
    policy = DefaultPolicy(spaces.Box(-1, 1, (17,), np.float32), spaces.Box(-1, 1, (6,), np.float32), hidden_size=256,
                    activation="relu", ortho_init=False, log_std_init=-2.0)
    for layer in (policy.encoder[0], policy.encoder[2], policy.critic_encoder[0], policy.actor, policy.critic):
        bound = layer.in_features ** -0.5
        weight, bias = layer.weight.detach(), layer.bias.detach()
        assert float(weight.abs().max()) <= bound and 0 < float(bias.abs().max()) <= bound
        # Uniform on [-bound, bound] has std bound / sqrt(3).
        assert float(weight.std()) == pytest.approx(bound / 3 ** 0.5, rel=0.1)
    torch.testing.assert_close(policy.log_std.detach(), torch.full((6,), -2.0))
    with torch.no_grad():
        out = policy(torch.zeros(20_000, 17))
        actions, _ = policy.sample(out, torch.Generator().manual_seed(1))
    assert float((actions - out.params).std()) == pytest.approx(np.exp(-2.0), rel=0.02)
    # The config's flags reach the policy the trainer builds.
    spaces_only = types.SimpleNamespace(single_observation_space=spaces.Box(-1, 1, (17,), np.float32),
                                        single_action_space=spaces.Box(-1, 1, (6,), np.float32))
    built = make_policy(spaces_only, PPOConfig(log_std_init=-1.5, ortho_init=False))
    assert built.log_std.eq(-1.5).all() and float(built.actor.bias.detach().abs().max()) > 0
    with pytest.raises(ValueError, match="log_std_init"):
        PPOConfig(log_std_init=float("nan")).validate()



def test_separate_critic_keeps_the_value_loss_out_of_the_actor():
    """With the default separate critic, the value loss has no gradient in any actor
    parameter (so its scale can't drown the policy gradient); a shared trunk mixes them."""
    space, actions = spaces.Box(-1, 1, (4,), np.float32), spaces.Discrete(3)
    observations = torch.randn(32, 4)
    for shared, leaks in ((False, False), (True, True)):
        policy = DefaultPolicy(space, actions, hidden_size=16, shared_trunk=shared)
        (policy(observations).value ** 2).mean().backward()
        actor_grads = [p.grad for p in (*policy.encoder.parameters(), *policy.actor.parameters())]
        assert any(g is not None and g.abs().sum() > 0 for g in actor_grads) == leaks
    with pytest.raises(ValueError, match="lstm=True needs shared_trunk=True"):
        DefaultPolicy(space, actions, lstm=True, shared_trunk=False)


# ---- action masks --------------------------------------------------------------------------
class MaskedChoice(gymnasium.Env):
    """Pick one of 6 actions; only those in the observed action_mask are legal (a random,
    non-empty subset each step). An illegal action is counted, never raised, so that a
    test can assert the count stays 0 through training. Reward 1 for action 0 if legal."""

    illegal = 0

    def __init__(self):
        self.observation_space = spaces.Dict({
            "position": spaces.Box(0, 1, (2,), np.float32),
            "action_mask": spaces.MultiBinary(6),
        })
        self.action_space = spaces.Discrete(6)

    def _observe(self):
        self.mask = (self.np_random.random(6) < 0.4).astype(np.int8)
        self.mask[self.np_random.integers(6)] = 1
        return {"position": self.np_random.random(2).astype(np.float32), "action_mask": self.mask}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return self._observe(), {}

    def step(self, action):
        if not self.mask[action]:
            MaskedChoice.illegal += 1
        reward = float(action == 0)
        self.steps += 1
        return self._observe(), reward, False, self.steps >= 10, {}


def test_action_masks_never_let_an_illegal_action_through(monkeypatch, tmp_path):
    tree = puffercore.emulation.SpaceTree(MaskedChoice().observation_space)
    assert tree.is_bytes  # float32 and int8 leaves share one byte row
    policy = DefaultPolicy(tree.flat_space, spaces.Discrete(6), observation_tree=tree, hidden_size=8)
    rng = np.random.default_rng(0)
    rows = np.zeros((4096, tree.size), np.uint8)
    masks = (rng.random((4096, 6)) < 0.3).astype(np.int8)
    masks[np.arange(4096), rng.integers(6, size=4096)] = 1
    tree.flatten({"position": rng.random((4096, 2)).astype(np.float32), "action_mask": masks}, out=rows)
    with torch.no_grad():
        out = policy.output(torch.as_tensor(rows))  # the mask applies in output
        actions, _ = policy.sample(out, torch.Generator().manual_seed(0))
    assert masks[np.arange(4096), actions.numpy()].all()

    monkeypatch.setattr(MaskedChoice, "illegal", 0)
    # A user's env class, passed as it is (serial: the counter lives in this process).
    trainer = ppo.train(small_config(total_timesteps=8 * 16 * 3, backend="serial", run_dir=str(tmp_path)), MaskedChoice)
    assert trainer.global_step == 8 * 16 * 3
    assert MaskedChoice.illegal == 0


# ---- losses with padding rows ---------------------------------------------------------------
def test_padding_rows_are_left_out_of_the_loss(tmp_path):
    trainer = ppo.Trainer("memory", small_config(run_dir=str(tmp_path)))
    try:
        generator = torch.Generator().manual_seed(1)
        live = {
            "obs": torch.rand(12, 3, generator=generator), "action": torch.randint(0, 2, (12,), generator=generator),
            "log_prob": -torch.rand(12, generator=generator), "advantage": torch.randn(12, generator=generator),
            "return": torch.randn(12, generator=generator), "value": torch.randn(12, generator=generator),
            "mask": torch.ones(12, dtype=torch.bool),
        }
        padding = {key: value[:5].clone() for key, value in live.items()}
        padding.update(advantage=torch.full((5,), 1e6), **{"return": torch.full((5,), -1e6)},
                       mask=torch.zeros(5, dtype=torch.bool))
        mixed = {key: torch.cat([live[key], padding[key]]) for key in live}
        expected = trainer._minibatch_loss(live, by_rows=False, weights=None)
        got = trainer._minibatch_loss(mixed, by_rows=False, weights=None)
        for key in ("loss", "policy", "value", "entropy", "approx_kl"):
            torch.testing.assert_close(got[key], expected[key])
    finally:
        trainer.close()


# ---- prioritized rows -----------------------------------------------------------------------
def test_prioritized_rows_follow_advantage_mass():
    advantages = torch.tensor([[1.0, -1.0], [0.0, 0.5], [3.0, 1.0], [0.0, 0.0]])
    mask = torch.ones(4, 2, dtype=torch.bool)
    probability, weights = row_priorities(advantages, mask, alpha=1.0, beta=0.5)
    torch.testing.assert_close(probability, torch.tensor([2.0, 0.5, 4.0, 0.0]) / 6.5, atol=1e-6, rtol=0)
    # (N p)^-beta, normalised by the max: row 1 has the smallest nonzero p, the largest weight.
    expected = (4 * probability[:3]) ** -0.5
    torch.testing.assert_close(weights[:3], expected / expected.max())
    draws = torch.multinomial(probability, 20000, replacement=True, generator=torch.Generator().manual_seed(0))
    frequencies = torch.bincount(draws, minlength=4).float() / 20000
    torch.testing.assert_close(frequencies, probability, atol=0.02, rtol=0)


def test_prioritized_training_runs(tmp_path):
    trainer = ppo.train(small_config(prio_alpha=0.6, run_dir=str(tmp_path)), "cartpole")
    assert trainer.update == trainer.num_updates
    assert np.isfinite(trainer.losses["loss/loss"])
    # Weighted whole rows take autograd's loss, so "auto" compiling stays open to them.
    assert trainer.update_step.gradients is None


# ---- collection -----------------------------------------------------------------------------
@pytest.mark.parametrize("batch_size", [0, 4])
def test_rollout_rows_are_aligned_trajectories(tmp_path, batch_size):
    """With the Memory env every step is checkable: a cue appears, `delay` steps later the
    query, and the transition taken on the query observation terminates with reward +-1.
    This holds across rollout boundaries (carried slot) and with staggered batches."""
    config = small_config(batch_size=batch_size, horizon=7, minibatch_size=28, run_dir=str(tmp_path))
    trainer = ppo.Trainer("memory", config)
    try:
        trainer.reset_envs()
        for _ in range(3):
            trainer.collect()
            rollout = trainer.rollout.transition_view()
            query = rollout["obs"][..., 2] == 1
            assert torch.equal(rollout["terminal"], query)
            assert torch.equal(rollout["reward"].abs() == 1, query)
            cue = rollout["obs"][..., :2].sum(-1) == 1
            # A query is `delay` (4) steps after a cue, within a row when both are stored.
            assert torch.equal(query[:, 4:], cue[:, :-4])
            assert (trainer.rollout.position == config.horizon + 1).all()
    finally:
        trainer.close()


# ---- config and CLI errors ------------------------------------------------------------------
@pytest.mark.parametrize("overrides, message", [
    (dict(gamma=1.5), "gamma must be in [0, 1]"),
    (dict(num_envs=0), "num_envs must be a positive int"),
    (dict(batch_size=3), "batch_size must be 0 or a divisor of num_envs=8"),
    (dict(backend="gpu"), "backend must be one of"),
    (dict(learning_rate=-1e-3), "learning_rate must be a positive number"),
    (dict(learning_rate=float("nan")), "learning_rate must be a finite number, got nan"),
    (dict(forget_bias=float("nan")), "forget_bias must be a finite number, got nan"),
    (dict(log_std_init=float("-inf")), "log_std_init must be a finite number, got -inf"),
    (dict(gamma=float("nan")), "gamma must be a finite number"),
    (dict(activation="sigmoid"), "activation must be one of"),
    (dict(horizon="16"), "horizon must be an int, got '16'"),
    (dict(norm_obs=1), "norm_obs must be a bool"),
])
def test_config_errors_are_clear(overrides, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        small_config(**overrides).validate()


def test_env_and_rollout_size_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown env 'pong'"):
        ppo.Trainer("pong", small_config(run_dir=str(tmp_path)))
    with pytest.raises(ValueError, match="unknown gymnasium env id 'Nope-v9'"):
        ppo.Trainer("gymnasium:Nope-v9", small_config(run_dir=str(tmp_path)))
    with pytest.raises(ValueError, match="unknown PPOConfig fields: \\['lr'\\]"):
        PPOConfig.for_env("cartpole", lr=0.1)
    with pytest.raises(ValueError, match="minibatch_size=4096 exceeds the transitions of one rollout"):
        ppo.Trainer("memory", small_config(minibatch_size=4096, run_dir=str(tmp_path)))


def test_cli_reports_config_errors(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "pong"])
    assert exit_info.value.code == 2 and "unknown env 'pong'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "cartpole", "--train.gamma", "2"])
    assert "gamma must be in [0, 1]" in capsys.readouterr().err
    for flag, value in (("--policy.forget-bias", "nan"), ("--train.clip-obs", "inf"), ("--log-interval", "-inf")):
        with pytest.raises(SystemExit):
            main(["train", "cartpole", f"{flag}={value}", "--total-timesteps", "1", "--run-dir", str(tmp_path)])
        assert re.search(rf"argument {re.escape(flag)}\S*: expected a finite number, got '{value}'",
                         capsys.readouterr().err)
    with pytest.raises(SystemExit):  # AlphaZero's flags too
        main(["alphazero", "connect4", "--c-init", "nan"])
    assert "argument --c-init/--c_init: expected a finite number, got 'nan'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "cartpole", "--policy.lstm", "maybe"])
    assert "expected true or false" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", "no_such_script"])
    assert "unknown benchmark 'no_such_script'" in capsys.readouterr().err


@pytest.mark.parametrize("command", [[], ["train"], ["eval"], ["bench"], ["plot"], ["export"]])
def test_cli_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "usage: puffercore" in text
    if command == ["train"]:
        assert "--train.learning-rate" in text and "--vec.backend" in text and "--policy.lstm" in text
        assert "--policy MODULE:CLASS" in text
    if command == ["export"]:
        assert "{onnx,torchscript}" in text and "--output FILE" in text


# ---- learning, run state, resume ------------------------------------------------------------
def test_cartpole_learns(tmp_path):
    config = PPOConfig.for_env("cartpole", total_timesteps=40_000, num_envs=8, horizon=32, minibatch_size=256,
                               update_epochs=10, learning_rate=1e-3, gamma=0.98, gae_lambda=0.8, hidden_size=64,
                               clip_coef=0.1, quiet=True, tensorboard=False, run_dir=str(tmp_path), log_interval=0.0)
    trainer = ppo.train(config, "cartpole")
    rows = logger.read_csv(tmp_path / "metrics.csv")
    returns = [row["episode_return"] for row in rows if "episode_return" in row]
    assert returns[0] < 40  # random play: about 22
    assert max(returns[-3:]) > 150, returns
    assert trainer.global_step == rows[-1]["step"]


def test_resume_restores_the_run_and_is_deterministic(tmp_path):
    config = small_config(total_timesteps=8 * 16 * 6, checkpoint_interval=2, lstm=True)
    interrupted_dir = str(tmp_path / "interrupted")
    first = ppo.train(dataclasses.replace(config, run_dir=interrupted_dir), "memory", stop_after=4)
    assert first.update == 4
    saved = checkpoint.load(os.path.join(interrupted_dir, run.CHECKPOINT_NAME))
    copy_dir = str(tmp_path / "copy")
    shutil.copytree(interrupted_dir, copy_dir)

    restored = ppo.Trainer("memory", PPOConfig(**saved["config"]), run_dir=str(tmp_path / "probe"))
    restored.load_state_dict(saved)
    restored.close()
    assert restored.update == 4 and restored.global_step == 4 * 8 * 16
    for name, tensor in restored.policy.state_dict().items():
        assert torch.equal(tensor, saved["model"][name]), name
    assert torch.equal(restored.action_rng.get_state(), saved["rng"]["action"])

    resumed = ppo.train(None, resume=interrupted_dir)
    again = ppo.train(None, resume=copy_dir)
    assert resumed.update == again.update == 6 and resumed.global_step == 6 * 8 * 16
    a = checkpoint.load(os.path.join(interrupted_dir, run.CHECKPOINT_NAME))
    b = checkpoint.load(os.path.join(copy_dir, run.CHECKPOINT_NAME))
    for name, tensor in a["model"].items():  # the same checkpoint resumes to the same run
        assert torch.equal(tensor, b["model"][name]), name
    with open(os.path.join(interrupted_dir, "seeds.json")) as file:
        assert json.load(file) == {"run": config.seed, **seeding.named_seeds(config.seed, ppo.SEED_NAMES)}
    steps = [row["step"] for row in logger.read_csv(os.path.join(interrupted_dir, "metrics.csv"))]
    assert steps == sorted(steps) and steps[-1] == resumed.global_step


def test_resume_takes_safe_overrides_and_names_the_others(tmp_path):
    run_dir = str(tmp_path / "run")
    ppo.train(small_config(run_dir=run_dir, backend="serial"), "cartpole")
    extended = ppo.train({"total_timesteps": 8 * 16 * 6, "quiet": True}, resume=run_dir)
    assert extended.update == 6 and extended.config.total_timesteps == 8 * 16 * 6
    with pytest.raises(ValueError, match=r"these can't change: \['learning_rate', 'num_envs'\]"):
        ppo.train({"learning_rate": 1.0, "num_envs": 4}, resume=run_dir)
    with pytest.raises(ValueError, match="total_timesteps can only grow"):
        ppo.train({"total_timesteps": 8}, resume=run_dir)
    with pytest.raises(ValueError, match="was trained on 'cartpole', not 'snake'"):
        ppo.train(None, "snake", resume=run_dir)
    main(["train", "--resume", run_dir, "--total-timesteps", str(8 * 16 * 7), "--quiet"])
    assert checkpoint.load(os.path.join(run_dir, run.CHECKPOINT_NAME))["counters"]["update"] == 7


def test_run_result_does_not_depend_on_the_checkpoint_interval(tmp_path):
    results = []
    for interval in (1, 0):
        trainer = ppo.train(small_config(checkpoint_interval=interval, run_dir=str(tmp_path / str(interval)),
                                         backend="serial"), "cartpole")
        results.append(trainer.policy.state_dict())
    for name, tensor in results[0].items():
        assert torch.equal(tensor, results[1][name]), name


def test_total_timesteps_is_met_not_rounded_down(tmp_path):
    trainer = ppo.train(small_config(total_timesteps=8 * 16 * 2 + 1, run_dir=str(tmp_path), backend="serial"),
                        "cartpole")
    assert trainer.global_step == 8 * 16 * 3


def test_named_seeds_are_distinct_and_reproducible():
    seeds = seeding.named_seeds(7, ppo.SEED_NAMES)
    assert set(seeds) == {"envs", "torch", "sampling", "eval"} and len(set(seeds.values())) == 4
    # The evaluation env's seed came last, so runs seeded before it train as they did.
    assert seeding.named_seeds(7, ("envs", "torch", "sampling")) == {name: seeds[name] for name in ppo.SEED_NAMES[:3]}
    assert seeds == seeding.named_seeds(7, ppo.SEED_NAMES) and seeds != seeding.named_seeds(8, ppo.SEED_NAMES)


def test_checkpoint_save_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "state.pt"
    checkpoint.save(path, {"x": torch.ones(3), "step": 1})

    def failing_save(state, file):
        file.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save(path, {"x": torch.zeros(3), "step": 2})
    monkeypatch.undo()
    state = checkpoint.load(path)
    assert state["step"] == 1 and torch.equal(state["x"], torch.ones(3))
    assert os.listdir(tmp_path) == ["state.pt"]
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        checkpoint.load(tmp_path / "missing.pt")


def test_logger_csv_tensorboard_and_plot(tmp_path):
    metrics = logger.Logger(tmp_path, tensorboard=True, quiet=True)
    metrics.log(10, {"episode_return": 1.0})
    metrics.log(20, {"episode_return": 2.0, "loss/value": 0.5})  # a new column rewrites the header
    metrics.close()
    rows = logger.read_csv(tmp_path / "metrics.csv")
    assert rows == [{"step": 10, "episode_return": 1.0}, {"step": 20, "episode_return": 2.0, "loss/value": 0.5}]
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(tmp_path))
    resumed = logger.Logger(tmp_path, tensorboard=False, resume_step=10)
    resumed.close()
    assert logger.read_csv(tmp_path / "metrics.csv") == rows[:1]
    png = plots.plot([str(tmp_path)])
    assert png.endswith("learning_curve.png") and os.path.getsize(png) > 1000
    with pytest.raises(FileNotFoundError, match="has no metrics.csv"):
        plots.plot([str(tmp_path / "nothing")])


def test_cli_train_eval_and_plot(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    main(["train", "cartpole", "--total-timesteps", "1024", "--vec.num-envs", "8", "--train.horizon", "32",
          "--quiet", "--tensorboard", "false", "--run-dir", run_dir, "--policy.hidden_size", "16",
          "--train.minibatch-size", "64"])
    with open(os.path.join(run_dir, "config.json")) as file:
        saved = json.load(file)
    assert saved["env"] == "cartpole" and saved["policy"]["hidden_size"] == 16 and saved["vec"]["num_envs"] == 8
    main(["eval", "cartpole", "--checkpoint", run_dir, "--episodes", "2", "--render"])
    out = capsys.readouterr().out
    assert "2 episodes, mean return" in out and "#" in out and "theta=" in out
    main(["plot", run_dir])
    assert os.path.isfile(os.path.join(run_dir, "learning_curve.png"))


# ---- recurrent policy ------------------------------------------------------------------------
@pytest.mark.slow
def test_lstm_remembers_the_cue_and_the_mlp_cannot(tmp_path):
    results = {}
    for lstm in (True, False):
        config = PPOConfig.for_env("memory", lstm=lstm, quiet=True, tensorboard=False,
                                   run_dir=str(tmp_path / str(lstm)))
        ppo.train(config, "memory")
        results[lstm] = np.mean(ppo.evaluate(str(tmp_path / str(lstm)), episodes=200, greedy=True))
    assert results[True] > 0.9, results  # remembers the cue
    assert abs(results[False]) < 0.3, results  # at chance: return 0


@pytest.mark.parametrize("backend, num_workers, batch_size", [("serial", 0, 0), ("threads", 2, 4), ("threads", 1, 4)])
def test_native_rollouts_follow_cartpole_dynamics(tmp_path, backend, num_workers, batch_size):
    """Rows of native CartPole rollouts, also when the threads backend hands back
    staggered batches: within an episode, x advances by tau * x_dot (Euler, tau 0.02)
    from each stored observation to the next one."""
    pytest.importorskip("puffercore.ocean")
    if backend not in puffercore.vector.BACKENDS:
        pytest.skip(f"no {backend} backend in this build")
    config = small_config(backend=backend, num_workers=num_workers, batch_size=batch_size, horizon=12,
                          minibatch_size=32, run_dir=str(tmp_path))
    trainer = ppo.Trainer("cartpole", config)
    try:
        trainer.reset_envs()
        for _ in range(3):
            trainer.collect()
            rollout = trainer.rollout
            obs, done = rollout["obs"], rollout["terminal"] | rollout["truncation"]
            continuing = ~done  # transition t from obs slot t to slot t + 1
            predicted = obs[:, :-1, 0] + 0.02 * obs[:, :-1, 1]
            torch.testing.assert_close(obs[:, 1:, 0][continuing], predicted[continuing], atol=1e-5, rtol=0)
            assert continuing.sum() > 0.9 * continuing.numel()
            trainer.learn()
    finally:
        trainer.close()


def test_logger_without_tensorboard_or_wandb(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails
    monkeypatch.setitem(sys.modules, "wandb", None)
    metrics = logger.Logger(tmp_path, tensorboard=True)
    metrics.log(1, {"x": 1.0})
    metrics.close()
    assert "tensorboard is not installed" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["metrics.csv"]
    with pytest.raises(ValueError, match="wandb_project='demo' needs wandb"):
        logger.Logger(tmp_path, tensorboard=False, wandb_project="demo")


def test_memory_env_rewards_recalling_the_cue():
    from gymnasium.utils.env_checker import check_env

    from puffercore.env import GymnasiumView
    from puffercore.ocean.memory import Memory

    env = Memory(num_envs=64, seed=3, delay=2)
    obs, _ = env.reset(seed=3)
    cues = obs[:, :2].argmax(1)
    assert (obs[:, :2].sum(1) == 1).all() and (obs[:, 2] == 0).all()
    wrong = (1 - cues).astype(np.int32)
    obs, rewards, terminals, _, _ = env.step(wrong)  # blank
    assert (obs == 0).all() and (rewards == 0).all() and not terminals.any()
    obs, rewards, terminals, _, _ = env.step(wrong)  # the query appears
    assert (obs[:, 2] == 1).all() and (obs[:, :2] == 0).all() and not terminals.any()
    answers = np.where(np.arange(64) % 2 == 0, cues, 1 - cues).astype(np.int32)
    obs, rewards, terminals, _, info = env.step(answers)
    assert terminals.all() and np.array_equal(rewards, np.where(np.arange(64) % 2 == 0, 1.0, -1.0))
    assert info["episodes"] == 64 and info["episode_return"] == 0.0 and info["episode_length"] == 3
    assert (obs[:, :2].sum(1) == 1).all()  # autoreset: the next cue
    check_env(GymnasiumView(Memory(num_envs=1, seed=0)), skip_render_check=True)
    with pytest.raises(ValueError, match="delay must be an int in"):
        Memory(delay=0)


def test_box_actions_train_end_to_end(tmp_path):
    """Pendulum-v1 (Box(-2, 2) torques) through the Gaussian head: actions sent to the env
    stay inside the bounds while the stored (unclipped) samples may leave them."""
    config = small_config(run_dir=str(tmp_path), backend="serial", total_timesteps=8 * 16 * 2)
    trainer = ppo.Trainer("gymnasium:Pendulum-v1", config)
    try:
        trainer.reset_envs()
        trainer.collect()
        trainer.learn()
        actions = trainer.rollout["action"]
        assert actions.shape == (8, 16, 1) and actions.dtype == torch.float32
        assert np.abs(trainer.vec.actions).max() <= 2.0
        assert trainer.policy.log_std.grad is not None and np.isfinite(trainer.losses["loss/loss"])
    finally:
        trainer.close()


# ---- the PPO objective, one detail at a time ----------------------------------------------------
def loss_batch(size=64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return {"log_prob": -torch.rand(size, generator=generator), "advantage": 3 + 5 * torch.randn(size, generator=generator),
            "return": torch.randn(size, generator=generator), "value": torch.randn(size, generator=generator),
            "mask": torch.ones(size, dtype=torch.bool)}


def test_loss_normalizes_advantages_per_minibatch():
    batch, config = loss_batch(), small_config()
    new_log_prob = batch["log_prob"] + 0.05 * torch.randn(64, generator=torch.Generator().manual_seed(1))
    entropy, value = torch.zeros(64), batch["value"].clone()
    base = ppo.ppo_loss(new_log_prob, entropy, value, batch, config)["policy"]
    shifted = {**batch, "advantage": 10 * batch["advantage"] - 7}  # same after normalization
    torch.testing.assert_close(ppo.ppo_loss(new_log_prob, entropy, value, shifted, config)["policy"], base)
    raw = dataclasses.replace(config, norm_adv=False)
    assert not torch.allclose(ppo.ppo_loss(new_log_prob, entropy, value, shifted, raw)["policy"], base)
    ratio = (new_log_prob - batch["log_prob"]).exp()
    advantages = batch["advantage"]
    normalized = (advantages - advantages.mean()) / (advantages.std(unbiased=False) + 1e-8)
    expected = torch.max(-normalized * ratio, -normalized * ratio.clamp(0.8, 1.2)).mean()
    torch.testing.assert_close(base, expected)


def test_loss_clips_the_value_around_the_old_values():
    batch = loss_batch()
    batch["return"] = batch["value"] + 1.0  # every target 1 above the old value
    new_value = (batch["value"] + 0.5).requires_grad_()  # moved 0.5 > clip 0.2 toward it
    clipped = ppo.ppo_loss(batch["log_prob"], torch.zeros(64), new_value, batch, small_config())
    # max((0.5)^2, (1 - 0.2)^2) = 0.64, halved: the clipped term wins and has no gradient.
    torch.testing.assert_close(clipped["value"], torch.tensor(0.32))
    clipped["loss"].backward()
    assert float(new_value.grad.abs().max()) == 0.0
    unclipped = ppo.ppo_loss(batch["log_prob"], torch.zeros(64), new_value, batch, small_config(clip_vloss=False))
    torch.testing.assert_close(unclipped["value"], torch.tensor(0.125))


def test_loss_reports_clip_fraction_and_approx_kl():
    batch = loss_batch(size=4)
    log_ratios = torch.log(torch.tensor([1.0, 1.1, 1.3, 0.7]))  # two outside [0.8, 1.2]
    out = ppo.ppo_loss(batch["log_prob"] + log_ratios, torch.zeros(4), batch["value"], batch, small_config())
    torch.testing.assert_close(out["clip_fraction"], torch.tensor(0.5))
    ratios = log_ratios.exp()
    torch.testing.assert_close(out["approx_kl"], ((ratios - 1) - log_ratios).mean())


def test_loss_entropy_bonus_is_weighted_by_ent_coef():
    batch = loss_batch()
    entropy = torch.full((64,), 0.7)
    with_bonus = ppo.ppo_loss(batch["log_prob"], entropy, batch["value"], batch, small_config(ent_coef=0.5))
    without = ppo.ppo_loss(batch["log_prob"], entropy, batch["value"], batch, small_config(ent_coef=0.0))
    torch.testing.assert_close(with_bonus["entropy"], torch.tensor(0.7))
    torch.testing.assert_close(without["loss"] - with_bonus["loss"], torch.tensor(0.35))


def test_learning_rate_anneals_linearly_and_target_kl_stops_the_update(tmp_path):
    config = small_config(run_dir=str(tmp_path), backend="serial", total_timesteps=8 * 16 * 4, update_epochs=4)
    trainer = ppo.Trainer("cartpole", config)
    try:
        trainer.reset_envs()
        full = (8 * 16 // 64) * 4
        for update in range(3):
            trainer.update = update
            trainer.collect()
            trainer.learn()
            assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(config.learning_rate * (1 - update / 4))
            assert trainer.losses["loss/minibatches"] == full
        trainer.config = dataclasses.replace(config, target_kl=1e-12, anneal_lr=False)
        trainer.collect()
        trainer.learn()
        # The policy moves with every minibatch: its KL soon exceeds 1e-12 and the update stops.
        assert 1 <= trainer.losses["loss/minibatches"] < full
        assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(config.learning_rate * 0.5)
    finally:
        trainer.close()


def test_ctrl_c_saves_a_checkpoint_and_the_summary_says_how_to_resume(tmp_path):
    def interrupt(trainer):
        if trainer.update == 2:
            raise KeyboardInterrupt

    run_dir = str(tmp_path / "run")
    trainer = ppo.train(small_config(run_dir=run_dir, backend="serial"), "cartpole", until=interrupt)
    assert trainer.interrupted and trainer.update == 2
    assert checkpoint.load(os.path.join(run_dir, run.CHECKPOINT_NAME))["counters"]["update"] == 2
    line = ppo.summary(trainer)
    assert line.startswith(f"interrupted by SIGINT: {2 * 8 * 16:,} steps in ") and f"--resume {run_dir}" in line
    resumed = ppo.train(None, resume=run_dir)
    assert not resumed.interrupted and resumed.update == 4 and ppo.summary(resumed).startswith("done: ")


def test_cli_errors_are_one_line_with_a_hint_and_version(capsys):
    with pytest.raises(SystemExit):
        main(["train", "cartpole", "--train.gamma", "x"])
    err = capsys.readouterr().err
    assert err.startswith("puffercore train: error: argument --train.gamma") and "usage" not in err
    assert "(see `puffercore train --help`)" in err and len(err.splitlines()) == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith("puffercore ")


def test_popart_keeps_predictions_when_statistics_move_and_trains(tmp_path):
    from puffercore.ppo.popart import PopArt

    torch.manual_seed(0)
    head = torch.nn.Linear(8, 1)
    popart = PopArt(head)
    hidden = torch.randn(32, 8)
    before = popart.denormalize(head(hidden).squeeze(-1))
    for scale in (100.0, -3.0, 1e4):
        popart.update(scale + scale * torch.randn(500))
        torch.testing.assert_close(popart.denormalize(head(hidden).squeeze(-1)), before, rtol=1e-4, atol=1e-3)
    returns = torch.tensor([1.0, 2.0, 3.0])
    torch.testing.assert_close(popart.denormalize(popart.normalize(returns)), returns)

    config = small_config(run_dir=str(tmp_path), backend="serial", value_norm=True, total_timesteps=8 * 16 * 3)
    trainer = ppo.train(config, "cartpole")
    assert abs(trainer.popart.mean) > 1.0  # CartPole returns are positive and large
    assert trainer.losses["loss/value"] < 5.0  # the critic's loss is on normalized returns
    saved = checkpoint.load(os.path.join(str(tmp_path), run.CHECKPOINT_NAME))
    assert saved["popart"]["count"] > 8 * 16 * 3
