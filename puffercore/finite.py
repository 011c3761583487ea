"""NaN and inf caught where they appear, so that none reaches a checkpoint: the trainers
record each training step's scalars (losses, gradient norms) on their device and look at
them once per update, and `puffercore.checkpoint.save` refuses a state that holds any.

    scalars = StepScalars()
    for minibatch in minibatches:
        ...
        scalars.record({"loss/policy": policy_loss.detach(), "loss/grad_norm": norm})   # no wait for the device
    bad = scalars.first_non_finite()          # the one host sync: (step, name, value) or None
    means = scalars.means()
"""

from __future__ import annotations

import math

import torch


class NonFiniteError(ValueError):
    """A NaN or inf where training needs finite numbers; the message names the quantity,
    where it appeared and the checkpoint that is kept."""

    @classmethod
    def in_run(cls, where: str, problem: str, last_checkpoint: str | None) -> "NonFiniteError":
        """The error that ends a run: `where` (e.g. "update 7"), `problem` (what is NaN or
        inf), `last_checkpoint` (its path and step, or None when none was written)."""
        kept = (f"the last checkpoint, {last_checkpoint}, is kept as it was" if last_checkpoint
                else "no checkpoint was written")
        return cls(f"{where}: {problem}; the run stops here: {kept}")


class StepScalars:
    """Named scalar tensors of every step of an update, kept on their device until the
    update ends, so that watching them costs no host sync per step. Every step records
    the same names."""

    def __init__(self):
        self.names: tuple[str, ...] = ()
        self._steps: list[torch.Tensor] = []
        self._values: list[list[float]] | None = None  # every step's values, read once

    def record(self, scalars: dict[str, torch.Tensor]) -> None:
        self.record_row(tuple(scalars), torch.stack(list(scalars.values())))

    def record_row(self, names: tuple[str, ...], values: torch.Tensor) -> None:
        """One step's scalars as one tensor, `values[i]` named `names[i]`."""
        if not self._steps:
            self.names = names
        self._steps.append(values)
        self._values = None

    def _read(self) -> list[list[float]]:
        """Every step's values on the host: one transfer however many steps and names."""
        if self._values is None:
            self._values = torch.stack(self._steps).double().tolist() if self._steps else []
        return self._values

    def first_non_finite(self) -> tuple[int, str, float] | None:
        """(step, name, value) of the first NaN or inf: the earliest step, and within it
        the first name in recording order; None when every value is finite."""
        for step, values in enumerate(self._read()):
            for column, value in enumerate(values):
                if not math.isfinite(value):
                    return step, self.names[column], value
        return None

    def means(self) -> dict[str, float]:
        """Each name's mean over the recorded steps."""
        steps = self._read()
        return {name: math.fsum(values) / len(steps) for name, values in zip(self.names, zip(*steps))}
