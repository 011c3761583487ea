"""Speed of puffercore.advantage against the usual Python implementations.

    python bench/bench_advantage.py                        # table with ratios
    pytest bench/bench_advantage.py --benchmark-only       # pytest-benchmark suite

CPU: the native kernel vs (a) a NumPy loop over time, vectorized over rows, and (b) the
same loop in torch (the usual PyTorch GAE), and vs the memory-bandwidth bound: the bytes
the kernel must move divided by the bandwidth of a large np.copyto measured in the same
run. GPU (when CUDA is available): the CUDA kernel vs the torch loop on the GPU.
All implementations compute the same GAE with terminals and truncations (checked).
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import torch

from puffercore import advantage

SHAPES = [(4096, 128), (1024, 1024)]
GAMMA, LAM = 0.99, 0.95
DONE_RATE = 0.01


def make_rollout(rows, length, seed=0):
    rng = np.random.default_rng(seed)
    return dict(
        values=rng.normal(size=(rows, length + 1)).astype(np.float32),
        rewards=rng.normal(size=(rows, length)).astype(np.float32),
        terminals=rng.random((rows, length)) < DONE_RATE,
        truncations=rng.random((rows, length)) < DONE_RATE,
        final_values=rng.normal(size=(rows, length)).astype(np.float32),
    )


def numpy_loop(values, rewards, terminals, truncations, final_values):
    """GAE as a loop over time, vectorized over rows (float32 throughout)."""
    rows, length = rewards.shape
    advantages = np.empty((rows, length), np.float32)
    running = np.zeros(rows, np.float32)
    gamma, gamma_lambda = np.float32(GAMMA), np.float32(GAMMA * LAM)
    for t in reversed(range(length)):
        ended = terminals[:, t] | truncations[:, t]
        next_value = np.where(truncations[:, t], final_values[:, t], values[:, t + 1])
        next_value[terminals[:, t]] = 0.0
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = delta + gamma_lambda * np.where(ended, np.float32(0.0), running)
        advantages[:, t] = running
    return advantages, advantages + values[:, :length]


def torch_loop(values, rewards, terminals, truncations, final_values):
    """The usual PyTorch GAE: a Python loop over time on tensors."""
    length = rewards.shape[1]
    advantages = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(length)):
        ended = terminals[:, t] | truncations[:, t]
        next_value = torch.where(truncations[:, t], final_values[:, t], values[:, t + 1])
        next_value = torch.where(terminals[:, t], 0.0, next_value)
        delta = rewards[:, t] + GAMMA * next_value - values[:, t]
        running = delta + GAMMA * LAM * torch.where(ended, 0.0, running)
        advantages[:, t] = running
    return advantages, advantages + values[:, :length]


def native(data, outputs):
    return advantage.compute(**data, gamma=GAMMA, lam=LAM, **outputs)


def bytes_moved(data):
    """What the kernel must read and write: every input once (final values only where a
    truncation reads them) and both outputs once."""
    steps = data["rewards"].size
    reads = sum(data[name].nbytes for name in ("values", "rewards", "terminals", "truncations"))
    reads += 4 * int(data["truncations"].sum())
    return reads + 2 * 4 * steps


def copy_bandwidth(megabytes=256, repeats=5):
    """Bytes per second of a large np.copyto, counting the read and the write."""
    source = np.ones(megabytes * 2**20 // 4, np.float32)
    target = np.empty_like(source)
    seconds = best_time(lambda: np.copyto(target, source), repeats)
    return 2 * source.nbytes / seconds


def best_time(function, repeats, synchronize=lambda: None):
    function()  # warm up: page faults, thread start, lazy loading
    synchronize()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def check_same(got, want, name):
    for got_array, want_array in zip(got, want):
        got_array = got_array.cpu().numpy() if isinstance(got_array, torch.Tensor) else got_array
        want_array = want_array.cpu().numpy() if isinstance(want_array, torch.Tensor) else want_array
        np.testing.assert_allclose(got_array, want_array, rtol=1e-4, atol=1e-4, err_msg=name)


def main():
    bandwidth = copy_bandwidth()
    print(f"np.copyto bandwidth: {bandwidth / 1e9:.1f} GB/s (read + write, one thread); "
          f"CPU cores: {os.cpu_count()} (the kernel uses all; torch uses "
          f"{torch.get_num_threads()} threads)")
    for rows, length in SHAPES:
        data = make_rollout(rows, length)
        tensors = {name: torch.from_numpy(array) for name, array in data.items()}
        outputs = dict(advantages=np.empty((rows, length), np.float32),
                       returns=np.empty((rows, length), np.float32))
        want = native(data, outputs)
        check_same(numpy_loop(**data), want, "numpy loop")
        check_same(torch_loop(**tensors), want, "torch loop")

        kernel = best_time(lambda: native(data, outputs), repeats=50)
        numpy_time = best_time(lambda: numpy_loop(**data), repeats=3)
        torch_time = best_time(lambda: torch_loop(**tensors), repeats=3)
        bound = bytes_moved(data) / bandwidth
        print(f"[{rows} x {length}] CPU kernel {kernel * 1e3:.2f} ms | "
              f"numpy loop {numpy_time * 1e3:.1f} ms ({numpy_time / kernel:.0f}x slower) | "
              f"torch loop {torch_time * 1e3:.1f} ms ({torch_time / kernel:.0f}x slower) | "
              f"bandwidth bound {bound * 1e3:.2f} ms: kernel takes {kernel / bound:.2f}x the bound")

        if torch.cuda.is_available():
            on_gpu = {name: tensor.cuda() for name, tensor in tensors.items()}
            gpu_outputs = {name: torch.empty_like(on_gpu["rewards"]) for name in outputs}
            check_same(native(on_gpu, gpu_outputs), want, "CUDA kernel")
            cuda_kernel = best_time(lambda: native(on_gpu, gpu_outputs), 20, torch.cuda.synchronize)
            cuda_torch = best_time(lambda: torch_loop(**on_gpu), 3, torch.cuda.synchronize)
            print(f"[{rows} x {length}] CUDA kernel {cuda_kernel * 1e3:.3f} ms | "
                  f"torch loop on GPU {cuda_torch * 1e3:.1f} ms ({cuda_torch / cuda_kernel:.0f}x slower)")
    if not torch.cuda.is_available():
        print("CUDA not available: GPU comparison skipped")


# ---- pytest-benchmark suite ------------------------------------------------------------

IMPLEMENTATIONS = ["puffercore", "numpy_loop", "torch_loop"]


@pytest.fixture(scope="module", params=SHAPES, ids=lambda shape: f"{shape[0]}x{shape[1]}")
def rollout(request):
    return make_rollout(*request.param)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_cpu(benchmark, rollout, implementation):
    if implementation == "puffercore":
        outputs = {name: np.empty_like(rollout["rewards"]) for name in ("advantages", "returns")}
        benchmark(native, rollout, outputs)
    elif implementation == "numpy_loop":
        benchmark(numpy_loop, **rollout)
    else:
        benchmark(torch_loop, **{name: torch.from_numpy(array) for name, array in rollout.items()})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("implementation", ["puffercore_cuda", "torch_loop_cuda"])
def test_cuda(benchmark, rollout, implementation):
    on_gpu = {name: torch.from_numpy(array).cuda() for name, array in rollout.items()}
    if implementation == "puffercore_cuda":
        outputs = {name: torch.empty_like(on_gpu["rewards"]) for name in ("advantages", "returns")}

        def run():
            return native(on_gpu, outputs)
    else:
        def run():
            return torch_loop(**on_gpu)
    benchmark(lambda: (run(), torch.cuda.synchronize()))


if __name__ == "__main__":
    main()
