"""The graphed PPO minibatch step (puffercore.ppo.graphed): uncaptured, its math is the
trainer's eager update; where capture fails (any CPU) it says so in one line and runs
eagerly; on CUDA the replayed graph matches the eager step within float tolerance."""

import copy
import dataclasses
import functools
import os

import numpy as np
import pytest
import torch
from gymnasium import spaces

from puffercore import ppo
from puffercore.ppo import PPOConfig, graphed
from puffercore.ppo.default_policy import DefaultPolicy
from puffercore.ppo.flat_adam import FlatAdam
from puffercore.ppo import trainer as trainer_module
from puffercore.ppo.graphed import GraphedStep
from puffercore.ppo.plan import Choice, UpdatePlan
from puffercore.ppo.rollout import iterate_minibatches
from puffercore.ppo.update import UpdateStep

FIELDS = ("obs", "action", "log_prob", "advantage", "return", "value")
FAILED = "CUDA graph capture of the PPO update failed"


def trained(tmp_path):
    config = PPOConfig(num_envs=8, horizon=16, minibatch_size=32, update_epochs=1, hidden_size=16, backend="serial",
                       total_timesteps=8 * 16 * 2, quiet=True, tensorboard=False, checkpoint_interval=0,
                       compile="false", run_dir=str(tmp_path))
    return ppo.train(config, "cartpole")


def minibatches(trainer, count=6):
    view = trainer.rollout.transition_view()
    generator = torch.Generator().manual_seed(0)
    batches = [{name: tensor.clone() for name, tensor in minibatch.items()}
               for minibatch in iterate_minibatches(view, 16, generator, fields=FIELDS)]
    return batches[:count]


def snapshot(trainer):
    return copy.deepcopy(trainer.policy.state_dict()), copy.deepcopy(trainer.optimizer.state_dict())


def restore(trainer, state):
    trainer.policy.load_state_dict(state[0])
    trainer.optimizer.load_state_dict(state[1])


def graphed_run(trainer, batches, capture):
    step = GraphedStep(trainer.policy, trainer.optimizer, trainer.config, capture=capture)
    for minibatch in batches:
        step(minibatch)
    return step, step.read(), trainer.optimizer.flat.detach().clone()


def test_uncaptured_step_is_the_trainers_eager_update(tmp_path):
    trainer = trained(tmp_path)
    batches, start = minibatches(trainer), snapshot(trainer)
    before = trainer.optimizer.flat.detach().clone()
    totals = None
    for minibatch in batches:  # the update the trainer runs on the CPU
        scalars = trainer.update_step(minibatch, False, None)
        totals = scalars if totals is None else totals + scalars
    expected = dict(zip(trainer.update_step.names, (totals / len(batches)).tolist()))
    eager_parameters = trainer.optimizer.flat.detach().clone()
    restore(trainer, start)
    step, means, parameters = graphed_run(trainer, batches, capture=False)
    assert step.mode == "eager" and step.names == trainer.update_step.names
    assert not torch.equal(parameters, before)
    torch.testing.assert_close(parameters, eager_parameters, rtol=1e-5, atol=1e-6)
    assert means.keys() == expected.keys()
    for name in expected:
        assert means[name] == pytest.approx(expected[name], rel=1e-4, abs=1e-6), name
    assert step.read() == {}  # read once per update; the totals start again


def test_capture_that_fails_says_so_once_and_steps_as_eager(tmp_path, capsys):
    trainer = trained(tmp_path)
    batches, start = minibatches(trainer), snapshot(trainer)
    assert len(batches) > graphed.WARMUP_STEPS + 1
    _, eager_means, eager_parameters = graphed_run(trainer, batches, capture=False)
    capsys.readouterr()
    restore(trainer, start)
    step, means, parameters = graphed_run(trainer, batches, capture=True)  # this CPU has no CUDA graphs
    lines = [line for line in capsys.readouterr().err.splitlines() if FAILED in line]
    assert len(lines) == 1 and lines[0].startswith("puffercore: ") and lines[0].endswith("the update runs eagerly")
    assert step.mode == "eager"
    assert torch.equal(parameters, eager_parameters) and means == eager_means


def test_annealed_learning_rate_and_entropy_coefficient_reach_the_step(tmp_path):
    trainer = trained(tmp_path)
    batches, start = minibatches(trainer, 2), snapshot(trainer)
    step = GraphedStep(trainer.policy, trainer.optimizer, trainer.config, capture=False)
    before = trainer.optimizer.flat.detach().clone()
    trainer.optimizer.param_groups[0]["lr"] = 0.0  # as Trainer.learn anneals it: a float
    step(batches[0])
    assert float(step.lr) == 0.0 and trainer.optimizer.param_groups[0]["lr"] is step.lr
    assert torch.equal(trainer.optimizer.flat.detach(), before)  # Adam with lr 0 moves nothing
    restore(trainer, start)
    losses = []
    for ent_coef in (0.0, 10.0):
        step = GraphedStep(trainer.policy, trainer.optimizer, trainer.config, capture=False)
        step.set_hyperparameters(lr=1e-3, ent_coef=ent_coef)
        step(batches[1])
        means = step.read()
        losses.append(means["loss/loss"] - means["loss/policy"] - trainer.config.vf_coef * means["loss/value"])
        restore(trainer, start)
    assert losses[0] == pytest.approx(0.0, abs=1e-5)
    assert losses[1] == pytest.approx(-10.0 * means["loss/entropy"], rel=1e-4)


def cartpole_updates(tmp_path, name, **settings):
    """Three updates of CartPole (anneal_lr: a new learning rate each), 16 minibatches
    each (on cuda the fourth is captured)."""
    config = PPOConfig(num_envs=64, horizon=16, minibatch_size=128, update_epochs=2, hidden_size=32, backend="serial",
                       total_timesteps=64 * 16 * 3, quiet=True, tensorboard=False, checkpoint_interval=0,
                       run_dir=str(tmp_path / name), **settings)
    return ppo.train(config, "cartpole")


def assert_same_training(trainer, eager):
    assert trainer.update == eager.update == 3 and trainer.losses["loss/minibatches"] == 16
    for (name, parameter), expected in zip(trainer.policy.named_parameters(), eager.policy.parameters()):
        torch.testing.assert_close(parameter, expected, rtol=1e-4, atol=1e-5, msg=name)
    assert trainer.losses["learning_rate"] == eager.losses["learning_rate"]
    for name, value in eager.losses.items():
        assert trainer.losses[name] == pytest.approx(value, rel=1e-3, abs=1e-5), name


@pytest.mark.parametrize("capture", [False, True])
def test_the_trainers_graphed_path_uncaptured_updates_as_the_eager_step(tmp_path, monkeypatch, capsys, capture):
    """The trainer's graphed path (its plan forced on the CPU, where capture is off or
    fails) against its eager UpdateStep: the same parameters, losses and learning rate."""
    eager = cartpole_updates(tmp_path, "eager", backward="autograd", compile="false")
    assert eager.plan.gradients.name == "eager" and isinstance(eager.update_step, UpdateStep)
    made = UpdatePlan.make

    def forced(*args):
        return dataclasses.replace(made(*args), gradients=Choice("graphed", "forced on the CPU by the test"))

    monkeypatch.setattr(trainer_module.UpdatePlan, "make", forced)
    monkeypatch.setattr(trainer_module, "GraphedStep", functools.partial(GraphedStep, capture=capture))
    capsys.readouterr()
    trainer = cartpole_updates(tmp_path, "graphed", backward="autograd", compile="false")
    lines = [line for line in capsys.readouterr().err.splitlines() if FAILED in line]
    assert len(lines) == int(capture)  # a capture that fails says so once, in the first update
    assert isinstance(trainer.update_step, GraphedStep) and trainer.update_step.mode == "eager"
    assert_same_training(trainer, eager)
    assert trainer.losses["learning_rate"] == pytest.approx(2.5e-4 / 3)  # annealed: the third of 3 updates
    saved = torch.load(os.path.join(trainer.run_dir, "checkpoint.pt"), weights_only=False)["optimizer"]
    assert saved["param_groups"][0]["lr"] == pytest.approx(2.5e-4 / 3)  # a float, as the eager run saves it
    assert saved["param_groups"][0]["capturable"] is False


def test_unsupported_names_what_the_eager_step_keeps():
    config = PPOConfig()
    assert graphed.unsupported(config, recurrent=False, world_size=1, autocast=False) is None
    assert "recurrent" in graphed.unsupported(config, recurrent=True, world_size=1, autocast=False)
    assert "processes" in graphed.unsupported(config, recurrent=False, world_size=2, autocast=False)
    assert "target_kl" in graphed.unsupported(PPOConfig(target_kl=0.02), False, 1, False)
    assert "autocast" in graphed.unsupported(config, recurrent=False, world_size=1, autocast=True)


def cuda_policy_and_batches(action_space, seed=0, count=10, size=256):
    torch.manual_seed(seed)
    policy = DefaultPolicy(spaces.Box(-1, 1, (6,), np.float32), action_space, hidden_size=64).cuda()
    generator = torch.Generator(device="cuda").manual_seed(seed)
    batches = []
    for _ in range(count):
        if isinstance(action_space, spaces.Discrete):
            action = torch.randint(0, action_space.n, (size,), device="cuda", generator=generator)
        else:
            action = torch.randn(size, action_space.shape[0], device="cuda", generator=generator)
        batches.append({"obs": torch.randn(size, 6, device="cuda", generator=generator), "action": action,
                        "log_prob": -torch.rand(size, device="cuda", generator=generator),
                        "advantage": torch.randn(size, device="cuda", generator=generator),
                        "return": torch.randn(size, device="cuda", generator=generator),
                        "value": torch.randn(size, device="cuda", generator=generator)})
    smaller = {name: tensor[: size // 2] for name, tensor in batches[0].items()}
    batches.insert(graphed.WARMUP_STEPS, smaller)  # where capture would come: it must not capture this shape
    batches.append(smaller)  # the last minibatch of an update, smaller
    return policy, batches


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("action_space", [spaces.Discrete(3), spaces.Box(-1, 1, (2,), np.float32)])
def test_cuda_graph_replays_match_the_eager_step(action_space, capsys):
    results = []
    for capture in (False, True):
        policy, batches = cuda_policy_and_batches(action_space)
        optimizer = FlatAdam(policy, lr=3e-3, eps=1e-5, groups=policy.parameter_groups())
        config = PPOConfig(device="cuda", ent_coef=0.01)
        step = GraphedStep(policy, optimizer, config, capture=capture)
        for minibatch in batches:
            step(minibatch)
        results.append((step.mode, step.read(), optimizer.flat.detach().clone()))
    assert FAILED not in capsys.readouterr().err
    (eager_mode, eager_means, eager_flat), (mode, means, flat) = results
    assert eager_mode == "eager" and mode == "graphed"
    torch.testing.assert_close(flat, eager_flat, rtol=1e-4, atol=1e-5)
    for name in eager_means:
        assert means[name] == pytest.approx(eager_means[name], rel=1e-3, abs=1e-5), name


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_training_through_the_graphed_step_matches_eager(tmp_path, capsys):
    eager = cartpole_updates(tmp_path, "eager", compile="false", device="cuda")
    trainer = cartpole_updates(tmp_path, "graphed", device="cuda")
    assert eager.plan.gradients.name == "eager" and isinstance(eager.update_step, UpdateStep)
    assert trainer.plan.graphed and trainer.update_step.mode == "graphed"
    assert FAILED not in capsys.readouterr().err
    assert_same_training(trainer, eager)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_capture_that_fails_trains_eagerly_after_one_line(tmp_path, monkeypatch, capsys):
    eager = cartpole_updates(tmp_path, "eager", compile="false", device="cuda")

    class Refused:
        def __init__(self):
            raise RuntimeError("capture refused by the test")

    monkeypatch.setattr(torch.cuda, "CUDAGraph", Refused)
    capsys.readouterr()
    trainer = cartpole_updates(tmp_path, "refused", device="cuda")
    lines = [line for line in capsys.readouterr().err.splitlines() if FAILED in line]
    assert len(lines) == 1 and "capture refused by the test" in lines[0], lines
    assert trainer.plan.graphed and trainer.update_step.mode == "eager"
    assert_same_training(trainer, eager)
