import math

import numpy as np
import pytest
import torch

from puffercore import advantage

FLOAT32_EPS = float(np.finfo(np.float32).eps)


def reference(values, rewards, terminals, truncations, final_values=None, *, gamma=0.99,
              lam=0.95, ratios=None, rho_clip=1.0, c_clip=1.0):
    """GAE / V-trace straight from the formulas, one step at a time in float64.

    The parameters are first rounded to float32, as the kernel receives them, so that the
    only difference left is float32 arithmetic. Also returns, per step, the magnitude of
    the recursion (the same recursion over absolute values), which bounds that rounding.
    """
    gamma, lam, rho_clip, c_clip = (float(np.float32(x)) for x in (gamma, lam, rho_clip, c_clip))
    rows, length = rewards.shape
    advantages = np.zeros((rows, length))
    magnitudes = np.zeros((rows, length))
    for n in range(rows):
        next_advantage = next_magnitude = 0.0
        for t in reversed(range(length)):
            value = float(values[n, t])
            if terminals[n, t]:
                next_value = 0.0
            elif truncations[n, t]:
                next_value = float(final_values[n, t])
            else:
                next_value = float(values[n, t + 1])
            ratio = 1.0 if ratios is None else float(ratios[n, t])
            rho, c = min(ratio, rho_clip), min(ratio, c_clip)
            carry = 0.0 if (terminals[n, t] or truncations[n, t]) else 1.0
            reward = float(rewards[n, t])
            next_advantage = (rho * (reward + gamma * next_value - value)
                              + gamma * lam * c * carry * next_advantage)
            next_magnitude = (rho * (abs(reward) + gamma * abs(next_value) + abs(value))
                              + gamma * lam * c * carry * next_magnitude)
            advantages[n, t] = next_advantage
            magnitudes[n, t] = next_magnitude
    return advantages, advantages + values[:, :length], magnitudes


def rollout(rows, length, seed=0, done_rate=0.1, reward_scale=1.0, with_ratios=False):
    rng = np.random.default_rng(seed)
    data = dict(
        values=rng.normal(size=(rows, length + 1)).astype(np.float32),
        rewards=(reward_scale * rng.normal(size=(rows, length))).astype(np.float32),
        terminals=rng.random((rows, length)) < done_rate,
        truncations=rng.random((rows, length)) < done_rate,
        final_values=rng.normal(size=(rows, length)).astype(np.float32),
    )
    if with_ratios:
        data["ratios"] = np.exp(rng.normal(scale=0.5, size=(rows, length))).astype(np.float32)
    return data


def assert_matches_reference(data, **params):
    advantages, returns = advantage.compute(**data, **params)
    want_advantages, want_returns, magnitudes = reference(**data, **params)
    # The kernel computes in float32: every step rounds its terms with a relative error
    # of about eps32, so the error of advantage_t is a few eps32 times the magnitude of
    # the recursion (the same sum over absolute values); we measured at most 1.5 of that.
    # Where the advantage is near 0 by cancellation (long undiscounted rows), rtol 1e-6
    # alone would demand more than float32 can give, hence atol = 4 eps32 * magnitude.
    # A real mistake (a wrong flag, slot or clip) is off by a whole term, far above it.
    tolerance = 1e-6 * np.abs(want_advantages) + 4 * FLOAT32_EPS * magnitudes
    assert np.all(np.abs(advantages - want_advantages) <= tolerance)
    tolerance = 1e-6 * np.abs(want_returns) + 4 * FLOAT32_EPS * (magnitudes + np.abs(data["values"][:, :-1]))
    assert np.all(np.abs(returns - want_returns) <= tolerance)
    return advantages, returns


@pytest.mark.parametrize("rows, length", [(1, 1), (7, 1), (1, 50), (33, 64), (64, 300)])
def test_gae_matches_reference(rows, length):
    assert_matches_reference(rollout(rows, length, seed=rows * 1000 + length))


@pytest.mark.parametrize("rho_clip, c_clip", [(1.0, 1.0), (2.0, 0.5), (0.7, 1.3), (math.inf, math.inf)])
def test_vtrace_clipping_matches_reference(rho_clip, c_clip):
    data = rollout(40, 100, seed=5, with_ratios=True)
    assert_matches_reference(data, rho_clip=rho_clip, c_clip=c_clip, gamma=0.97, lam=0.9)


@pytest.mark.parametrize("gamma, lam", [(0.0, 0.95), (1.0, 0.95), (0.99, 0.0), (0.99, 1.0), (1.0, 1.0), (0.0, 0.0)])
def test_extreme_discounts(gamma, lam):
    assert_matches_reference(rollout(16, 500, seed=3, done_rate=0.01), gamma=gamma, lam=lam)


@pytest.mark.parametrize("reward_scale", [1e-6, 1e6])
def test_extreme_rewards(reward_scale):
    data = rollout(16, 200, seed=4, reward_scale=reward_scale, with_ratios=True)
    assert_matches_reference(data, gamma=1.0, lam=1.0, rho_clip=2.0, c_clip=2.0)


def test_long_episodes_without_dones():
    assert_matches_reference(rollout(4, 2048, seed=6, done_rate=0.0), gamma=1.0, lam=1.0)


def test_hand_computed_row():
    # One row of three steps: a truncation at t=0 (final value 10), a terminal at t=2.
    values = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    rewards = np.array([[1.0, 1.0, 1.0]], dtype=np.float32)
    terminals = np.array([[False, False, True]])
    truncations = np.array([[True, False, False]])
    final_values = np.array([[10.0, 0.0, 0.0]], dtype=np.float32)
    advantages, returns = advantage.compute(
        values, rewards, terminals, truncations, final_values, gamma=0.5, lam=0.5)
    # t=2: terminal, 1 + 0 - 3 = -2.  t=1: 1 + 0.5*3 - 2 = 0.5, plus 0.25 * -2 = 0.
    # t=0: truncated, 1 + 0.5*10 - 1 = 5, nothing carried from t=1.
    np.testing.assert_array_equal(advantages, [[5.0, 0.0, -2.0]])
    np.testing.assert_array_equal(returns, [[6.0, 2.0, 1.0]])


def test_terminal_wins_over_truncation():
    data = rollout(1, 1)
    data["terminals"][:] = data["truncations"][:] = True
    advantages, _ = advantage.compute(**data)
    assert advantages[0, 0] == data["rewards"][0, 0] - data["values"][0, 0]


def test_bootstrap_slot_is_used():
    data = rollout(3, 5, done_rate=0.0)
    data["values"][:, -1] = 100.0
    advantages, _ = advantage.compute(**data, gamma=1.0, lam=1.0)
    shifted = dict(data, values=data["values"].copy())
    shifted["values"][:, -1] = 0.0
    advantages_zero, _ = advantage.compute(**shifted, gamma=1.0, lam=1.0)
    np.testing.assert_allclose(advantages - advantages_zero, 100.0, rtol=1e-6)


def test_unit_ratios_give_plain_gae():
    data = rollout(20, 80, seed=8)
    plain, _ = advantage.compute(**data)
    ones = np.ones_like(data["rewards"])
    with_ratios, _ = advantage.compute(**data, ratios=ones, rho_clip=1.5, c_clip=3.0)
    np.testing.assert_array_equal(plain, with_ratios)


def test_outputs_written_in_place():
    data = rollout(8, 16)
    advantages = np.full((8, 16), np.nan, dtype=np.float32)
    returns = np.full((8, 16), np.nan, dtype=np.float32)
    got = advantage.compute(**data, advantages=advantages, returns=returns)
    assert got[0] is advantages and got[1] is returns
    want, _ = advantage.compute(**data)
    np.testing.assert_array_equal(advantages, want)


def test_torch_cpu_tensors_match_numpy_and_are_not_copied():
    data = rollout(12, 40, seed=9, with_ratios=True)
    tensors = {name: torch.from_numpy(array) for name, array in data.items()}
    advantages = torch.empty(12, 40)
    returns = torch.empty(12, 40)
    got = advantage.compute(**tensors, advantages=advantages, returns=returns)
    assert got[0] is advantages and got[1] is returns
    want_advantages, want_returns = advantage.compute(**data)
    np.testing.assert_array_equal(advantages.numpy(), want_advantages)
    np.testing.assert_array_equal(returns.numpy(), want_returns)
    allocated = advantage.compute(**tensors)
    assert isinstance(allocated[0], torch.Tensor) and allocated[0].dtype == torch.float32


def test_uint8_flags_count_any_nonzero_as_set():
    data = rollout(10, 30, seed=10)
    want, _ = advantage.compute(**data)
    as_bytes = dict(data, terminals=data["terminals"].astype(np.uint8) * 7,
                    truncations=data["truncations"].astype(np.uint8) * 255)
    got, _ = advantage.compute(**as_bytes)
    np.testing.assert_array_equal(got, want)


def test_thread_count_does_not_change_results():
    data = rollout(64, 4096, seed=11, with_ratios=True)  # big enough for several threads
    one, _ = advantage.compute(**data, num_threads=1)
    many, _ = advantage.compute(**data, num_threads=8)
    np.testing.assert_array_equal(one, many)


def test_empty_rollouts():
    for rows, length in [(0, 5), (4, 0)]:
        data = rollout(rows, length)
        advantages, returns = advantage.compute(**data)
        assert advantages.shape == returns.shape == (rows, length)


def test_final_values_only_needed_with_truncations():
    data = rollout(5, 20, seed=12)
    data["truncations"][:] = False
    del data["final_values"]
    assert_matches_reference(data)


def bad(**changes):
    data = rollout(4, 6, with_ratios=True)
    data.update(changes)
    return data


BAD_INPUTS = [
    (dict(values=np.zeros((4, 6), np.float32)), ValueError, "rewards must have shape"),
    (dict(values=np.zeros(7, np.float32)), ValueError, "values must have shape"),
    (dict(values=np.zeros((5, 7), np.float32)), ValueError, "rewards must have shape"),
    (dict(rewards=np.zeros((4, 6), np.float64)), TypeError, "rewards must have dtype float32"),
    (dict(values=np.zeros((4, 7), np.float16)), TypeError, "values must have dtype float32"),
    (dict(terminals=np.zeros((4, 6), np.int32)), TypeError, "terminals must have dtype bool or uint8"),
    (dict(truncations=np.zeros((4, 5), bool)), ValueError, "truncations must have shape"),
    (dict(final_values=np.zeros((4, 7), np.float32)), ValueError, "final_values must have shape"),
    (dict(ratios=np.zeros((6, 4), np.float32).T), ValueError, "ratios must be C-contiguous"),
    (dict(rewards=np.zeros((4, 12), np.float32)[:, ::2]), ValueError, "rewards must be C-contiguous"),
    (dict(rewards=[[0.0] * 6] * 4), TypeError, "rewards must be a NumPy array or a torch tensor"),
    (dict(final_values=None), ValueError, "final_values is None"),
    (dict(gamma=-0.1), ValueError, "gamma must lie in"),
    (dict(gamma=1.5), ValueError, "gamma must lie in"),
    (dict(lam=math.nan), ValueError, "lam must lie in"),
    (dict(gamma="high"), TypeError, "gamma must be a real number"),
    (dict(rho_clip=0.0), ValueError, "rho_clip must lie in"),
    (dict(c_clip=-1.0), ValueError, "c_clip must lie in"),
    (dict(num_threads=0), ValueError, "num_threads must be an int >= 1"),
    (dict(advantages=np.zeros((4, 6), np.float64)), TypeError, "advantages must have dtype float32"),
    (dict(returns=np.zeros((4, 7), np.float32)), ValueError, "returns must have shape"),
    (dict(rewards=torch.zeros(4, 6, dtype=torch.float64)), TypeError, "rewards must have dtype float32"),
    (dict(values=torch.zeros(7, 4).T), ValueError, "values must be contiguous"),
    (dict(terminals=torch.zeros(4, 6, dtype=torch.int64)), TypeError, "terminals must have dtype bool or uint8"),
    (dict(final_values=torch.zeros(4, 6, device="meta")), ValueError, "final_values must be on the CPU or a CUDA device"),
]


@pytest.mark.parametrize("changes, error, message", BAD_INPUTS)
def test_bad_inputs_raise_clear_errors(changes, error, message):
    data = bad(**changes)
    data["truncations"][0, 0] = True  # so that a missing final_values matters
    with pytest.raises(error, match=message):
        advantage.compute(**data)


def test_readonly_and_shared_outputs_are_rejected():
    data = bad()
    readonly = np.zeros((4, 6), np.float32)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="advantages is an output and must be writeable"):
        advantage.compute(**data, advantages=readonly)
    shared = np.zeros((4, 6), np.float32)
    with pytest.raises(ValueError, match="advantages and returns must be different arrays"):
        advantage.compute(**data, advantages=shared, returns=shared)


def test_missing_cuda_library_gives_clear_error(monkeypatch):
    advantage._cuda_library.cache_clear()
    monkeypatch.setattr(advantage, "CUDA_LIBRARY", "libpuffercore_no_such_kernel.so")
    try:
        with pytest.raises(RuntimeError, match="libpuffercore_no_such_kernel.so.*nvcc"):
            advantage._cuda_library()
    finally:
        advantage._cuda_library.cache_clear()


def test_cuda_library_loads_without_a_gpu_when_built():
    try:
        library = advantage._cuda_library()
    except RuntimeError as error:
        pytest.skip(f"CUDA kernel not built: {error}")
    # An empty launch touches no memory and no device, so it works with or without a GPU.
    assert library.puffercore_advantage_cuda(*[None] * 8, 0, 0, 0.99, 0.95, 1.0, 1.0, 0, None) == 0
    assert library.puffercore_cuda_error_string(35)  # the runtime's own messages are linked in


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("rows, length", [(1, 1), (31, 33), (100, 64), (257, 1000), (2048, 128)])
@pytest.mark.parametrize("with_ratios", [False, True])
def test_cuda_kernel_matches_cpu_kernel(rows, length, with_ratios):
    data = rollout(rows, length, seed=rows + length, with_ratios=with_ratios)
    params = dict(gamma=0.99, lam=0.95, rho_clip=1.2, c_clip=0.9)
    want_advantages, want_returns = advantage.compute(**data, **params)
    # A side stream checks that the kernel runs on torch's current stream.
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        on_gpu = {name: torch.from_numpy(array).cuda() for name, array in data.items()}
        advantages, returns = advantage.compute(**on_gpu, **params)
        advantages, returns = advantages.cpu().numpy(), returns.cpu().numpy()
    # Same float32 operations in the same order; only the compilers' contraction into
    # fused multiply-adds may differ, by a rounding per step.
    scale = np.abs(data["rewards"]).max() + np.abs(data["values"]).max()
    np.testing.assert_allclose(advantages, want_advantages, rtol=1e-5, atol=1e-5 * scale)
    np.testing.assert_allclose(returns, want_returns, rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_checks_missing_final_values():
    data = {name: torch.from_numpy(array).cuda() for name, array in bad().items()}
    data["truncations"][0, 0] = True
    del data["final_values"]
    with pytest.raises(ValueError, match="final_values is None"):
        advantage.compute(**data)


@pytest.mark.parametrize("rows, length, num_threads", [(5, 8, 1), (64, 4096, 4)])
def test_missing_final_values_names_the_first_row(rows, length, num_threads):
    data = rollout(rows, length, done_rate=0.0)
    data["truncations"][rows - 1, 0] = data["truncations"][3, 6] = True
    del data["final_values"]
    with pytest.raises(ValueError, match="row 3 of truncations has a truncation"):
        advantage.compute(**data, num_threads=num_threads)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_rejects_arrays_on_other_devices():
    data = {name: torch.from_numpy(array).cuda() for name, array in bad().items()}
    data["rewards"] = data["rewards"].cpu()
    with pytest.raises(ValueError, match="rewards is on cpu but values is on cuda"):
        advantage.compute(**data)
