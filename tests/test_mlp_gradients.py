"""The hand-derived PPO gradients of the default MLP policy (ppo.mlp_gradients) against
autograd on the same loss, which policies they cover, and a trainer using them."""

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces

from puffercore import ppo
from puffercore.ppo import PPOConfig
from puffercore.ppo.default_policy import DefaultPolicy
from puffercore.ppo.flat_adam import FlatAdam
from puffercore.ppo.mlp_gradients import LOSS_NAMES, MLPGradients

ROWS = 96


def discrete_policy(activation: str = "tanh", num_layers: int = 2, **options) -> DefaultPolicy:
    torch.manual_seed(0)
    return DefaultPolicy(spaces.Box(-2, 2, (5,), np.float32), spaces.Discrete(3, start=1), hidden_size=16,
                         num_layers=num_layers, activation=activation, **options)


def box_policy(activation: str = "tanh", num_layers: int = 2) -> DefaultPolicy:
    torch.manual_seed(0)
    policy = DefaultPolicy(spaces.Box(-2, 2, (5,), np.float32), spaces.Box(-1, 1, (3,), np.float32), hidden_size=16,
                           num_layers=num_layers, activation=activation)
    with torch.no_grad():
        policy.log_std.copy_(torch.tensor([-0.5, 0.0, 0.3]))  # a different sigma in every dimension
    return policy


POLICIES = {"discrete": discrete_policy, "box": box_policy}


def minibatch(policy: DefaultPolicy, masked: bool) -> dict[str, torch.Tensor]:
    """Rows whose old log-probs and values are the policy's own, moved enough that both
    clips bind on some rows and not on others."""
    generator = torch.Generator().manual_seed(1)
    observations = torch.randn(ROWS, 5, generator=generator)
    with torch.no_grad():
        out = policy.output(observations)
        if policy.head.is_continuous:
            actions, _ = policy.sample(out, generator)
        else:
            actions = torch.randint(1, 4, (ROWS,), generator=generator)
        log_prob, _ = policy.evaluate(out, actions)
    batch = {"obs": observations, "action": actions,
             "log_prob": log_prob + 0.3 * torch.randn(ROWS, generator=generator),
             "advantage": torch.randn(ROWS, generator=generator) + 0.5,
             "return": out.value + 2.0 * torch.randn(ROWS, generator=generator),
             "value": out.value + 0.3 * torch.randn(ROWS, generator=generator)}
    if masked:
        batch["mask"] = torch.rand(ROWS, generator=generator) > 0.2
    return batch


def autograd_gradients(policy, optimizer, batch, config) -> tuple[dict, torch.Tensor]:
    optimizer.zero_grad()
    out = policy.output(batch["obs"])
    log_prob, entropy = policy.evaluate(out, batch["action"])
    losses = ppo.ppo_loss(log_prob, entropy, out.value, batch, config)
    losses["loss"].backward()
    return {name: value.detach() for name, value in losses.items()}, optimizer.flat.grad.clone()


@pytest.mark.parametrize("head", POLICIES)
@pytest.mark.parametrize("activation, num_layers", [("tanh", 2), ("relu", 2), ("tanh", 1), ("relu", 3)])
@pytest.mark.parametrize("clip_vloss, ent_coef, norm_adv, masked",
                         [(True, 0.0, True, False), (False, 0.01, True, True), (True, 0.05, False, True)])
def test_hand_derived_gradients_equal_autograd_on_the_same_loss(head, activation, num_layers, clip_vloss, ent_coef,
                                                                norm_adv, masked):
    policy = POLICIES[head](activation, num_layers)
    optimizer = FlatAdam(policy, lr=1e-3, eps=1e-5, groups=policy.parameter_groups())
    config = PPOConfig(clip_vloss=clip_vloss, ent_coef=ent_coef, norm_adv=norm_adv, clip_coef=0.2)
    batch = minibatch(policy, masked)
    expected, expected_gradient = autograd_gradients(policy, optimizer, batch, config)
    assert 0.05 < float(expected["clip_fraction"]) < 0.95  # the ratio clip binds on some rows only

    optimizer.flat.grad.fill_(123.0)  # every gradient is written, none added to
    gradients = MLPGradients.for_policy(policy, optimizer, config)
    losses = dict(zip(LOSS_NAMES, gradients(batch)))
    assert list(losses) == list(expected)
    for name in expected:
        torch.testing.assert_close(losses[name], expected[name], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(optimizer.flat.grad, expected_gradient, rtol=1e-4, atol=1e-6)
    for parameter in policy.parameters():  # still the optimizer's views
        assert parameter.grad.data_ptr() in {view.data_ptr() for view in optimizer.views}


@pytest.mark.parametrize("policy, config", [
    (lambda: discrete_policy(), PPOConfig(backward="autograd")),
    (lambda: discrete_policy(lstm=True, shared_trunk=True), PPOConfig()),
    (lambda: discrete_policy(shared_trunk=True), PPOConfig()),
    (lambda: discrete_policy("gelu"), PPOConfig()),
    (lambda: DefaultPolicy(spaces.Box(-1, 1, (5,), np.float32), spaces.MultiDiscrete([2, 3])), PPOConfig()),
    (lambda: discrete_policy(), PPOConfig(prio_alpha=0.6)),
], ids=["autograd asked", "lstm", "shared trunk", "gelu", "multidiscrete", "prioritized rows"])
def test_other_policies_and_settings_take_autograd(policy, config):
    policy = policy()
    optimizer = FlatAdam(policy, lr=1e-3, eps=1e-5, groups=policy.parameter_groups())
    assert MLPGradients.for_policy(policy, optimizer, config) is None


def test_backward_setting_is_checked():
    with pytest.raises(ValueError, match="backward must be one of"):
        PPOConfig(backward="manual").validate()


def small_config(**overrides) -> PPOConfig:
    values = dict(num_envs=8, horizon=16, minibatch_size=64, update_epochs=2, hidden_size=16, backend="serial",
                  total_timesteps=8 * 16 * 6, quiet=True, tensorboard=False, checkpoint_interval=0)
    return PPOConfig(**{**values, **overrides})


@pytest.mark.parametrize("env", ["cartpole", "gymnasium:Pendulum-v1"])
def test_a_trainer_takes_the_hand_derived_gradients_reproducibly_and_autograd_when_asked(tmp_path, env):
    parameters = {}
    for name, overrides in [("first", {}), ("second", {}), ("autograd", {"backward": "autograd"}),
                            ("compiled", {"compile": "true"})]:
        trainer = ppo.train(small_config(run_dir=str(tmp_path / name), **overrides), env)
        assert (trainer.update_step.gradients is not None) == (name in ("first", "second"))
        assert np.isfinite(trainer.losses["loss/loss"]) and trainer.losses["loss/grad_norm_actor"] > 0
        parameters[name] = torch.cat([parameter.detach().reshape(-1) for parameter in trainer.policy.parameters()])
    assert torch.equal(parameters["first"], parameters["second"])  # a seed fixes the bits within one setting
    # The same updates as autograd's up to float rounding, after 6 updates of 4 minibatches.
    torch.testing.assert_close(parameters["first"], parameters["autograd"], rtol=1e-3, atol=1e-4)


def test_the_native_loss_refuses_mismatched_rows_and_actions_out_of_range():
    from puffercore.ppo._native import loss as native_loss

    rows = 4
    fields = {name: np.zeros(rows, np.float32) for name in ("value", "old_log_prob", "advantage", "returns", "old_value")}

    def call(logits=np.zeros((2, rows), np.float32), action=np.zeros(rows, np.int64), **changed):
        arrays = {**fields, **changed}
        native_loss.categorical_loss(logits, arrays["value"], action, arrays["old_log_prob"], arrays["advantage"],
                                   arrays["returns"], arrays["old_value"], np.zeros(0, np.float32), 0.0, 1.0, 0.2,
                                   True, 0.5, 0.0, np.zeros((2, rows), np.float32), np.zeros(rows, np.float32),
                                   np.zeros(6, np.float32))

    call()
    with pytest.raises(ValueError, match="returns must hold 4 rows"):
        call(returns=np.zeros(3, np.float32))
    with pytest.raises(ValueError, match=r"action\[2\] = 5 is outside \[0, 2\)"):
        call(action=np.array([0, 1, 5, 0], np.int64))
    with pytest.raises(ValueError, match="Buffer dtype mismatch"):
        call(value=np.zeros(rows, np.float64))


def test_the_native_gaussian_loss_refuses_mismatched_shapes():
    from puffercore.ppo._native import loss as native_loss

    rows, dims = 4, 3
    fields = {name: np.zeros(rows, np.float32) for name in ("value", "old_log_prob", "advantage", "returns", "old_value")}

    def call(mean=np.zeros((dims, rows), np.float32), log_std=np.zeros(dims, np.float32),
             action=np.zeros((rows, dims), np.float32), d_log_std=np.zeros(dims, np.float32), **changed):
        arrays = {**fields, **changed}
        native_loss.gaussian_loss(mean, log_std, arrays["value"], action, arrays["old_log_prob"], arrays["advantage"],
                                arrays["returns"], arrays["old_value"], np.zeros(0, np.float32), 0.0, 1.0, 0.2, True,
                                0.5, 0.0, np.zeros((dims, rows), np.float32), d_log_std, np.zeros(rows, np.float32),
                                np.zeros(6, np.float32))

    call()
    with pytest.raises(ValueError, match="advantage must hold 4 rows"):
        call(advantage=np.zeros(5, np.float32))
    with pytest.raises(ValueError, match=r"action must be \[4, 3\], got \[4, 2\]"):
        call(action=np.zeros((rows, 2), np.float32))
    with pytest.raises(ValueError, match=r"log_std must be \[3\], got \[2\]"):
        call(log_std=np.zeros(2, np.float32))
    with pytest.raises(ValueError, match=r"d_log_std must be \[3\]"):
        call(d_log_std=np.zeros(4, np.float32))


def test_the_native_advantage_moments_equal_global_mean_std():
    from puffercore.ppo._native import loss as native_loss
    from puffercore.distributed import Group
    from puffercore.ppo.loss import global_mean_std

    values = torch.randn(300, generator=torch.Generator().manual_seed(4)) * 3 + 1
    live = torch.rand(300, generator=torch.Generator().manual_seed(5)) > 0.3
    for mask, row_weight in ((None, np.zeros(0, np.float32)), (live, (live.float() / live.sum()).numpy())):
        mean, std = native_loss.moments(values.numpy(), row_weight)
        expected_mean, expected_std = global_mean_std(values, mask, Group())
        assert math.isclose(mean, float(expected_mean), rel_tol=1e-6, abs_tol=1e-7)
        assert math.isclose(std, float(expected_std), rel_tol=1e-6)
    assert native_loss.moments(values.numpy(), np.zeros(300, np.float32)) == (0.0, 0.0)  # no live row
    with pytest.raises(ValueError, match="row_weight must hold 0 or 300 values"):
        native_loss.moments(values.numpy(), np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="at least one value"):
        native_loss.moments(np.zeros(0, np.float32), np.zeros(0, np.float32))
