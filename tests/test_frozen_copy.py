"""puffercore.frozen_copy: frozen copies of networks (batch norms folded, bf16), and puffercore.precision."""

import pytest
import torch
from torch import nn

from puffercore.frozen_copy import FrozenCopy, fold_batch_norms
from puffercore.precision import native_bf16, resolve_precision


def randomize_norms(network: nn.Module) -> nn.Module:
    """Batch norms with statistics far from the identity, so a wrong fold shows."""
    generator = torch.Generator().manual_seed(0)
    for module in network.modules():
        if isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d)):
            size = module.num_features
            module.running_mean.copy_(torch.rand(size, generator=generator) * 2 - 1)
            module.running_var.copy_(torch.rand(size, generator=generator) + 0.5)
            module.weight.data.copy_(torch.rand(size, generator=generator) + 0.5)
            module.bias.data.copy_(torch.rand(size, generator=generator) - 0.5)
    return network.eval()


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.norm = nn.Conv2d(2, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.shared = nn.Conv2d(8, 8, 1)  # its output feeds the norm and the residual: not foldable
        self.shared_norm = nn.BatchNorm2d(8)
        self.head = nn.Linear(8 * 6 * 7, 3)

    def forward(self, x, mask):
        x = torch.relu(self.norm(self.conv(x)))
        y = self.shared(x)
        x = torch.relu(self.shared_norm(y) + y)
        return self.head(x.flatten(1)).masked_fill(~mask, -1e9), x.mean(dim=(1, 2, 3))


def mlp():
    return nn.Sequential(nn.Linear(5, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))


def norms(network):
    return sum(isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)) for m in network.modules())


def test_folded_networks_compute_the_same_function():
    x, mask = torch.randn(16, 2, 6, 7), torch.rand(16, 3) > 0.3
    conv = randomize_norms(ConvNet())
    folded = fold_batch_norms(conv)
    assert norms(folded) == 1  # the shared conv's norm stays
    for ours, theirs in zip(folded(x, mask), conv(x, mask)):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
    dense = randomize_norms(mlp())
    assert norms(fold_batch_norms(dense)) == 0
    inputs = torch.randn(8, 5)
    torch.testing.assert_close(fold_batch_norms(dense)(inputs), dense(inputs), rtol=1e-4, atol=1e-5)
    assert norms(dense) == 1 and not dense.training  # the original is untouched


def test_untraceable_networks_are_copied_unfolded():
    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer, self.norm = nn.Linear(3, 3), nn.BatchNorm1d(3)

        def forward(self, x):
            return self.norm(self.layer(x)) if x.sum() > 0 else x  # data-dependent: fx cannot trace it

    network = randomize_norms(Branchy())
    copy = fold_batch_norms(network)
    assert norms(copy) == 1
    inputs = torch.ones(4, 3)
    torch.testing.assert_close(copy(inputs), network(inputs))


def test_frozen_copy_matches_the_network_and_follows_its_training():
    network = randomize_norms(ConvNet())
    x, mask = torch.randn(16, 2, 6, 7), torch.rand(16, 3) > 0.3
    exact = FrozenCopy(network, "float32")
    low = FrozenCopy(network, "bfloat16")
    with torch.inference_mode():
        for ours, theirs in zip(exact(x, mask), network(x, mask)):
            assert ours.dtype == torch.float32
            torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)
        logits, values = low(x, mask)
    assert logits.dtype == values.dtype == torch.float32 and low.dtype == torch.bfloat16
    legal = mask.nonzero(as_tuple=True)
    torch.testing.assert_close(logits[legal], network(x, mask)[0][legal].detach(), rtol=0.05, atol=0.05)
    with torch.no_grad():
        network.head.bias += 1.0
    stale = exact(x, mask)[0]
    exact.sync(network)
    torch.testing.assert_close(exact(x, mask)[0][legal], stale[legal] + 1.0, rtol=1e-4, atol=1e-4)


def test_precision_is_checked_and_auto_follows_the_cpu_for_convolutions_only():
    assert resolve_precision("auto", "cpu", convolutional=True) == (torch.bfloat16 if native_bf16() else torch.float32)
    assert resolve_precision("auto", "cpu", convolutional=False) == torch.float32
    assert FrozenCopy(nn.Linear(3, 2), "auto").dtype == torch.float32
    assert resolve_precision("float32", convolutional=True) == torch.float32
    assert resolve_precision("bfloat16", convolutional=False) == torch.bfloat16
    with pytest.raises(ValueError, match="precision must be one of"):
        resolve_precision("fp16", convolutional=True)


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_a_frozen_copy_of_a_ppo_policy_takes_raw_observations(precision):
    # PolicyOutput's state is None without an LSTM, and uint8 frames become the weights' dtype.
    import gymnasium
    import numpy as np

    from puffercore.ppo.default_policy import DefaultPolicy

    torch.manual_seed(0)
    space = gymnasium.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    policy = DefaultPolicy(space, gymnasium.spaces.Discrete(4), shared_trunk=True)
    frames = torch.as_tensor(np.stack([space.sample() for _ in range(3)]))
    copy = FrozenCopy(policy, precision)
    with torch.inference_mode():
        out, expected = copy(frames), policy(frames)
    assert out.state is None and out.params.dtype == torch.float32
    tolerance = 1e-5 if precision == "float32" else 5e-2
    torch.testing.assert_close(out.params, expected.params, atol=tolerance, rtol=tolerance)
    torch.testing.assert_close(out.value, expected.value, atol=tolerance, rtol=tolerance)


class BranchyNet(nn.Module):
    """A forward whose branch depends on the data: a trace would bake in one branch."""

    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x) if x.shape[0] > 3 else -self.layer(x)


def test_the_first_call_traces_a_graph_that_matches_the_eager_copy_at_every_batch_size():
    torch.manual_seed(0)
    network = randomize_norms(ConvNet())
    traced, eager = FrozenCopy(network, "float32"), FrozenCopy(network, "float32", trace=False)
    for batch in (7, 1, 30, 2):  # traced with 7 rows, then other sizes
        x, mask = torch.randn(batch, 2, 6, 7), torch.rand(batch, 3) > 0.3
        with torch.inference_mode():
            for ours, theirs in zip(traced(x, mask), eager(x, mask)):
                torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    assert isinstance(traced.compiled, torch.jit.ScriptModule) and eager.compiled is eager.model
    traced.sync(network)
    assert traced.compiled is None  # the new weights are traced by the next call


def test_a_forward_that_a_trace_would_get_wrong_stays_eager():
    torch.manual_seed(0)
    network = BranchyNet().eval()
    copy = FrozenCopy(network, "float32")
    with torch.inference_mode():
        for batch in (8, 5, 2):  # traced at 8 rows: the check at one row finds the other branch
            x = torch.randn(batch, 4)
            torch.testing.assert_close(copy(x), network(x))
    assert copy.compiled is copy.model


def test_threads_sharing_one_copy_trace_it_once_and_all_get_right_answers():
    import concurrent.futures

    torch.manual_seed(0)
    network = randomize_norms(ConvNet())
    copy = FrozenCopy(network, "float32")
    inputs = [(torch.randn(5 + k, 2, 6, 7), torch.rand(5 + k, 3) > 0.3) for k in range(8)]
    with torch.inference_mode():
        expected = [network(x, mask)[0] for x, mask in inputs]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda pair: copy(*pair)[0], inputs))
    for answer, want in zip(answers, expected):
        legal = torch.isfinite(want) & (want > -1e8)
        torch.testing.assert_close(answer[legal], want[legal], rtol=1e-4, atol=1e-4)
    assert isinstance(copy.compiled, torch.jit.ScriptModule)
