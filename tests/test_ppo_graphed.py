"""The graphed PPO minibatch step (puffercore.ppo.graphed): uncaptured, its math is the
trainer's eager update; where capture fails (any CPU) it says so in one line and runs
eagerly; on CUDA the replayed graph matches the eager step within float tolerance."""

import copy

import numpy as np
import pytest
import torch
from gymnasium import spaces

from puffercore import ppo
from puffercore.ppo import PPOConfig, graphed
from puffercore.ppo.default_policy import DefaultPolicy
from puffercore.ppo.flat_adam import FlatAdam
from puffercore.ppo.graphed import GraphedStep
from puffercore.ppo.rollout import iterate_minibatches

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
