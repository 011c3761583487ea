"""The PPO minibatch step replayed as one CUDA graph: forward, loss, backward, per-group
clipping and Adam, launched as a single graph instead of a few hundred small kernels
(on a GPU the eager update is bound by the host launching them).

    step = GraphedStep(policy, optimizer, config)   # optimizer: the run's FlatAdam
    for minibatch in iterate_minibatches(...):      # transition minibatches (not by_rows)
        step(minibatch)                             # copies into static buffers, replays
    means = step.read()                             # {"loss/loss": ..., "loss/grad_norm": ...}: one transfer

What a graph needs, and how this step provides it:
- every tensor at a fixed address: the minibatch is copied into static buffers, the
  parameters and gradients are FlatAdam's flat buffers (the gradients are views that
  backward accumulates into in place), and the statistics are summed into one device
  tensor that `read` takes once per update;
- nothing read back to the host inside the step: the learning rate and the entropy
  coefficient live in device tensors, so annealing them changes no graph (a float the
  trainer writes into the optimizer's group is copied into that tensor at the next
  step), and Adam runs with `capturable` state;
- warm-up before capture: the first WARMUP_STEPS minibatches run eagerly (on a side
  stream on CUDA) and count as the real steps they are; the next one shaped as the
  first is captured and replayed, and every later one of that shape replays. A
  minibatch of another size (the last, smaller one) or other fields runs the same step
  eagerly.

Where capture fails (no CUDA device, an op that syncs with the host) one line says why
on stderr and every step runs eagerly: the same arithmetic, launched op by op.
`capture=False` runs eagerly from the start without that line (what the CPU tests
compare against the trainer's eager update).

Not covered, for the plan to keep on the eager `UpdateStep`: recurrent or prioritized
(by_rows) minibatches, importance weights, more than one process (the gradient
all-reduce), `target_kl` (it reads the KL back after each minibatch), autocast, and the
native (C) gradients. `unsupported` names the first that applies.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from puffercore.ppo.flat_adam import FlatAdam
from puffercore.ppo.loss import ppo_loss

# Eager steps before capture: lazily made state (Adam's moments, cuBLAS workspaces,
# autograd's buffers) must exist before the graph records their addresses.
WARMUP_STEPS = 3


def unsupported(config, recurrent: bool, world_size: int, autocast: bool) -> str | None:
    """Why the graphed step cannot run this update (a short phrase), or None."""
    reasons = [
        (recurrent, "recurrent policies replay whole rows"),
        (config.prio_alpha > 0, "prioritized replay samples rows with weights"),
        (world_size > 1, "the gradients are averaged across processes"),
        (bool(config.target_kl), "target_kl reads the KL back after each minibatch"),
        (autocast, "the update runs under autocast"),
    ]
    return next((reason for applies, reason in reasons if applies), None)


class _Coefficients:
    """The PPO config as ppo_loss reads it, with the entropy coefficient a device
    tensor (a float would be baked into the graph)."""

    def __init__(self, config, ent_coef: torch.Tensor):
        self._config, self.ent_coef = config, ent_coef

    def __getattr__(self, name: str) -> Any:
        return getattr(self._config, name)


class GraphedStep:
    """PPO minibatch steps of `policy` with `optimizer` (the FlatAdam over it) under
    `config` (a PPOConfig: clip_coef, vf_coef, ent_coef, norm_adv, clip_vloss,
    max_grad_norm, learning_rate). The optimizer's group gets a device learning rate and
    capturable state; its flat parameters and gradients stay where they are."""

    def __init__(self, policy: torch.nn.Module, optimizer: FlatAdam, config, capture: bool = True):
        self.policy, self.optimizer, self.config = policy, optimizer, config
        self.device = optimizer.flat.device
        group = optimizer.param_groups[0]
        self.lr = torch.tensor(float(group["lr"]), dtype=torch.float32, device=self.device)
        self.ent_coef = torch.tensor(float(config.ent_coef), dtype=torch.float32, device=self.device)
        group["lr"] = self.lr
        group["capturable"] = self.device.type == "cuda"  # torch's Adam allows it on accelerators only
        self._coefficients = _Coefficients(config, self.ent_coef)
        # The action head's CPU constants (Discrete starts) would be copied to the
        # device inside the step: a pageable host copy, which capture refuses.
        head = getattr(policy, "head", None)
        if head is not None and isinstance(getattr(head, "start", None), torch.Tensor):
            head.start = head.start.to(self.device)
        self.capture = capture
        self.mode = "warming up" if capture else "eager"
        self.names: tuple[str, ...] = ()
        self.steps = 0  # since the last read
        self._totals: torch.Tensor | None = None
        self._static: dict[str, torch.Tensor] | None = None
        self._layout: tuple | None = None  # the captured minibatch's names, shapes and dtypes
        self._graph = None
        self._warmed = 0

    def set_hyperparameters(self, lr: float | None = None, ent_coef: float | None = None) -> None:
        """New values for the next steps, written into the device tensors (no recapture)."""
        if lr is not None:
            self.lr.fill_(lr)
        if ent_coef is not None:
            self.ent_coef.fill_(ent_coef)

    def __call__(self, minibatch: dict[str, torch.Tensor]) -> None:
        """One step on `minibatch` (its "index" is ignored); the statistics are summed
        on the device."""
        group = self.optimizer.param_groups[0]
        if group["lr"] is not self.lr:  # annealed as a float, or a loaded state (`portable`) replaced the group
            self.lr.fill_(float(group["lr"]))
            group["lr"], group["capturable"] = self.lr, self.device.type == "cuda"
        fields = {name: tensor for name, tensor in minibatch.items() if name != "index"}
        if self.mode == "graphed" and self._fits(fields):
            for name, tensor in fields.items():
                self._static[name].copy_(tensor, non_blocking=True)
            self._graph.replay()
        elif self.mode == "warming up":
            self._warm_up(fields)
        else:
            self._step(fields)
        self.steps += 1

    def read(self) -> dict[str, float]:
        """The means of the statistics over the steps since the last read (one transfer),
        by name; {} before any step."""
        if not self.steps:
            return {}
        means = (self._totals / self.steps).tolist()
        self._totals.zero_()
        self.steps = 0
        return dict(zip(self.names, means))

    # ---- the step ---------------------------------------------------------------------
    def _step(self, fields: dict[str, torch.Tensor]) -> None:
        """Loss, backward, clip, Adam, and the statistics added to the totals: what is
        captured, and what runs eagerly."""
        out = self.policy.output(fields["obs"])
        new_log_prob, entropy = self.policy.evaluate(out, fields["action"])
        named = ppo_loss(new_log_prob, entropy, out.value, fields, self._coefficients)
        self.optimizer.zero_grad()
        named["loss"].backward()
        norms = self.optimizer.clipped_step(self.config.max_grad_norm)
        values = torch.cat([torch.stack([value.detach().float() for value in named.values()]), norms.float()])
        if self._totals is None:
            self.names = tuple(f"loss/{name}" for name in (
                *named, *("grad_norm" + (group and "_" + group) for group in self.optimizer.gradients)))
            self._totals = torch.zeros_like(values)
        self._totals.add_(values)

    def _fits(self, fields: dict[str, torch.Tensor]) -> bool:
        return _layout(fields) == self._layout

    def _warm_up(self, fields: dict[str, torch.Tensor]) -> None:
        if self._layout is None:  # the first minibatch's shapes are the ones captured
            self._layout = _layout(fields)
        if self._warmed < WARMUP_STEPS or not self._fits(fields):  # an odd one (the last, smaller) is not captured
            self._warmed += 1
            if self.device.type != "cuda":
                self._step(fields)
                return
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                self._step(fields)
            torch.cuda.current_stream(self.device).wait_stream(side)
            return
        try:
            self._capture(fields)
        except Exception as error:  # the platform or an op refused: the same step, eagerly
            self._graph, self._static, self.mode = None, None, "eager"
            reason = (str(error).strip().splitlines() or [""])[0][:160]
            print(f"puffercore: CUDA graph capture of the PPO update failed ({type(error).__name__}: {reason}); "
                  f"the update runs eagerly", file=sys.stderr, flush=True)
            self._step(fields)
            return
        self.mode = "graphed"
        self._graph.replay()

    def _capture(self, fields: dict[str, torch.Tensor]) -> None:
        """Record the step on static copies of `fields`; runs nothing (replay does)."""
        graph = torch.cuda.CUDAGraph()
        self._static = {name: tensor.clone() for name, tensor in fields.items()}
        torch.cuda.current_stream(self.device).synchronize()
        with torch.cuda.graph(graph):
            self._step(self._static)
        self._graph = graph


def portable(state_dict: dict[str, Any]) -> dict[str, Any]:
    """An optimizer state_dict as a fresh FlatAdam keeps it, whatever a GraphedStep set:
    the learning rate a float and capturable off, so that a checkpoint saved on cuda
    resumes on the CPU too (a GraphedStep sets both again at its next step)."""
    groups = [{**group, "lr": float(group["lr"]), "capturable": False} for group in state_dict["param_groups"]]
    return {**state_dict, "param_groups": groups}


def _layout(fields: dict[str, torch.Tensor]) -> tuple:
    return tuple((name, tensor.shape, tensor.dtype) for name, tensor in fields.items())
