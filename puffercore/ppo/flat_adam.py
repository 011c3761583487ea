"""Adam over one flat buffer holding every parameter of a module: the PPO optimizer.

    optimizer = FlatAdam(policy, lr=3e-4, eps=1e-5, groups=policy.parameter_groups())  # params become views
    optimizer.zero_grad(); loss.backward()
    norm = optimizer.gradients["actor"].norm()   # a group's gradients, one flat tensor
    optimizer.step()

A policy's parameters are a dozen small tensors, and torch's Adam pays Python bookkeeping
per tensor on every step: for the MuJoCo policy's 13 tensors (5,900 numbers) a step took
188 us, one flat tensor through Optimizer.step 79 us, and the kernel called directly, as
here, 27 us (2-core machine, one thread). So the parameters, and their gradients, are
views of two flat tensors, and the fused Adam kernel steps the flat one: the same
arithmetic, element by element (a tensor's last few elements, which the separate kernel
computes in its scalar tail, can round differently in the last bit, so a seeded run's
bits differ from torch's Adam's; its learning does not). `zero_grad` zeroes the flat
gradient in place (backward then adds into the views), and `step` first takes back any
gradient that was replaced (`module.zero_grad()` or an assignment to `.grad`), so none
is lost. Its state_dict holds one parameter; a state saved per parameter (by torch's
Adam, before this optimizer) loads too.

torch wraps `Optimizer.__init__`'s `add_param_group`, `state_dict`, `load_state_dict` and
the functional `adam` in a lazy `import torch._dynamo` (to keep torch.compile out of
them), and that import took 1.7 s on the 2-core machine: 40% of the time PPO took to
solve CartPole. This optimizer is never compiled, so it calls those methods unwrapped
and makes the fused kernel's state itself (as torch's Adam does) instead of taking its
first step through `adam`. Both are torch internals, checked before use: a method is
unwrapped only where its `__wrapped__` takes the expected arguments, and the kernel is
called directly only where it exists and its first steps on a few numbers match Adam's
formula (`fused_kernel_works`); elsewhere, and on devices where this torch has no fused
kernel (the CPU before torch 2.4), the step is torch.optim.Adam's own.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import torch
from torch import nn

from puffercore.ppo._native import adam as native_adam
from puffercore.ppo.plan import fused_adam_supported, optimizer_choice


class FlatAdam(torch.optim.Adam):
    """`groups`: names -> parameters of `module` (default one group of them all); each
    group's parameters lie together in the flat buffer, so that `gradients[name]` is
    one tensor: the group's gradients, flat (what per-group clipping needs)."""

    def __init__(self, module: nn.Module, lr: float, eps: float, fused: bool | None = None,
                 groups: dict[str, list[nn.Parameter]] | None = None, step: str | None = None):
        self.module_parameters = list(module.parameters())
        groups = {"": self.module_parameters} if groups is None else groups
        self.layout = [parameter for parameters in groups.values() for parameter in parameters]
        if sorted(map(id, self.layout)) != sorted(map(id, self.module_parameters)) or not self.layout:
            raise ValueError("groups must hold every parameter of the module once (and it must have some)")
        flat = nn.Parameter(torch.cat([parameter.detach().reshape(-1) for parameter in self.layout]))
        flat.grad = torch.zeros_like(flat)
        self.views = []  # each parameter's view of flat.grad, in layout order
        self.offsets = {}  # id(parameter) -> where it starts in the flat buffer
        self.gradients = {}
        offset = 0
        for name, parameters in groups.items():
            start = offset
            for parameter in parameters:
                size = parameter.numel()
                self.offsets[id(parameter)] = offset
                parameter.data = flat.data[offset : offset + size].view_as(parameter)
                self.views.append(flat.grad[offset : offset + size].view_as(parameter))
                parameter.grad = self.views[-1]
                offset += size
            self.gradients[name] = flat.grad[start:offset]
        self.flat = flat
        # The step: an UpdatePlan's optimizer choice (ppo.plan), or the same rule's.
        self.step_kind = step or optimizer_choice(flat.numel(), flat.device, flat.dtype).name
        if self.step_kind == "native" and (flat.device.type != "cpu" or flat.dtype != torch.float32):
            raise ValueError(f"the native step needs float32 parameters on the CPU, got {flat.dtype} on {flat.device}")
        self.bounds = None  # the groups' offsets, for the native step
        self._host = None  # _host_buffers' views and the tensors they were made from
        if self.step_kind == "native":
            self.bounds = np.cumsum([0, *(gradients.numel() for gradients in self.gradients.values())])
        if fused is None:
            fused = fused_adam_supported(flat.device)
        super().__init__([flat], lr=lr, eps=eps, fused=fused)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        _unwrapped(torch.optim.Optimizer.add_param_group, ("self", "param_group"))(self, param_group)

    def state_dict(self) -> dict[str, Any]:
        return _unwrapped(torch.optim.Optimizer.state_dict, ("self",))(self)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero every gradient, in place whatever `set_to_none` (the views stay the gradients)."""
        self.flat.grad.zero_()
        self._attach_gradients()

    def step(self, closure=None):
        return self.fused_step(closure)

    @torch.no_grad()
    def fused_step(self, closure=None):
        """`step` without the profiling and hook wrapper torch's Optimizer puts around every
        subclass's `step` (100 us of Python a call, more than the kernel: what the PPO update
        calls; optimizer step hooks, which puffercore does not register, do not run)."""
        self._attach_gradients()
        group, state = self.param_groups[0], self.state[self.flat]
        if closure is not None or not group["fused"] or group["amsgrad"] or torch.is_tensor(group["lr"]):
            return super().step(closure)  # options the kernel call below lacks
        if not fused_kernel_works(self.flat.device):  # torch's own fused step, through its public API
            return super().step()
        self._make_state()
        _kernel_step(self.flat, state, group)
        return None

    @torch.no_grad()
    def clipped_step(self, max_norm: float) -> torch.Tensor:
        """Clip each group's gradients to L2 norm `max_norm` at most (`clip_grad_norm`),
        then step; returns the groups' norms before clipping, in `gradients` order (one
        tensor). On the CPU in float32, one native call (`puffercore.ppo._native.adam`): the same
        arithmetic as the torch ops, in a fixed order, without their launches."""
        self._attach_gradients()
        group = self.param_groups[0]
        if self.bounds is None or group["amsgrad"] or group["maximize"] or torch.is_tensor(group["lr"]):
            norms = torch.stack([clip_grad_norm(gradients, max_norm) for gradients in self.gradients.values()])
            self.fused_step()
            return norms
        norms = torch.empty(len(self.gradients))
        native_adam.clipped_step(*self._host_buffers(), self.bounds, max_norm, group["lr"], group["betas"][0],
                           group["betas"][1], group["eps"], group["weight_decay"], norms.numpy())
        return norms

    def _host_buffers(self) -> tuple[np.ndarray, ...]:
        """NumPy views of the parameters, gradients, both moments and the step count, made
        again only when loading a state (or a new flat gradient) replaced their tensors."""
        self._make_state()
        state = self.state[self.flat]
        if self._host is None or self._host[0] is not state["exp_avg"] or self._host[1] is not self.flat.grad:
            self._host = (state["exp_avg"], self.flat.grad, (
                self.flat.detach().numpy(), self.flat.grad.numpy(), state["exp_avg"].numpy(),
                state["exp_avg_sq"].numpy(), state["step"].view(1).numpy()))
        return self._host[2]

    def _make_state(self) -> None:
        """The state torch's fused Adam makes on its first step."""
        state = self.state[self.flat]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32, device=self.flat.device)
            state["exp_avg"] = torch.zeros_like(self.flat, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(self.flat, memory_format=torch.preserve_format)

    def _attach_gradients(self) -> None:
        """Each parameter's gradient is its view of the flat gradient again; a gradient
        that replaced it is copied in first (None: zero)."""
        for parameter, view in zip(self.layout, self.views):
            gradient = parameter.grad
            if gradient is not view:
                if gradient is None:
                    view.zero_()
                else:
                    view.copy_(gradient)
                parameter.grad = view

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        groups = state_dict["param_groups"]
        ids = [index for group in groups for index in group["params"]]
        if len(ids) == len(self.module_parameters) > 1:  # torch's Adam over the module's parameters, in their order
            per_parameter = [state_dict["state"].get(index) for index in ids]
            state = {}
            if all(per_parameter):
                state = {0: {"step": per_parameter[0]["step"]}}
                for name in ("exp_avg", "exp_avg_sq"):
                    flat = torch.empty_like(self.flat)
                    for parameter, entry in zip(self.module_parameters, per_parameter):
                        offset = self.offsets[id(parameter)]
                        flat[offset : offset + parameter.numel()] = entry[name].reshape(-1)
                    state[0][name] = flat
            state_dict = {"state": state, "param_groups": [{**groups[0], "params": [0]}]}
        _unwrapped(torch.optim.Optimizer.load_state_dict, ("self", "state_dict"))(self, state_dict)


def _unwrapped(method, arguments: tuple[str, ...]):
    """`method` without torch's lazy-dynamo wrapper (module docstring): the function it
    wraps (functools.wraps' `__wrapped__`) where that takes exactly `arguments`, else
    `method` itself (a torch that does not wrap it, or wraps something else)."""
    wrapped = getattr(method, "__wrapped__", None)
    if not callable(wrapped) or _parameter_names(wrapped) != arguments:
        return method
    return wrapped


def _parameter_names(function) -> tuple[str, ...] | None:
    try:
        return tuple(inspect.signature(function, follow_wrapped=False).parameters)
    except (TypeError, ValueError):
        return None


def _kernel_step(flat: torch.Tensor, state: dict, group: dict) -> None:
    """What torch's fused Adam runs for one tensor (torch.optim.adam._fused_adam), called
    directly: torch internals, used only where `fused_kernel_works`."""
    torch._foreach_add_([state["step"]], 1)
    torch._fused_adam_([flat], [flat.grad], [state["exp_avg"]], [state["exp_avg_sq"]], [], [state["step"]],
                       amsgrad=False, lr=group["lr"], beta1=group["betas"][0], beta2=group["betas"][1],
                       weight_decay=group["weight_decay"], eps=group["eps"], maximize=group["maximize"],
                       grad_scale=None, found_inf=None)


_KERNEL_WORKS: dict[str, bool] = {}


def fused_kernel_works(device: torch.device | str) -> bool:
    """Whether calling torch's fused Adam kernel directly (`_kernel_step`) steps as Adam
    does on `device`'s type: tried once, so that a torch whose internals moved or changed
    takes the public path (torch.optim.Adam's step) instead of failing or stepping
    differently."""
    kind = torch.device(device).type
    if kind not in _KERNEL_WORKS:
        _KERNEL_WORKS[kind] = fused_adam_supported(kind) and _kernel_matches(kind)
    return _KERNEL_WORKS[kind]


def _kernel_matches(kind: str) -> bool:
    """Two steps of the kernel on three numbers against Adam's formula (not torch's Adam,
    whose first step imports torch._dynamo: the cost this optimizer avoids)."""
    lr, beta1, beta2, eps, decay = 0.01, 0.9, 0.999, 1e-8, 0.1
    values, gradient = [0.5, -1.0, 2.0], [0.1, -0.2, 0.3]
    direct = torch.tensor(values, device=kind)
    direct.grad = torch.tensor(gradient, device=kind)
    state = {"step": torch.zeros((), device=kind), "exp_avg": torch.zeros_like(direct),
             "exp_avg_sq": torch.zeros_like(direct)}
    group = {"lr": lr, "betas": (beta1, beta2), "eps": eps, "weight_decay": decay, "maximize": False}
    expected, first, second = list(values), [0.0] * 3, [0.0] * 3
    try:
        for step in (1, 2):
            _kernel_step(direct, state, group)
            for i, g in enumerate(gradient):
                g += decay * expected[i]
                first[i] = beta1 * first[i] + (1 - beta1) * g
                second[i] = beta2 * second[i] + (1 - beta2) * g * g
                denominator = (second[i] / (1 - beta2**step)) ** 0.5 + eps
                expected[i] -= lr / (1 - beta1**step) * first[i] / denominator
    except (AttributeError, TypeError, RuntimeError, NotImplementedError):
        return False
    return torch.allclose(direct.cpu().double(), torch.tensor(expected, dtype=torch.float64), rtol=1e-5, atol=1e-7)


def clip_grad_norm(gradients: torch.Tensor, max_norm: float) -> torch.Tensor:
    """Scale one parameter group's `gradients` (flat, in place) to L2 norm `max_norm` at
    most, as torch.nn.utils.clip_grad_norm_ does the group's tensors; returns the norm
    before. One norm instead of one per tensor and a norm of norms (ulp-level rounding
    apart): 4 ops instead of about 30."""
    norm = torch.linalg.vector_norm(gradients)
    gradients.mul_((max_norm / (norm + 1e-6)).clamp_(max=1.0))
    return norm
