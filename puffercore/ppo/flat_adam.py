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
first step through `adam`; only the unfused path (devices without the fused kernel)
still steps through torch's Adam.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from puffercore import _adam


NATIVE_STEP_MAX_PARAMETERS = 1 << 18  # FlatAdam.clipped_step's native call up to this size


class FlatAdam(torch.optim.Adam):
    """`groups`: names -> parameters of `module` (default one group of them all); each
    group's parameters lie together in the flat buffer, so that `gradients[name]` is
    one tensor: the group's gradients, flat (what per-group clipping needs)."""

    def __init__(self, module: nn.Module, lr: float, eps: float, fused: bool | None = None,
                 groups: dict[str, list[nn.Parameter]] | None = None):
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
        # The groups' offsets, for the native step: float32 on the CPU, and small policies
        # only, where the launches around the arithmetic cost most; a big one's step is
        # the arithmetic, which torch's kernel can spread over threads (Atari's 1.7 M
        # parameters took as long either way on one thread: bench_update.py --optimizer).
        self.bounds = None
        self._host = None  # _host_buffers' views and the tensors they were made from
        if flat.device.type == "cpu" and flat.dtype == torch.float32 and flat.numel() <= NATIVE_STEP_MAX_PARAMETERS:
            self.bounds = np.cumsum([0, *(gradients.numel() for gradients in self.gradients.values())])
        super().__init__([flat], lr=lr, eps=eps, fused=fused)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        _unwrapped(torch.optim.Optimizer.add_param_group)(self, param_group)

    def state_dict(self) -> dict[str, Any]:
        return _unwrapped(torch.optim.Optimizer.state_dict)(self)

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
        self._make_state()
        # What torch's fused Adam runs for one tensor (torch.optim.adam._fused_adam),
        # without Optimizer.step's Python around it (79 -> 27 us a step; module docstring).
        torch._foreach_add_([state["step"]], 1)
        torch._fused_adam_([self.flat], [self.flat.grad], [state["exp_avg"]], [state["exp_avg_sq"]], [],
                           [state["step"]], amsgrad=False, lr=group["lr"], beta1=group["betas"][0],
                           beta2=group["betas"][1], weight_decay=group["weight_decay"], eps=group["eps"],
                           maximize=group["maximize"], grad_scale=None, found_inf=None)
        return None

    @torch.no_grad()
    def clipped_step(self, max_norm: float) -> torch.Tensor:
        """Clip each group's gradients to L2 norm `max_norm` at most (`clip_grad_norm`),
        then step; returns the groups' norms before clipping, in `gradients` order (one
        tensor). On the CPU in float32, one native call (`puffercore._adam`): the same
        arithmetic as the torch ops, in a fixed order, without their launches."""
        self._attach_gradients()
        group = self.param_groups[0]
        if self.bounds is None or group["amsgrad"] or group["maximize"] or torch.is_tensor(group["lr"]):
            norms = torch.stack([clip_grad_norm(gradients, max_norm) for gradients in self.gradients.values()])
            self.fused_step()
            return norms
        norms = torch.empty(len(self.gradients))
        _adam.clipped_step(*self._host_buffers(), self.bounds, max_norm, group["lr"], group["betas"][0],
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
        _unwrapped(torch.optim.Optimizer.load_state_dict)(self, state_dict)


def _unwrapped(method):
    """`method` without torch's lazy-dynamo wrapper (module docstring): the function it
    wraps (functools.wraps' `__wrapped__`), or `method` where torch does not wrap it."""
    return getattr(method, "__wrapped__", method)


def clip_grad_norm(gradients: torch.Tensor, max_norm: float) -> torch.Tensor:
    """Scale one parameter group's `gradients` (flat, in place) to L2 norm `max_norm` at
    most, as torch.nn.utils.clip_grad_norm_ does the group's tensors; returns the norm
    before. One norm instead of one per tensor and a norm of norms (ulp-level rounding
    apart): 4 ops instead of about 30."""
    norm = torch.linalg.vector_norm(gradients)
    gradients.mul_((max_norm / (norm + 1e-6)).clamp_(max=1.0))
    return norm
