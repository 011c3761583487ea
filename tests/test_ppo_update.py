"""The PPO update's machinery (issue 29): FlatAdam against torch's Adam, per-group
clipping, minibatches of chosen fields, the loss without a mask, the compiled loss
(`train.compile`: its fallback, its "auto" decisions, a compiled run) and reproducible
seeded runs."""

import copy

import numpy as np
import pytest
import torch
from gymnasium import spaces

from puffercore import ppo
from puffercore.__main__ import build_parser
from puffercore.ppo.default_policy import DefaultPolicy
from puffercore.ppo import PPOConfig, update
from puffercore.precision import native_bf16
from puffercore.ppo import flat_adam
from puffercore.ppo.flat_adam import FlatAdam
from puffercore.ppo.plan import UpdatePlan, fused_adam_supported
from puffercore.ppo.rollout import iterate_minibatches

FUSED = fused_adam_supported("cpu")  # torch's CPU fused Adam (torch 2.4 on)


def small_config(**overrides) -> PPOConfig:
    values = dict(num_envs=8, horizon=16, minibatch_size=64, update_epochs=2, hidden_size=16, backend="serial",
                  total_timesteps=8 * 16 * 4, quiet=True, tensorboard=False, checkpoint_interval=0)
    return PPOConfig(**{**values, **overrides})


def box_policy(seed: int = 0) -> DefaultPolicy:
    torch.manual_seed(seed)
    return DefaultPolicy(spaces.Box(-1, 1, (5,), np.float32), spaces.Box(-1, 1, (2,), np.float32), hidden_size=24)


def policy_loss(policy: DefaultPolicy, observations: torch.Tensor) -> torch.Tensor:
    out = policy(observations)
    return out.params.square().mean() + out.value.square().mean() + policy.log_std.sum()


def train_steps(policy: DefaultPolicy, optimizer, steps: int, observations: torch.Tensor) -> None:
    for _ in range(steps):
        optimizer.zero_grad()
        policy_loss(policy, observations).backward()
        optimizer.step()


# ---- FlatAdam -------------------------------------------------------------------------------
def test_flat_adam_steps_like_torch_adam_and_its_direct_kernel_call_like_its_own_step():
    observations = torch.randn(32, 5, generator=torch.Generator().manual_seed(1))
    reference, flat, direct = box_policy(), box_policy(), box_policy()
    train_steps(reference, torch.optim.Adam(reference.parameters(), lr=1e-2, eps=1e-5, fused=FUSED), 6, observations)
    train_steps(flat, FlatAdam(flat, lr=1e-2, eps=1e-5, fused=FUSED, groups=flat.parameter_groups()), 6, observations)
    for got, expected in zip(flat.parameters(), reference.parameters()):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)  # the same arithmetic, a vector tail apart

    # The direct kernel call (every step after the first) is torch's Adam.step, bit for bit.
    optimizer = FlatAdam(direct, lr=1e-2, eps=1e-5, fused=FUSED, groups=direct.parameter_groups())
    for _ in range(6):
        optimizer.zero_grad()
        policy_loss(direct, observations).backward()
        torch.optim.Adam.step(optimizer)
    assert all(torch.equal(got, expected) for got, expected in zip(flat.parameters(), direct.parameters()))


def test_flat_adam_without_torch_internals_takes_the_public_api_and_steps_alike(monkeypatch):
    """The direct kernel call and the unwrapped Optimizer methods are torch internals:
    where they are missing or changed, FlatAdam steps through torch.optim.Adam."""
    observations = torch.randn(32, 5, generator=torch.Generator().manual_seed(2))
    results = []
    for internals in (True, False):
        if not internals:
            monkeypatch.setattr(flat_adam, "_KERNEL_WORKS", {"cpu": False})
            monkeypatch.setattr(flat_adam, "_unwrapped", lambda method, arguments: method)
        policy = box_policy()
        optimizer = FlatAdam(policy, lr=1e-2, eps=1e-5, groups=policy.parameter_groups(), step="fused")
        train_steps(policy, optimizer, 4, observations)
        copy_state = copy.deepcopy(optimizer.state_dict())
        optimizer.load_state_dict(copy_state)
        train_steps(policy, optimizer, 2, observations)
        results.append(torch.cat([parameter.detach().reshape(-1) for parameter in policy.parameters()]))
    if FUSED:  # the same fused kernel either way: the same bits
        assert torch.equal(results[0], results[1])
    else:
        torch.testing.assert_close(results[0], results[1], rtol=1e-5, atol=1e-6)


def test_torch_internals_are_checked_before_use(monkeypatch):
    assert flat_adam.fused_kernel_works("cpu") == FUSED
    monkeypatch.setattr(flat_adam, "_KERNEL_WORKS", {})
    monkeypatch.delattr(torch, "_fused_adam_")
    assert not flat_adam.fused_kernel_works("cpu")  # missing: the public path
    monkeypatch.setattr(flat_adam, "_KERNEL_WORKS", {})
    monkeypatch.setattr(torch, "_fused_adam_", lambda *args, **kwargs: None, raising=False)
    assert not flat_adam.fused_kernel_works("cpu")  # there, but not stepping as Adam does

    def wrapper(*args, **kwargs):
        return None
    wrapper.__wrapped__ = lambda self, other: "inner"
    assert flat_adam._unwrapped(wrapper, ("self", "other")) is wrapper.__wrapped__
    assert flat_adam._unwrapped(wrapper, ("self",)) is wrapper  # other arguments than expected: not torch's wrapper
    del wrapper.__wrapped__
    assert flat_adam._unwrapped(wrapper, ("self", "other")) is wrapper


def test_flat_adam_keeps_a_gradient_that_replaced_its_view():
    observations = torch.randn(16, 5)
    reference, flat = box_policy(), box_policy()
    reference_optimizer = FlatAdam(reference, lr=1e-2, eps=1e-5)
    optimizer = FlatAdam(flat, lr=1e-2, eps=1e-5)
    train_steps(reference, reference_optimizer, 2, observations)
    for _ in range(2):
        flat.zero_grad()  # the module's own zero_grad: every .grad None, the views detached
        policy_loss(flat, observations).backward()  # fresh gradient tensors
        optimizer.step()
    assert all(torch.equal(got, expected) for got, expected in zip(flat.parameters(), reference.parameters()))
    assert all(parameter.grad is view for parameter, view in zip(optimizer.layout, optimizer.views))


def test_flat_adam_groups_lie_together_and_state_saved_by_torch_adam_loads():
    policy = box_policy()
    optimizer = FlatAdam(policy, lr=1e-2, eps=1e-5, groups=policy.parameter_groups())
    policy_loss(policy, torch.randn(8, 5)).backward()
    for name, parameters in policy.parameter_groups().items():
        expected = torch.cat([parameter.grad.reshape(-1) for parameter in parameters])
        assert torch.equal(optimizer.gradients[name], expected)
        assert all(parameter.data_ptr() >= optimizer.flat.data_ptr() for parameter in parameters)  # views

    # A checkpoint of the earlier trainer (torch's Adam, one state per parameter) resumes.
    observations = torch.randn(16, 5)
    reference = box_policy()
    reference_optimizer = torch.optim.Adam(reference.parameters(), lr=1e-2, eps=1e-5, fused=FUSED)
    train_steps(reference, reference_optimizer, 3, observations)
    resumed = copy.deepcopy(reference)
    resumed_optimizer = FlatAdam(resumed, lr=1e-2, eps=1e-5, fused=FUSED, groups=resumed.parameter_groups())
    resumed_optimizer.load_state_dict(copy.deepcopy(reference_optimizer.state_dict()))
    assert int(resumed_optimizer.state[resumed_optimizer.flat]["step"]) == 3
    train_steps(reference, reference_optimizer, 1, observations)
    train_steps(resumed, resumed_optimizer, 1, observations)
    for got, expected in zip(resumed.parameters(), reference.parameters()):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="every parameter of the module once"):
        FlatAdam(policy, lr=1e-2, eps=1e-5, groups={"actor": list(policy.actor.parameters())})


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_native_clipped_step_is_the_torch_clip_and_fused_adam(weight_decay):
    """FlatAdam.clipped_step's one native call against its torch ops (per-group
    clip_grad_norm, then the fused kernel): norms, clipped gradients, parameters and both
    moments, over steps where the actor is clipped and the critic is not."""
    observations = torch.randn(32, 5, generator=torch.Generator().manual_seed(2))
    native_policy, torch_policy = box_policy(), box_policy()
    native = FlatAdam(native_policy, lr=1e-2, eps=1e-5, fused=FUSED, groups=native_policy.parameter_groups())
    reference = FlatAdam(torch_policy, lr=1e-2, eps=1e-5, fused=FUSED, groups=torch_policy.parameter_groups())
    for optimizer in (native, reference):
        optimizer.param_groups[0]["weight_decay"] = weight_decay
    assert native.bounds is not None and native.bounds[-1] == native.flat.numel()
    for _ in range(5):
        for policy, optimizer in ((native_policy, native), (torch_policy, reference)):
            optimizer.zero_grad()
            policy_loss(policy, observations).backward()
        max_norm = 0.5 * float(reference.gradients["actor"].norm())  # the actor's clipped, the critic's not
        assert float(reference.gradients["critic"].norm()) < 1e3
        expected = [flat_adam.clip_grad_norm(gradients, max_norm) for gradients in reference.gradients.values()]
        reference.fused_step()
        got = native.clipped_step(max_norm)
        torch.testing.assert_close(got, torch.stack(expected), rtol=1e-5, atol=0)
        torch.testing.assert_close(native.flat.grad, reference.flat.grad, rtol=1e-4, atol=1e-7)
        for name in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(native.state[native.flat][name], reference.state[reference.flat][name],
                                       rtol=1e-4, atol=1e-8)
        torch.testing.assert_close(native.flat.detach(), reference.flat.detach(), rtol=1e-5, atol=1e-7)


def test_native_clipped_step_goes_on_from_a_loaded_state():
    """Loading a state replaces the moments the native step reads: the next step uses
    the loaded ones, as torch's step would."""
    observations = torch.randn(16, 5, generator=torch.Generator().manual_seed(3))
    first, second = box_policy(), box_policy()
    optimizers = [FlatAdam(policy, lr=1e-2, eps=1e-5, groups=policy.parameter_groups()) for policy in (first, second)]
    for policy, optimizer, steps in ((first, optimizers[0], 3), (second, optimizers[1], 1)):
        for _ in range(steps):
            optimizer.zero_grad()
            policy_loss(policy, observations).backward()
            optimizer.clipped_step(0.5)
    second.load_state_dict(first.state_dict())
    optimizers[1].load_state_dict(copy.deepcopy(optimizers[0].state_dict()))
    for policy, optimizer in zip((first, second), optimizers):
        optimizer.zero_grad()
        policy_loss(policy, observations).backward()
        optimizer.clipped_step(0.5)
    assert int(optimizers[1].state[optimizers[1].flat]["step"]) == 4
    assert all(torch.equal(a, b) for a, b in zip(first.parameters(), second.parameters()))


def test_native_clipped_step_rejects_mismatched_buffers():
    from puffercore.ppo._native import adam as native_adam
    values = np.zeros(4, np.float32)
    norms = np.zeros(1, np.float32)
    step = np.zeros(1, np.float32)
    arguments = (1.0, 1e-3, 0.9, 0.999, 1e-5, 0.0)
    with pytest.raises(ValueError, match="must hold 4 values like parameters"):
        native_adam.clipped_step(values, np.zeros(3, np.float32), values, values, step, np.array([0, 4]), *arguments, norms)
    with pytest.raises(ValueError, match="bounds must run from 0 to 4"):
        native_adam.clipped_step(values, values, values, values, step, np.array([0, 3]), *arguments, norms)
    with pytest.raises(ValueError, match="one value a group"):
        native_adam.clipped_step(values, values, values, values, step, np.array([0, 2, 4]), *arguments, norms)
    with pytest.raises(ValueError, match="step must hold 1 value"):
        native_adam.clipped_step(values, values, values, values, np.zeros(2, np.float32), np.array([0, 4]), *arguments, norms)
    with pytest.raises(ValueError, match="bounds must hold at least 2 offsets"):
        native_adam.clipped_step(values, values, values, values, step, np.array([0]), *arguments, np.zeros(0, np.float32))
    with pytest.raises(ValueError, match="Buffer dtype mismatch"):
        native_adam.clipped_step(values.astype(np.float64), values, values, values, step, np.array([0, 4]), *arguments, norms)
    with pytest.raises(ValueError, match="must not decrease"):
        native_adam.clipped_step(values, values, values, values, step, np.array([0, 5, 4]), *arguments,
                           np.zeros(2, np.float32))


def test_clipping_a_flat_group_matches_clip_grad_norm():
    gradients = [torch.randn(7, 3), torch.randn(3), torch.randn(4, 7)]
    parameters = [torch.nn.Parameter(torch.zeros_like(gradient)) for gradient in gradients]
    for parameter, gradient in zip(parameters, gradients):
        parameter.grad = gradient.clone()
    flat = torch.cat([gradient.reshape(-1) for gradient in gradients])
    expected = torch.nn.utils.clip_grad_norm_(parameters, 0.5)
    torch.testing.assert_close(flat_adam.clip_grad_norm(flat, 0.5), expected)
    torch.testing.assert_close(flat, torch.cat([parameter.grad.reshape(-1) for parameter in parameters]))
    small = torch.full((4,), 0.01)
    flat_adam.clip_grad_norm(small, 0.5)
    assert torch.equal(small, torch.full((4,), 0.01))  # under the bound: untouched


# ---- minibatches and the loss ----------------------------------------------------------------
def test_minibatches_of_chosen_fields_hold_the_same_transitions():
    view = {"reward": torch.arange(12.0).reshape(3, 4), "obs": torch.arange(15.0).reshape(3, 5)[:, :4, None] * 2,
            "value": -torch.arange(12.0).reshape(3, 4)}
    every = list(iterate_minibatches(view, 5, torch.Generator().manual_seed(3)))
    chosen = list(iterate_minibatches(view, 5, torch.Generator().manual_seed(3), fields=("obs",)))
    assert [set(minibatch) for minibatch in chosen] == [{"index", "obs"}] * 3
    for all_fields, some in zip(every, chosen):
        assert torch.equal(all_fields["index"], some["index"]) and torch.equal(all_fields["obs"], some["obs"])


def test_the_loss_without_a_mask_equals_the_loss_with_every_row_live():
    generator = torch.Generator().manual_seed(0)
    batch = {name: torch.randn(64, generator=generator) for name in ("log_prob", "advantage", "return", "value")}
    new_log_prob = batch["log_prob"] + 0.1 * torch.randn(64, generator=generator)
    new_value = batch["value"] + torch.randn(64, generator=generator)
    entropy = torch.rand(64, generator=generator)
    config = small_config(ent_coef=0.01)
    with_mask = ppo.ppo_loss(new_log_prob, entropy, new_value, {**batch, "mask": torch.ones(64, dtype=torch.bool)},
                             config)
    without = ppo.ppo_loss(new_log_prob, entropy, new_value, batch, config)
    for name in with_mask:
        torch.testing.assert_close(without[name], with_mask[name])


# ---- compiling the loss ------------------------------------------------------------------------
def test_compile_setting_is_checked_and_has_a_short_flag():
    with pytest.raises(ValueError, match="compile must be one of"):
        PPOConfig(compile="yes").validate()
    args = build_parser().parse_args(["train", "cartpole", "--compile", "false"])
    assert args.compile == "false"


def test_a_loss_that_cannot_compile_runs_eagerly_after_one_line(tmp_path, monkeypatch, capsys):
    def failing_compile(function, **options):
        def compiled(*args):
            raise RuntimeError("no C++ compiler here\nsecond line")
        return compiled

    monkeypatch.setattr(update.torch, "compile", failing_compile)
    trainer = ppo.train(small_config(compile="true", run_dir=str(tmp_path)), "cartpole")
    assert trainer.update == trainer.num_updates and np.isfinite(trainer.losses["loss/loss"])
    assert trainer.update_step.compiled is None and "compile_seconds" not in trainer.losses
    assert trainer.plan.compiled is False and trainer.losses["compiled"] == 0.0  # the plan records the outcome
    lines = [line for line in capsys.readouterr().err.splitlines() if "torch.compile failed" in line]
    assert lines == ["puffercore: torch.compile failed (RuntimeError: no C++ compiler here); the PPO update runs "
                     "eagerly (--train.compile false skips compiling)"]


def stand_in_compile(step):
    """UpdateStep.compile without compiling: the eager loss stands in for the compiled one."""
    step.compiled = step.loss


@pytest.mark.parametrize("compiled_seconds, kept", [(0.5, True), (1.5, False)])
def test_auto_compiles_where_the_run_repays_it_and_keeps_it_only_if_faster(monkeypatch, compiled_seconds, kept):
    monkeypatch.setattr(update.UpdateStep, "compile", stand_in_compile)
    policy = box_policy()
    optimizer = FlatAdam(policy, lr=1e-3, eps=1e-5)
    auto = UpdatePlan.make(policy, PPOConfig(compile="auto", backward="autograd"), "cpu")
    assert auto.gradients.name == "auto" and auto.compiled is None
    short = update.UpdateStep(lambda *args: {}, policy, optimizer, 0.5, None, auto)
    short.decide(seconds=1.0, updates_left=int(update.AUTO_COMPILE_SECONDS) - 1)
    assert short.decided and short.compiled is None  # the rest of the run is too short to repay a compile

    assert auto.compiled is False  # the plan records the outcome
    auto = UpdatePlan.make(policy, PPOConfig(compile="auto", backward="autograd"), "cpu")
    step = update.UpdateStep(lambda *args: {}, policy, optimizer, 0.5, None, auto)
    step.decide(seconds=1.0, updates_left=int(update.AUTO_COMPILE_SECONDS))
    assert step.compiled is not None and not step.decided
    step.decide(seconds=20.0, updates_left=100)  # the update that compiled: not judged
    assert step.compiled is not None and not step.decided
    step.decide(seconds=compiled_seconds, updates_left=99)
    assert step.decided and (step.compiled is not None) == kept and auto.compiled == kept
    step.decide(seconds=100.0, updates_left=98)  # decided: no second thoughts
    assert (step.compiled is not None) == kept
    with pytest.raises(ValueError, match="compile must be one of"):
        UpdatePlan.make(policy, PPOConfig(compile="sometimes"), "cpu")


def test_compiled_runs_train_reproducibly_and_report_their_compile_time(tmp_path):
    results = []
    for name in ("first", "second"):
        trainer = ppo.train(small_config(compile="true", run_dir=str(tmp_path / name)), "cartpole")
        assert trainer.losses["compile_seconds"] > 0 and np.isfinite(trainer.losses["loss/loss"])
        assert trainer.update_step.compiled is not None  # "true" keeps it
        assert trainer.plan.gradients.name == "compiled" and trainer.plan.compiled and trainer.losses["compiled"] == 1.0
        results.append([parameter.detach().clone() for parameter in trainer.policy.parameters()])
    # Compiled kernels are deterministic: the same seed gives the same bits (not eager's bits).
    assert all(torch.equal(first, second) for first, second in zip(*results))


def test_seeded_eager_runs_are_bitwise_reproducible(tmp_path):
    results = []
    for name in ("first", "second"):
        trainer = ppo.train(small_config(compile="false", run_dir=str(tmp_path / name)), "cartpole")
        results.append(([parameter.detach().clone() for parameter in trainer.policy.parameters()], trainer.losses))
    (first, first_losses), (second, second_losses) = results
    assert all(torch.equal(a, b) for a, b in zip(first, second)) and first_losses == second_losses


def test_bfloat16_updates_run_the_policy_in_bf16_keep_float32_weights_and_reproduce(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="precision must be one of"):
        PPOConfig(precision="fp16").validate()
    seen = []
    original = DefaultPolicy.forward

    def recording_forward(self, observations, *state):
        params, value, *rest = original(self, observations, *state)
        seen.append((torch.is_grad_enabled(), params.dtype))
        return (params, value, *rest)

    monkeypatch.setattr(DefaultPolicy, "forward", recording_forward)
    results = []
    for name in ("first", "second"):
        # collection through the policy's torch forward (the native one is float32 only)
        trainer = ppo.train(small_config(compile="false", precision="bfloat16", inference="torch",
                                         run_dir=str(tmp_path / name)), "cartpole")
        assert np.isfinite(trainer.losses["loss/loss"])
        assert all(parameter.dtype == torch.float32 for parameter in trainer.policy.parameters())
        results.append([parameter.detach().clone() for parameter in trainer.policy.parameters()])
    assert {dtype for grad, dtype in seen if grad} == {torch.bfloat16}  # the update's forwards
    assert {dtype for grad, dtype in seen if not grad} == {torch.float32}  # collection's
    assert all(torch.equal(first, second) for first, second in zip(*results))
    args = build_parser().parse_args(["train", "cartpole", "--train.precision", "bfloat16"])
    assert args.precision == "bfloat16"
    auto = ppo.train(small_config(precision="auto", total_timesteps=8 * 16, run_dir=str(tmp_path / "auto")), "cartpole")
    assert auto.update_step.autocast_dtype == (torch.bfloat16 if native_bf16() else None)
