"""One minibatch step of the PPO update -- loss, gradients, clipping, optimizer step --
on the paths an `UpdatePlan` (puffercore.ppo.plan) picked once for the run, with the
step's statistics left on the device.

    step = UpdateStep(trainer._minibatch_loss, policy, optimizer, max_grad_norm, group, plan, gradients)
    scalars = step(minibatch, by_rows, weights)      # one tensor of step.names' values; no host sync
    step.decide(update_seconds, updates_left)        # compile "auto": compile where the rest of the run repays it

    path (plan)             runs                                            when
    gradients  native       the loss and its gradients in C                 default MLP, separate actor and
                            (ppo.mlp_gradients on ppo.native_mlp)           critic, Discrete or Box action,
                                                                            float32 on the CPU, not compiled
               graphed      autograd's whole minibatch step as one CUDA     compile=auto on cuda, not recurrent,
                            graph (ppo.graphed.GraphedStep, not this class) prioritized, multi-process, target_kl
                                                                            or autocast (graphed.unsupported)
               eager        autograd on the torch loss                      compile=false, or a veto above
               compiled     autograd on torch.compile's loss                compile=true
               auto         eager, then compiled if it repays and is faster compile=auto and a veto above
    precision  float32      as is
               bfloat16     the loss under autocast (bf16 matmuls,          precision=bfloat16, or auto on a
                            float32 weights, optimizer and reductions)      CPU that computes bf16 natively
    optimizer  native       clip and Adam in one C call (FlatAdam)          float32 on the CPU, <= 2^18 numbers
               fused        torch's fused Adam kernel, after torch's clip   bigger, or on a GPU
               plain        torch.optim.Adam's step, after torch's clip     no fused kernel in this torch there
    collection native       forward and sampling in C (ppo.native_mlp)      as the native gradients, any precision
               torch        the policy's torch forward                      inference=torch, or a veto above

What is compiled is the loss (policy forward, log-probs, entropy, the PPO objective):
Inductor turns it into generated C++ on CPU (Triton on CUDA) and AOTAutograd its
backward into one more graph, where eager launches each small op, and each op's
backward, one at a time. Compiling takes seconds to tens of seconds, cached across runs
in Inductor's cache (TORCHINDUCTOR_CACHE_DIR, default /tmp/torchinductor_USER): "auto"
compiles only when the eager update, projected over the rest of the run, takes
`AUTO_COMPILE_SECONDS` or more, and keeps the compiled loss only if its update is
faster than the eager one (bench/bench_update.py measures both); the plan records the
outcome. bfloat16 carries bf16 rounding into the update's new log-probabilities against
the float32 ones collection recorded; a small MLP's update is slower in bf16, big
matmuls and convolutions faster (bench_update.py --compare precision), hence "auto"
only where the CPU computes bf16 natively. A platform that cannot compile (no C++
compiler, an op Inductor lacks) prints one line and the run goes on eagerly. Compiled
kernels are deterministic run to run, but their bits differ from eager's (fused and
reordered float math): a seeded run reproduces exactly within one setting, not across
settings.
"""

from __future__ import annotations

import sys
import time
from typing import Callable

import torch

from puffercore.ppo.flat_adam import FlatAdam
from puffercore.ppo.mlp_gradients import LOSS_NAMES, MLPGradients
from puffercore.ppo.plan import UpdatePlan

# The eager update time, projected over the rest of a run, from which "auto" compiles:
# several times a cold compile on a 2-core machine, so that a 1.3x faster update repays
# it in that run.
AUTO_COMPILE_SECONDS = 120.0


class UpdateStep:
    """The minibatch step of one trainer: `loss(minibatch, by_rows, weights)` returns a
    dict of scalar tensors, "loss" (what is minimized) first; calling the step minimizes
    it and returns those scalars, detached, then the gradient norm of each parameter
    group before clipping, as one float32 tensor whose entries `names` names
    ("loss/loss", "loss/policy", ..., "loss/grad_norm_actor")."""

    def __init__(self, loss: Callable[..., dict[str, torch.Tensor]], policy: torch.nn.Module,
                 optimizer: FlatAdam, max_grad_norm: float, group, plan: UpdatePlan,
                 gradients: MLPGradients | None = None):
        if plan.native_gradients and gradients is None:
            raise ValueError("the plan's native gradients need the policy's MLPGradients")
        self.device_type = next(policy.parameters()).device.type
        self.plan = plan
        self.autocast_dtype = plan.autocast_dtype
        self.loss, self.policy, self.optimizer, self.group = loss, policy, optimizer, group
        self.max_grad_norm = max_grad_norm
        self.gradients = gradients if plan.native_gradients else None
        self.compiled: Callable | None = None
        self.compiled_sizes: set[int] = set()  # minibatch sizes compiled so far (one graph each)
        self.compile_seconds = 0.0  # first steps at each size, compiling included
        self.names: tuple[str, ...] = ()
        self.decided = plan.gradients.name != "auto"
        self.eager_seconds: float | None = None  # "auto": the first update's time
        self.timed_compiled = False
        if plan.gradients.name == "compiled":
            self.compile()

    def compile(self) -> None:
        self.compiled = torch.compile(self.loss, dynamic=False)

    def decide(self, seconds: float, updates_left: int) -> None:
        """Under "auto", after each update, which took `seconds`, until decided: the first
        (eager) update compiles the loss if `updates_left` more like it would take
        AUTO_COMPILE_SECONDS or more; the next update compiles; the one after, compiled,
        keeps it only if it was faster than the eager one (a large matmul-bound update
        can be slower compiled)."""
        if self.decided:
            return
        if self.eager_seconds is None:
            self.eager_seconds = seconds
            if seconds * updates_left >= AUTO_COMPILE_SECONDS and updates_left > 2:
                self.compile()
            else:
                self.decided = True
        elif self.compiled is None:  # compiling failed: eager it is
            self.decided = True
        elif not self.timed_compiled:
            self.timed_compiled = True  # that update compiled; time the next one
        else:
            self.decided = True
            if seconds >= self.eager_seconds:
                self.compiled = None
        if self.decided:
            self.plan.record_compile(self.compiled is not None, self.compile_seconds)

    def __call__(self, minibatch: dict[str, torch.Tensor], by_rows: bool,
                 weights: torch.Tensor | None) -> torch.Tensor:
        if self.gradients is not None:  # they exist only for transition minibatches (for_policy)
            return self._step(self.gradients, minibatch, by_rows, weights)
        if self.compiled is None:
            return self._step(self.loss, minibatch, by_rows, weights)
        size = len(minibatch["index"])
        if size in self.compiled_sizes:
            return self._step(self.compiled, minibatch, by_rows, weights)
        start = time.perf_counter()
        try:  # the first step at a size compiles its forward and backward graphs
            scalars = self._step(self.compiled, minibatch, by_rows, weights)
        except Exception as error:  # the platform cannot compile: the same step, eagerly
            self.compiled = None
            self.plan.record_compile(False, 0.0)
            reason = (str(error).strip().splitlines() or [""])[0][:200]
            print(f"puffercore: torch.compile failed ({type(error).__name__}: {reason}); "
                  f"the PPO update runs eagerly (--train.compile false skips compiling)", file=sys.stderr, flush=True)
            return self._step(self.loss, minibatch, by_rows, weights)
        self.compiled_sizes.add(size)
        self.compile_seconds += time.perf_counter() - start
        if self.plan.gradients.name == "compiled":
            self.plan.record_compile(True, self.compile_seconds)
        return scalars

    def _step(self, loss: Callable, minibatch, by_rows: bool, weights) -> torch.Tensor:
        if loss is self.gradients:  # hand-derived: it writes every parameter's gradient
            names, losses = LOSS_NAMES, self.gradients(minibatch)
        else:
            with torch.autocast(self.device_type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None):
                named = loss(minibatch, by_rows, weights)
            self.optimizer.zero_grad()
            named["loss"].backward()
            names, losses = tuple(named), torch.stack([value.detach().float() for value in named.values()])
        self.group.average_gradients(self.policy.parameters())
        # Clipped apart: the critic's gradients (returns in the hundreds) would otherwise
        # shrink the actor's to nothing under one global norm.
        norms = self.optimizer.clipped_step(self.max_grad_norm)
        if not self.names:
            self.names = tuple(f"loss/{name}" for name in (
                *names, *("grad_norm" + (group and "_" + group) for group in self.optimizer.gradients)))
        return torch.cat([losses, norms.to(losses.device)])

