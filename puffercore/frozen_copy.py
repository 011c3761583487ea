"""Frozen copies of trained networks: what self-play and rollouts run between updates.

A network being trained stays in float32 for its gradients; the copy that only predicts
can be cheaper. `FrozenCopy(network, precision)` is a frozen eval-mode copy with batch
norms folded into the convolution or linear layer before them, its weights in the
chosen precision (`puffercore.precision`) and convolutions in channels-last memory
(oneDNN's fast layout); `sync(network)` refreshes it after training steps, and calling it
takes and returns float32 tensors like the network. The first call after a sync traces
the copy with that call's inputs into a frozen TorchScript graph (weights as constants,
no Python per op): small networks spend most of an eager forward in module dispatch
(`bench/bench_inference.py`). The traced graph is checked against the eager copy on
batches of other sizes; a network whose forward cannot be traced (data-dependent
branches, outputs holding None) or whose trace disagrees stays eager.

    fast = FrozenCopy(network, precision="auto")     # bf16 where the CPU computes it natively
    with torch.inference_mode():
        logits, values = fast(observations, masks)
    ...train network...
    fast.sync(network)
"""

from __future__ import annotations

import copy
import threading
import warnings

import torch
from torch import fx, nn
from torch.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval

from puffercore.precision import resolve_precision


def fold_batch_norms(network: nn.Module) -> nn.Module:
    """An eval-mode copy of `network` whose batch norms that directly follow a Conv2d or
    Linear (and are that layer's only user) are folded into it: one op instead of two,
    the same function up to float rounding. Networks torch.fx cannot trace are returned
    as an unfolded eval copy."""
    network = copy.deepcopy(network).eval()
    try:
        graph_module = fx.symbolic_trace(network)
    except Exception:  # data-dependent control flow: fold nothing, stay correct
        return network
    modules = dict(graph_module.named_modules())
    folds = {nn.BatchNorm2d: (nn.Conv2d, fuse_conv_bn_eval), nn.BatchNorm1d: (nn.Linear, fuse_linear_bn_eval)}
    for node in list(graph_module.graph.nodes):
        norm = modules.get(node.target) if node.op == "call_module" else None
        if type(norm) not in folds or norm.running_mean is None:
            continue
        source = node.args[0]
        layer_type, fuse = folds[type(norm)]
        layer = modules.get(source.target) if isinstance(source, fx.Node) and source.op == "call_module" else None
        if type(layer) is not layer_type or len(source.users) != 1:
            continue
        _replace_module(graph_module, source.target, fuse(layer, norm))
        node.replace_all_uses_with(source)
        graph_module.graph.erase_node(node)
    graph_module.graph.lint()
    graph_module.recompile()
    graph_module.delete_all_unused_submodules()
    return graph_module


def _replace_module(root: nn.Module, qualified_name: str, module: nn.Module) -> None:
    parent_name, _, name = qualified_name.rpartition(".")
    setattr(root.get_submodule(parent_name) if parent_name else root, name, module)


class FrozenCopy:
    """A frozen copy of a network for inference (see the module docstring)."""

    def __init__(self, network: nn.Module, precision: str = "auto", trace: bool = True):
        device = next(network.parameters()).device
        convolutional = any(isinstance(module, nn.Conv2d) for module in network.modules())
        self.dtype = resolve_precision(precision, device, convolutional=convolutional)
        self.precision, self.trace = precision, trace
        self._trace_lock = threading.Lock()  # self-play threads share one copy
        self.sync(network)

    def sync(self, network: nn.Module) -> None:
        """Take `network`'s current weights (call after its training steps)."""
        model = fold_batch_norms(network)
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        self.channels_last = any(isinstance(module, nn.Conv2d) for module in model.modules())
        model = model.to(self.dtype)
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.model = model
        self.compiled = None if self.trace else model  # traced by the next call

    def _compile(self, inputs: tuple) -> nn.Module:
        """The frozen traced graph of `self.model`, or the model itself where tracing fails
        or the trace disagrees with it on batches of other sizes (half the rows, one row). Named-tuple outputs stay
        eager: a trace returns plain tuples."""
        with torch.no_grad():
            checks = [tuple(tensor[:rows] for tensor in inputs) for rows in {max(1, len(inputs[0]) // 2), 1}]
            expected = [self.model(*check) for check in checks]
            if hasattr(expected[0], "_fields"):
                return self.model
            try:
                with warnings.catch_warnings():
                    # TorchScript is deprecated in favour of torch.compile, whose generated code
                    # loses to it on these small batches (bench/bench_inference.py); where a
                    # later torch drops it, this raises and the copy stays eager.
                    warnings.simplefilter("ignore", DeprecationWarning)
                    traced = torch.jit.freeze(torch.jit.trace(self.model, inputs, check_trace=False))
                for check, want in zip(checks, expected):
                    for ours, theirs in zip(_tensors(traced(*check)), _tensors(want), strict=True):
                        torch.testing.assert_close(ours, theirs, rtol=1e-3, atol=1e-3)
            except Exception:  # untraceable or batch-dependent: the eager copy is always right
                return self.model
        return traced

    def _prepare(self, tensor: torch.Tensor) -> torch.Tensor:
        if not tensor.is_floating_point():
            return tensor
        if tensor.dtype != self.dtype:  # skipped, not a no-op call: small batches pay per call
            tensor = tensor.to(self.dtype)
        return tensor.contiguous(memory_format=torch.channels_last) if self.channels_last and tensor.dim() == 4 else tensor

    def __call__(self, *inputs: torch.Tensor):
        inputs = tuple(self._prepare(tensor) for tensor in inputs)
        if self.compiled is None:
            with self._trace_lock:
                if self.compiled is None:
                    self.compiled = self._compile(inputs)
        outputs = self.compiled(*inputs)
        if isinstance(outputs, torch.Tensor):
            return _float(outputs)
        floats = [_float(output) if isinstance(output, torch.Tensor) else output for output in outputs]  # None too
        return type(outputs)(*floats) if hasattr(outputs, "_fields") else tuple(floats)  # named tuples too


def _float(tensor: torch.Tensor) -> torch.Tensor:
    return tensor if tensor.dtype == torch.float32 else tensor.float()


def _tensors(outputs) -> list:
    return [outputs] if isinstance(outputs, torch.Tensor) else list(outputs)
