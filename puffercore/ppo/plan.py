"""How a PPO run updates and collects: the one place that picks the paths, each with its
reason, from the policy, the config, the device and the CPU.

    plan = UpdatePlan.make(policy, config, device)    # once, in Trainer's setup
    plan.gradients.name    # "native", "graphed", "eager", "compiled" or "auto" (compile decided after the first update)
    print(plan.summary())  # one line a path: "gradients  native  (default MLP, separate actor and critic, ...)"
    plan.as_dict()         # what config.json keeps beside the config ("plan")

The paths (puffercore.ppo.update's table says what each runs):
- gradients: `native` (the loss and its gradients written out in C: ppo.mlp_gradients),
  `graphed` (on CUDA, autograd's minibatch step captured as one CUDA graph and replayed:
  ppo.graphed), or autograd `eager`, `compiled` (torch.compile) or `auto` (compiled
  after the first update where the rest of the run repays it: `record_compile` notes
  the outcome);
- precision: the update's float32 or bfloat16 (autocast);
- optimizer: `native` (FlatAdam's clipped step in one C call), `fused` (torch's fused
  Adam kernel) or `plain` (torch.optim.Adam's step, where this torch has no fused
  kernel for the device);
- collection: `native` (the policy's forward and sampling in C: ppo.native_mlp), `device`
  (on CUDA: the rollout stays on the device, the forward and sampling are a CUDA graph:
  ppo.device_rollout) or `torch` (the policy's forward, the rollout written from the host).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from puffercore.precision import PRECISIONS, native_bf16
from puffercore.ppo import native_mlp

COMPILE_SETTINGS = ("auto", "true", "false")
NATIVE_STEP_MAX_PARAMETERS = 1 << 18  # FlatAdam's native clipped step up to this many parameters


@dataclasses.dataclass(frozen=True)
class Choice:
    """One path and why: `reason` is a short phrase a person reads."""

    name: str
    reason: str


@dataclasses.dataclass
class UpdatePlan:
    gradients: Choice
    precision: Choice
    optimizer: Choice
    collection: Choice
    compiled: bool | None = None  # compile "auto": whether the loss ended compiled, once decided
    compile_seconds: float = 0.0

    @classmethod
    def make(cls, policy: torch.nn.Module, config, device: torch.device | str, world_size: int = 1) -> "UpdatePlan":
        """The plan for `policy` (on its device) under `config` (a PPOConfig), trained by
        `world_size` processes."""
        device = torch.device(device)
        if config.compile not in COMPILE_SETTINGS:
            raise ValueError(f"compile must be one of {list(COMPILE_SETTINGS)}, got {config.compile!r}")
        coverage = native_mlp.unsupported(policy)
        precision = precision_choice(config.precision, device)
        parameters = policy.parameters()
        first = next(parameters)
        count = first.numel() + sum(parameter.numel() for parameter in parameters)
        gradients = gradients_choice(config, device, precision, coverage)
        if device.type == "cuda":
            recurrent = policy.initial_state(1, "cpu") is not None
            gradients = graph_choice(gradients, config, recurrent, world_size, precision)
        return cls(gradients=gradients,
                   precision=precision,
                   optimizer=optimizer_choice(count, device, first.dtype),
                   collection=collection_choice(config, device, coverage, is_recurrent(policy)))

    @property
    def native_gradients(self) -> bool:
        return self.gradients.name == "native"

    @property
    def graphed(self) -> bool:
        return self.gradients.name == "graphed"

    @property
    def native_collection(self) -> bool:
        return self.collection.name == "native"

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """The update's autocast dtype (None: float32, no autocast)."""
        return torch.bfloat16 if self.precision.name == "bfloat16" else None

    def record_compile(self, compiled: bool, seconds: float) -> None:
        """The outcome of compile "auto" (or of a compile that failed), once known."""
        self.compiled, self.compile_seconds = compiled, seconds

    def as_dict(self) -> dict[str, Any]:
        record = {part: dataclasses.asdict(getattr(self, part)) for part in PARTS}
        if self.compiled is not None:
            record["compiled"] = self.compiled
        return record

    def summary(self) -> str:
        """One line a path, for the start of a run."""
        width = max(map(len, PARTS))
        lines = [f"  {part:<{width}}  {getattr(self, part).name}  ({getattr(self, part).reason})" for part in PARTS]
        return "update plan:\n" + "\n".join(lines)


PARTS = ("gradients", "precision", "optimizer", "collection")


def precision_choice(precision: str, device: torch.device) -> Choice:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {list(PRECISIONS)}, got {precision!r}")
    if precision != "auto":
        return Choice(precision, f"precision={precision}")
    if device.type != "cpu":
        return Choice("float32", f"auto, on {device.type} float32")
    if native_bf16():
        return Choice("bfloat16", "auto, this CPU computes bf16 natively")
    return Choice("float32", "auto, this CPU has no native bf16")


def gradients_choice(config, device: torch.device, precision: Choice, coverage: str | None) -> Choice:
    """The hand-written gradients where nothing rules them out, else autograd as
    `config.compile` says; the reason names the first thing that ruled them out."""
    autograd = {"true": "compiled", "false": "eager", "auto": "auto"}[config.compile]
    if config.backward == "autograd":
        veto = "backward=autograd"
    elif device.type != "cpu":
        veto = f"device {device} (the hand path runs on the CPU)"
    elif precision.name != "float32":
        veto = f"precision {precision.name} ({precision.reason})"
    elif config.compile == "true":
        veto = "compile=true"
    elif config.prio_alpha > 0:
        veto = "prioritized rows (prio_alpha > 0) weight the loss"
    elif coverage is not None:
        veto = coverage
    else:
        return Choice("native", "default MLP, separate actor and critic, one Discrete or Box action, float32 on CPU")
    return Choice(autograd, f"{veto} rules out the hand path")


def graph_choice(autograd: Choice, config, recurrent: bool, world_size: int, precision: Choice) -> Choice:
    """On CUDA, autograd's update under compile "auto" as one captured CUDA graph
    (ppo.graphed), where the update is one it covers: "auto" picks the fastest way to run
    the update on its device, and on a GPU, bound by the host launching small kernels,
    that is the graph. compile "false" keeps it eager (the way to turn capture off),
    "true" asks for torch.compile instead."""
    if config.compile == "false":
        return Choice(autograd.name, f"{autograd.reason}; compile=false: no CUDA graph")
    if config.compile == "true":
        return Choice(autograd.name, f"{autograd.reason}; compile=true: torch.compile rather than a CUDA graph")
    from puffercore.ppo import graphed  # here: graphed imports flat_adam, which imports this module

    veto = graphed.unsupported(config, recurrent, world_size, autocast=precision.name != "float32")
    if veto is not None:
        return Choice(autograd.name, f"{autograd.reason}; no CUDA graph: {veto}")
    return Choice("graphed", "on cuda, the minibatch step captured as one CUDA graph (compile=auto; "
                             "--train.compile false runs it eagerly)")


def optimizer_choice(parameters: int, device: torch.device, dtype: torch.dtype) -> Choice:
    """FlatAdam's step for `parameters` numbers of `dtype` on `device`: the native clipped
    step for small float32 policies on the CPU, where the launches around the arithmetic
    cost most; a big one's step is arithmetic that torch's kernel spreads over threads."""
    device = torch.device(device)
    if device.type == "cpu" and dtype == torch.float32 and parameters <= NATIVE_STEP_MAX_PARAMETERS:
        return Choice("native", f"{parameters} float32 parameters on the CPU (up to 2^18)")
    where = f"{parameters} {str(dtype).removeprefix('torch.')} parameters on {device.type}"
    if fused_adam_supported(device):
        return Choice("fused", where)
    return Choice("plain", f"{where}; this torch has no fused Adam there")


TORCH_VERSION = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])


def fused_adam_supported(device: torch.device | str) -> bool:
    """Does this torch's Adam have a fused kernel for `device`? CUDA's since torch 2.0,
    the CPU's since 2.4 (asking torch.optim.Adam itself would import torch._dynamo)."""
    kind = torch.device(device).type
    return kind == "cuda" or (kind == "cpu" and TORCH_VERSION >= (2, 4))


def is_recurrent(policy: torch.nn.Module) -> bool:
    """Whether `policy` carries a recurrent state (an ActorCritic whose initial state is not None)."""
    initial_state = getattr(policy, "initial_state", None)
    return initial_state is not None and initial_state(1, "cpu") is not None


def collection_choice(config, device: torch.device, coverage: str | None, recurrent: bool = False) -> Choice:
    if config.inference == "torch":
        return Choice("torch", "inference=torch")
    if device.type == "cuda":
        if recurrent:
            return Choice("torch", f"device {device}; a recurrent policy's state goes row by row (the device "
                                   f"rollout takes feed-forward policies)")
        return Choice("device", f"device {device}: the rollout on it, observations in through pinned memory, "
                                f"the forward and sampling one CUDA graph")
    if device.type != "cpu":
        return Choice("torch", f"device {device} (the native forward runs on the CPU)")
    if coverage is not None:
        return Choice("torch", f"{coverage} rules out the native forward")
    return Choice("native", "default MLP, separate actor and critic, float32 on CPU")
