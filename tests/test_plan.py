"""The UpdatePlan (puffercore.ppo.plan): each path and each veto with its reason, the plan
the trainer reads (one native policy object for the update and collection), printed at
the start of a run and saved in its config.json."""

import json
import os

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from puffercore import ppo
from puffercore.__main__ import main
from puffercore.ppo import PPOConfig, plan
from puffercore.ppo.default_policy import DefaultPolicy
from puffercore.ppo.plan import UpdatePlan


def policy(observation_space=None, action_space=None, **options) -> DefaultPolicy:
    torch.manual_seed(0)
    return DefaultPolicy(observation_space or spaces.Box(-1, 1, (4,), np.float32), action_space or spaces.Discrete(3),
                         hidden_size=16, **options)


def small_config(**overrides) -> PPOConfig:
    values = dict(num_envs=8, horizon=16, minibatch_size=64, update_epochs=2, hidden_size=16, backend="serial",
                  total_timesteps=8 * 16 * 3, quiet=True, tensorboard=False, checkpoint_interval=0)
    return PPOConfig(**{**values, **overrides})


def test_the_default_mlp_takes_every_native_path():
    made = UpdatePlan.make(policy(), PPOConfig(), "cpu")
    assert (made.gradients.name, made.precision.name, made.optimizer.name, made.collection.name) == \
        ("native", "float32", "native", "native")
    assert made.native_gradients and made.native_collection and made.autocast_dtype is None
    assert "separate actor and critic" in made.gradients.reason
    boxed = UpdatePlan.make(policy(action_space=spaces.Box(-1, 1, (2,), np.float32)), PPOConfig(), "cpu")
    assert boxed.native_gradients and boxed.native_collection


# (policy, config, device) -> the gradients' path, words of its reason, the collection's path
VETOES = {
    "precision bfloat16": (policy, dict(precision="bfloat16"), "cpu", "auto", "precision bfloat16", "native"),
    "compile true": (policy, dict(compile="true"), "cpu", "compiled", "compile=true", "native"),
    "backward autograd": (policy, dict(backward="autograd", compile="false"), "cpu", "eager", "backward=autograd",
                          "native"),
    "inference torch": (policy, dict(inference="torch"), "cpu", "native", "separate actor and critic", "torch"),
    "shared trunk": (lambda: policy(shared_trunk=True), {}, "cpu", "auto", "shared actor-critic trunk", "torch"),
    "lstm": (lambda: policy(lstm=True, shared_trunk=True), {}, "cpu", "auto", "an LSTM policy", "torch"),
    "non-MLP policy": (lambda: nn.Linear(4, 3), {}, "cpu", "auto", "not the default policy (Linear)", "torch"),
    "cnn": (lambda: policy(spaces.Box(0, 255, (4, 36, 36), np.uint8)), {}, "cpu", "auto", "image observations",
            "torch"),
    "gelu": (lambda: policy(activation="gelu"), {}, "cpu", "auto", "GELU", "torch"),
    "wide": (lambda: DefaultPolicy(spaces.Box(-1, 1, (4,), np.float32), spaces.Discrete(3), hidden_size=128), {},
             "cpu", "auto", "128 wide", "torch"),
    "multi-discrete": (lambda: policy(action_space=spaces.MultiDiscrete([2, 3])), {}, "cpu", "auto",
                       "MultiDiscrete", "torch"),
    "prioritized rows": (policy, dict(prio_alpha=0.6), "cpu", "auto", "prioritized rows", "native"),
    "gpu, compile false": (policy, dict(compile="false"), "cuda", "eager", "device cuda", "device"),
    "gpu lstm": (lambda: policy(lstm=True, shared_trunk=True), {}, "cuda", "auto", "device cuda", "torch"),
    "gpu inference torch": (policy, dict(inference="torch"), "cuda", "graphed", "on cuda", "torch"),
}


@pytest.mark.parametrize("name", list(VETOES))
def test_each_veto_names_itself(name):
    make_policy, settings, device, gradients, reason, collection = VETOES[name]
    made = UpdatePlan.make(make_policy(), PPOConfig(**settings), device)
    assert made.gradients.name == gradients and reason in made.gradients.reason, made.gradients
    assert "rules out the hand path" in made.gradients.reason or gradients in ("native", "graphed")
    assert made.collection.name == collection, made.collection
    if collection == "torch" and "inference torch" not in name:
        assert "rules out the native forward" in made.collection.reason or "device" in made.collection.reason


# config settings (and world size) on a faked cuda device -> the gradients' path, words of its reason
GRAPH_VETOES = {
    "compile false": (policy, dict(compile="false"), 1, "eager", "compile=false: no CUDA graph"),
    "compile true": (policy, dict(compile="true"), 1, "compiled", "compile=true: torch.compile rather than"),
    "lstm": (lambda: policy(lstm=True, shared_trunk=True), {}, 1, "auto", "no CUDA graph: recurrent policies"),
    "prioritized rows": (policy, dict(prio_alpha=0.6), 1, "auto", "no CUDA graph: prioritized replay"),
    "processes": (policy, {}, 2, "auto", "no CUDA graph: the gradients are averaged across processes"),
    "target_kl": (policy, dict(target_kl=0.02), 1, "auto", "no CUDA graph: target_kl reads the KL back"),
    "bfloat16": (policy, dict(precision="bfloat16"), 1, "auto", "no CUDA graph: the update runs under autocast"),
}


def test_cuda_takes_the_graphed_step():
    for make_policy in (policy, lambda: policy(shared_trunk=True),
                        lambda: policy(spaces.Box(0, 255, (4, 36, 36), np.uint8))):
        made = UpdatePlan.make(make_policy(), PPOConfig(), "cuda")
        assert made.graphed and made.gradients.name == "graphed", made.gradients
        assert "one CUDA graph" in made.gradients.reason and "--train.compile false" in made.gradients.reason
        assert not made.native_gradients and made.optimizer.name == "fused" and made.collection.name == "device"
    assert UpdatePlan.make(policy(), PPOConfig(backward="autograd"), "cuda:1").graphed


@pytest.mark.parametrize("name", list(GRAPH_VETOES))
def test_each_graph_veto_keeps_the_eager_update_and_says_why(name):
    make_policy, settings, world_size, gradients, reason = GRAPH_VETOES[name]
    made = UpdatePlan.make(make_policy(), PPOConfig(**settings), "cuda", world_size)
    assert not made.graphed and made.gradients.name == gradients, made.gradients
    assert made.gradients.reason.startswith("device cuda (the hand path runs on the CPU) rules out the hand path; ")
    assert reason in made.gradients.reason, made.gradients


def test_the_cpu_plan_has_no_graph():
    for settings in ({}, dict(backward="autograd"), dict(backward="autograd", compile="false"),
                     dict(compile="true"), dict(precision="bfloat16")):
        made = UpdatePlan.make(policy(), PPOConfig(**settings), "cpu")
        assert not made.graphed and "CUDA graph" not in made.gradients.reason, made.gradients
    assert UpdatePlan.make(policy(), PPOConfig(backward="autograd"), "cpu").gradients == plan.Choice(
        "auto", "backward=autograd rules out the hand path")


def test_precision_auto_follows_the_cpu(monkeypatch):
    monkeypatch.setattr(plan, "native_bf16", lambda: True)
    made = UpdatePlan.make(policy(), PPOConfig(precision="auto"), "cpu")
    assert made.precision == plan.Choice("bfloat16", "auto, this CPU computes bf16 natively")
    assert made.autocast_dtype == torch.bfloat16
    assert made.gradients.reason == ("precision bfloat16 (auto, this CPU computes bf16 natively) rules out the hand "
                                     "path")
    monkeypatch.setattr(plan, "native_bf16", lambda: False)
    made = UpdatePlan.make(policy(), PPOConfig(precision="auto"), "cpu")
    assert made.precision.name == "float32" and made.native_gradients
    assert UpdatePlan.make(policy(), PPOConfig(precision="auto"), "cuda").precision.name == "float32"
    with pytest.raises(ValueError, match="precision must be one of"):
        UpdatePlan.make(policy(), PPOConfig(precision="fp16"), "cpu")


def test_the_optimizer_step_follows_size_device_and_torch(monkeypatch):
    assert plan.optimizer_choice(1000, torch.device("cpu"), torch.float32).name == "native"
    big = plan.optimizer_choice(plan.NATIVE_STEP_MAX_PARAMETERS + 1, torch.device("cpu"), torch.float32)
    assert big.name == ("fused" if plan.TORCH_VERSION >= (2, 4) else "plain")
    assert plan.optimizer_choice(1000, torch.device("cpu"), torch.float64).name != "native"
    assert plan.optimizer_choice(1000, torch.device("cuda"), torch.float32).name == "fused"
    monkeypatch.setattr(plan, "TORCH_VERSION", (2, 3))  # no CPU fused Adam yet
    older = plan.optimizer_choice(plan.NATIVE_STEP_MAX_PARAMETERS + 1, torch.device("cpu"), torch.float32)
    assert older.name == "plain" and "no fused Adam" in older.reason


def test_the_trainer_reads_its_plan_with_one_native_policy():
    trainer = ppo.Trainer("cartpole", small_config())
    try:
        assert trainer.plan.native_gradients and trainer.plan.native_collection
        assert trainer.native_policy is trainer.update_step.gradients.native  # one object for both
        assert trainer.optimizer.step_kind == trainer.plan.optimizer.name == "native"
    finally:
        trainer.close()
    trainer = ppo.Trainer("cartpole", small_config(backward="autograd", inference="torch", compile="false"))
    try:
        assert trainer.native_policy is None and trainer.update_step.gradients is None
        assert trainer.plan.gradients.name == "eager" and trainer.plan.collection.name == "torch"
    finally:
        trainer.close()


def test_the_plan_is_printed_and_saved_beside_the_config(tmp_path, capsys):
    trainer = ppo.train(small_config(quiet=False, run_dir=str(tmp_path / "run")), "cartpole")
    out = capsys.readouterr().out
    assert out.index("update plan:") < out.index("puffercore PPO")  # before the first console view
    assert "gradients   native  (default MLP" in out and "collection  native" in out
    assert "settings for cuda" not in out and "CPU is likely faster" not in out  # the CPU's start is unchanged
    with open(os.path.join(trainer.run_dir, "config.json")) as file:
        saved = json.load(file)
    assert saved["plan"] == trainer.plan.as_dict()
    assert saved["plan"]["gradients"]["name"] == "native"
    assert ppo.evaluate(trainer.run_dir, episodes=1)  # the run with its plan loads
    again = str(tmp_path / "again")  # and its config.json trains again: the plan is what ran, not a setting
    main(["train", "--config", os.path.join(trainer.run_dir, "config.json"), "--quiet", "--run-dir", again])
    with open(os.path.join(again, "config.json")) as file:
        assert json.load(file)["plan"] == saved["plan"]

    quiet = ppo.train(small_config(run_dir=str(tmp_path / "quiet")), "cartpole")
    assert "update plan" not in capsys.readouterr().out and quiet.plan.native_gradients
