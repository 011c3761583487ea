"""The native MLP (puffercore.ppo._native.mlp, native/ppo/mlp.c) against torch: forward and backward
of tanh and ReLU stacks, the heads' sampling, the policy binding collection uses
(ppo.native_mlp), and misuse."""

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from puffercore.ppo._native import mlp as native_kernels
from puffercore.ppo._native.mlp import MLP
from puffercore.ppo.default_policy import DefaultPolicy
from puffercore.ppo.flat_adam import FlatAdam
from puffercore.ppo.native_mlp import NativeMLPPolicy


def torch_mlp(widths, activation: str, seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    modules = []
    for index, (inputs, outputs) in enumerate(zip(widths[:-1], widths[1:])):
        modules.append(nn.Linear(inputs, outputs))
        if index < len(widths) - 2:
            modules.append(nn.Tanh() if activation == "tanh" else nn.ReLU())
    return nn.Sequential(*modules)


def native_of(net: nn.Sequential, activation: str) -> MLP:
    return MLP([(m.weight.detach().numpy(), m.bias.detach().numpy()) for m in net if isinstance(m, nn.Linear)],
               activation)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("widths, rows", [((4, 32, 32, 2), 512), ((5, 7, 3), 37), ((3, 16, 1), 1), ((9, 8, 12, 5, 6), 8)])
def test_forward_and_backward_equal_torch(activation, widths, rows):
    net = torch_mlp(widths, activation)
    mlp = native_of(net, activation)
    x = torch.randn(rows, widths[0], generator=torch.Generator().manual_seed(1)) * 2
    out = net(x)
    native_out = mlp.forward(x.numpy())
    assert native_out.shape == (widths[-1], rows)
    np.testing.assert_allclose(native_out, out.detach().numpy().T, rtol=0, atol=2e-6)

    d_out = torch.randn(rows, widths[-1], generator=torch.Generator().manual_seed(2))
    (out * d_out).sum().backward()
    layers = [m for m in net if isinstance(m, nn.Linear)]
    gradients = [(np.full(tuple(m.weight.shape), 7.0, np.float32), np.full(tuple(m.bias.shape), 7.0, np.float32))
                 for m in layers]
    mlp.set_gradients(gradients)
    mlp.backward(np.ascontiguousarray(d_out.numpy().T))
    for (d_weight, d_bias), layer in zip(gradients, layers):  # overwritten, not added to
        np.testing.assert_allclose(d_weight, layer.weight.grad.numpy(), rtol=1e-5, atol=2e-5)
        np.testing.assert_allclose(d_bias, layer.bias.grad.numpy(), rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("widths, rows", [((4, 32, 32, 2), 512), ((5, 7, 3), 37), ((9, 8, 12, 5, 6), 1),
                                         ((17, 64, 64, 1), 200)])
def test_the_16_and_8_lane_kernels_give_the_same_bits(widths, rows):
    """AVX-512's 16-lane linear kernels and the 8-lane ones (AVX2, baseline) sum in one
    order: forward and backward agree to the bit (where the CPU has no AVX-512 both runs
    take the 8 lanes)."""
    net = torch_mlp(widths, "tanh")
    x = np.random.default_rng(3).standard_normal((rows, widths[0])).astype(np.float32)
    d_out = np.random.default_rng(4).standard_normal((widths[-1], rows)).astype(np.float32)
    results = []
    before = native_kernels.set_wide(True)
    try:
        for wide in (True, False):
            native_kernels.set_wide(wide)
            mlp = native_of(net, "tanh")
            gradients = [(np.zeros(tuple(m.weight.shape), np.float32), np.zeros(tuple(m.bias.shape), np.float32))
                         for m in net if isinstance(m, nn.Linear)]
            mlp.set_gradients(gradients)
            out = mlp.forward(x)
            mlp.backward(d_out)
            results.append([out, *(array for pair in gradients for array in pair)])
    finally:
        native_kernels.set_wide(before)
    for wide, narrow in zip(*results):
        np.testing.assert_array_equal(wide, narrow)


def test_tanh_is_within_float_rounding_of_libm_over_its_range():
    mlp = MLP([(np.eye(1, dtype=np.float32), np.zeros(1, np.float32)), (np.eye(1, dtype=np.float32),
                                                                         np.zeros(1, np.float32))], "tanh")
    x = np.linspace(-20, 20, 400_001, dtype=np.float32)
    out = mlp.forward(x.reshape(-1, 1))[0]
    assert np.abs(out - np.tanh(x.astype(np.float64))).max() < 3e-7
    assert np.all(np.sign(out) == np.sign(x)) and np.all(np.abs(out) <= 1.0)


def test_each_row_is_computed_alone_whatever_the_batch():
    """A row's outputs have the same bits whether it is alone, padded or in a big batch."""
    net = torch_mlp((6, 24, 24, 3), "tanh")
    mlp = native_of(net, "tanh")
    x = np.random.default_rng(0).standard_normal((77, 6)).astype(np.float32)
    whole = mlp.forward(x)
    for start, stop in [(0, 1), (5, 13), (40, 77)]:
        np.testing.assert_array_equal(mlp.forward(x[start:stop]), whole[:, start:stop])


def test_parameters_are_read_in_place():
    net = torch_mlp((3, 8, 2), "relu")
    mlp = native_of(net, "relu")
    x = np.ones((4, 3), np.float32)
    before = mlp.forward(x)
    with torch.no_grad():
        net[2].bias.add_(1.0)
    np.testing.assert_allclose(mlp.forward(x), before + 1.0, atol=1e-6)


def test_categorical_sampling_follows_the_softmax():
    logits = np.array([[2.0, -1.0, 0.5], [0.0, 0.0, 0.0]], np.float32)  # two rows
    mlp = MLP([(np.zeros((3, 1), np.float32), np.zeros(3, np.float32))], "tanh")
    rows = 20_000
    mlp.forward(np.zeros((rows, 1), np.float32))
    uniforms = np.random.default_rng(0).random(rows).astype(np.float32)
    for row_logits in logits:
        mlp.set_parameters([(np.zeros((3, 1), np.float32), row_logits.copy())])
        mlp.forward(np.zeros((rows, 1), np.float32))
        actions, log_prob = mlp.sample_categorical(uniforms)
        probabilities = torch.softmax(torch.from_numpy(row_logits).double(), 0).numpy()
        counts = np.bincount(actions, minlength=3) / rows
        assert np.abs(counts - probabilities).max() < 0.015
        np.testing.assert_allclose(log_prob, np.log(probabilities)[actions], rtol=1e-6)
    # a uniform just below 1 takes the last action with probability above 0
    mlp.set_parameters([(np.zeros((3, 1), np.float32), np.array([0.0, 0.0, -1e30], np.float32))])
    mlp.forward(np.zeros((1, 1), np.float32))
    actions, log_prob = mlp.sample_categorical(np.array([np.nextafter(np.float32(1), np.float32(0))], np.float32))
    assert actions[0] == 1 and math.isclose(float(log_prob[0]), math.log(0.5), rel_tol=1e-6)


def test_gaussian_sampling_matches_the_action_heads_formula():
    torch.manual_seed(0)
    policy = DefaultPolicy(spaces.Box(-2, 2, (5,), np.float32), spaces.Box(-1, 1, (3,), np.float32), hidden_size=16)
    with torch.no_grad():
        policy.log_std.copy_(torch.tensor([-0.5, 0.0, 0.3]))
    native = NativeMLPPolicy.for_policy(policy)
    observations = np.random.default_rng(1).standard_normal((33, 5)).astype(np.float32)
    actions, log_prob, value = native.act(observations, torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = policy.output(torch.from_numpy(observations))
        expected_actions, expected_log_prob = policy.sample(out, torch.Generator().manual_seed(3))
    np.testing.assert_allclose(actions, expected_actions.numpy(), atol=2e-6)
    np.testing.assert_allclose(log_prob, expected_log_prob.numpy(), atol=2e-5)
    np.testing.assert_allclose(value, out.value.numpy(), atol=2e-6)


def test_discrete_acting_gives_the_env_values_and_their_log_probabilities():
    torch.manual_seed(0)
    policy = DefaultPolicy(spaces.Box(-2, 2, (5,), np.float32), spaces.Discrete(4, start=-1), hidden_size=16,
                           activation="relu")
    FlatAdam(policy, lr=1e-3, eps=1e-5, groups=policy.parameter_groups())  # moves the parameters
    native = NativeMLPPolicy.for_policy(policy)
    observations = np.random.default_rng(1).standard_normal((64, 5)).astype(np.float32)
    actions, log_prob, value = native.act(observations, torch.Generator().manual_seed(3))
    assert actions.dtype == np.int64 and actions.min() >= -1 and actions.max() <= 2
    with torch.no_grad():
        out = policy.output(torch.from_numpy(observations))
        expected_log_prob, _ = policy.evaluate(out, torch.from_numpy(actions))
    np.testing.assert_allclose(log_prob, expected_log_prob.numpy(), atol=2e-6)
    np.testing.assert_allclose(value, out.value.numpy(), atol=2e-6)
    again = native.act(observations, torch.Generator().manual_seed(3))
    np.testing.assert_array_equal(again[0], actions)
    np.testing.assert_array_equal(again[1], log_prob)
    # the env's actions, and the critic alone (truncated episodes' final observations)
    np.testing.assert_array_equal(policy.head.to_env(actions), policy.head.to_env(torch.from_numpy(actions)))
    np.testing.assert_allclose(native.values(observations[5:8]), out.value[5:8].numpy(), rtol=0, atol=2e-6)


@pytest.mark.parametrize("options, action_space", [
    (dict(lstm=True), spaces.Discrete(2)),
    (dict(shared_trunk=True), spaces.Discrete(2)),
    (dict(activation="gelu"), spaces.Discrete(2)),
    ({}, spaces.MultiDiscrete([2, 3])),
    (dict(hidden_size=128), spaces.Discrete(2)),  # matmul-bound: torch's kernels are faster
])
def test_policies_it_does_not_cover_get_none(options, action_space):
    policy = DefaultPolicy(spaces.Box(-1, 1, (4,), np.float32), action_space, **{"hidden_size": 8, **options})
    assert NativeMLPPolicy.for_policy(policy) is None
    assert NativeMLPPolicy.for_policy(policy.to(torch.float64)) is None


def test_misuse_raises_clear_errors():
    weight, bias = np.zeros((3, 4), np.float32), np.zeros(3, np.float32)
    with pytest.raises(ValueError, match="activation must be one of"):
        MLP([(weight, bias)], "gelu")
    with pytest.raises(ValueError, match="at least one"):
        MLP([], "tanh")
    with pytest.raises(TypeError, match=r"layers\[0\] weight must be a non-empty C-contiguous float32"):
        MLP([(weight.astype(np.float64), bias)], "tanh")
    with pytest.raises(TypeError, match="C-contiguous"):
        MLP([(np.zeros((4, 3), np.float32).T, bias)], "tanh")
    with pytest.raises(ValueError, match=r"layers\[1\] weight must take 3 inputs"):
        MLP([(weight, bias), (np.zeros((2, 5), np.float32), np.zeros(2, np.float32))], "tanh")
    mlp = MLP([(weight, bias)], "tanh")
    with pytest.raises(RuntimeError, match="needs a forward first"):
        mlp.backward(np.zeros((3, 2), np.float32))
    with pytest.raises(RuntimeError, match="needs a forward first"):
        mlp.sample_categorical(np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="x must have 4 columns"):
        mlp.forward(np.zeros((2, 5), np.float32))
    with pytest.raises(ValueError, match="at least one row"):
        mlp.forward(np.zeros((0, 4), np.float32))
    mlp.forward(np.zeros((2, 4), np.float32))
    with pytest.raises(RuntimeError, match="needs set_gradients first"):
        mlp.backward(np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match=r"gradients\[0\] must match"):
        mlp.set_gradients([(np.zeros((3, 5), np.float32), bias.copy())])
    read_only = weight.copy()
    read_only.flags.writeable = False
    with pytest.raises(TypeError, match="writable"):
        mlp.set_gradients([(read_only, bias.copy())])
    mlp.set_gradients([(weight.copy(), bias.copy())])
    with pytest.raises(ValueError, match=r"d_out must be \[3, 2\]"):
        mlp.backward(np.zeros((3, 5), np.float32))
    with pytest.raises(ValueError, match="uniforms must hold 2 values"):
        mlp.sample_categorical(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="keep its shape"):
        mlp.set_parameters([(np.zeros((3, 5), np.float32), bias)])
    unmade = MLP.__new__(MLP, [], "tanh")  # __init__ skipped
    with pytest.raises(RuntimeError, match="no layers"):
        unmade.forward(np.zeros((2, 4), np.float32))
    with pytest.raises(RuntimeError, match="no layers"):
        unmade.set_gradients([])
    with pytest.raises(RuntimeError, match="needs a forward first"):
        unmade.sample_categorical(np.zeros(1, np.float32))


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_nan_and_inf_propagate_as_in_torch_at_both_widths(activation):
    """tanh(NaN) and relu(NaN) are NaN, as in torch: a bad observation shows in its own
    row's outputs (not as a finite action, later as a NaN gradient norm)."""
    net = torch_mlp((4, 16, 16, 3), activation)
    x = np.random.default_rng(5).standard_normal((20, 4)).astype(np.float32)
    x[3, 1], x[7, 0], x[11, 2], x[12] = np.nan, np.inf, -np.inf, [np.nan, np.inf, 0.0, 1.0]
    with torch.no_grad():
        expected = net(torch.from_numpy(x)).numpy().T
    assert np.isnan(expected[:, 3]).all() and np.isfinite(expected[:, 0]).all()
    before = native_kernels.set_wide(True)
    try:
        for wide in (True, False):
            native_kernels.set_wide(wide)
            np.testing.assert_allclose(native_of(net, activation).forward(x), expected, rtol=0, atol=2e-6)
    finally:
        native_kernels.set_wide(before)
    edge = np.array([[np.nan, np.inf, -np.inf, -0.0, 3.0]], np.float32).T  # through one unit each
    identity = [(np.ones((1, 1), np.float32), np.zeros(1, np.float32))] * 2
    torch_activation = torch.tanh if activation == "tanh" else torch.relu
    np.testing.assert_array_equal(MLP(identity, activation).forward(edge)[0],
                                  torch_activation(torch.from_numpy(edge[:, 0])).numpy())


def test_lanes_reports_the_kernels_width():
    before = native_kernels.set_wide(True)
    try:
        wide = native_kernels.lanes()
        assert wide in (8, 16)
        native_kernels.set_wide(False)
        assert native_kernels.lanes() == 8
    finally:
        native_kernels.set_wide(before)


def test_a_nan_observation_gives_its_row_nan_log_prob_and_value():
    torch.manual_seed(0)
    policy = DefaultPolicy(spaces.Box(-2, 2, (5,), np.float32), spaces.Discrete(3), hidden_size=16)
    native = NativeMLPPolicy.for_policy(policy)
    observations = np.zeros((6, 5), np.float32)
    observations[2, 4] = np.nan
    _, log_prob, value = native.act(observations, torch.Generator().manual_seed(0))
    assert np.isnan(log_prob[2]) and np.isnan(value[2])
    assert np.isfinite(np.delete(log_prob, 2)).all() and np.isfinite(np.delete(value, 2)).all()


@pytest.mark.parametrize("change, name", [
    (lambda policy: policy.encoder.__setitem__(0, nn.Linear(5, 16)), "encoder.0"),
    (lambda policy: setattr(policy, "actor", nn.Linear(16, 3)), "actor"),
    (lambda policy: setattr(policy.critic_encoder[2], "weight", nn.Parameter(torch.zeros(16, 16))),
     "critic_encoder.2.weight"),
    (lambda policy: policy.critic_encoder.__setitem__(1, nn.ReLU()), "critic_encoder.1"),
])
def test_a_replaced_module_or_parameter_is_refused_by_name(change, name):
    torch.manual_seed(0)
    policy = DefaultPolicy(spaces.Box(-2, 2, (5,), np.float32), spaces.Discrete(3), hidden_size=16)
    native = NativeMLPPolicy.for_policy(policy)
    observations = np.ones((4, 5), np.float32)
    native.act(observations, torch.Generator().manual_seed(0))
    change(policy)
    for call in (lambda: native.act(observations, torch.Generator()), lambda: native.values(observations),
                 lambda: native.forward(observations)):
        with pytest.raises(RuntimeError, match=rf"policy's {name} was replaced after its native MLP was made"):
            call()


def test_parameters_moved_to_new_storage_are_followed():
    torch.manual_seed(0)
    policy = DefaultPolicy(spaces.Box(-2, 2, (5,), np.float32), spaces.Discrete(3), hidden_size=16)
    native = NativeMLPPolicy.for_policy(policy)
    observations = np.random.default_rng(2).standard_normal((8, 5)).astype(np.float32)
    native.values(observations)
    with torch.no_grad():
        policy.critic.bias.data = policy.critic.bias.data + 1.0  # the same Parameter, new storage
        expected = policy.output(torch.from_numpy(observations)).value.numpy()
    np.testing.assert_allclose(native.values(observations), expected, atol=2e-6)
