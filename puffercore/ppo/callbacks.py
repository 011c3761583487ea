"""Callbacks: your code, called by `ppo.train` during a run (Python only).

    class StopWhenSolved(ppo.Callback):
        def on_eval(self, trainer, result, metrics):
            metrics["eval/solved"] = float(result.metrics["eval/mean_return"] >= 475)
            if metrics["eval/solved"]:
                return False                      # stop: a checkpoint is saved, the run resumable

    ppo.train(config, "cartpole", callbacks=[StopWhenSolved()])

Subclass `Callback` and override the hooks you need (any object with some of these
methods works). The hooks of one update, in order:

- `on_rollout_end(trainer)`: the rollout is full (`trainer.rollout`), before the update
  learns from it.
- `on_eval(trainer, result, metrics)`: after an evaluation (`eval_interval`; only then):
  `result` is a `ppo.evaluation.EvalResult` (update, global_step, the episodes' returns
  and lengths, whether it is the best so far and went to best.pt, the video's path);
  `metrics` holds the eval/* scalars about to be logged: add your own to it.
- `on_update_end(trainer, metrics)`: the update is done (`trainer.update`,
  `trainer.global_step`, `trainer.losses`, `trainer.recent_return()`); scalars you put
  in `metrics` are logged with the next metrics row (CSV, TensorBoard, W&B).

`trainer` is the live `ppo.Trainer`: read it (config, policy, run_dir, ...); what you
change in it changes the run. A hook that returns False (exactly False: None and other
values go on) stops training at the end of the update in progress, as Ctrl-C does: the
update finishes, a checkpoint is saved (`ppo.train(resume=trainer.run_dir)` continues
the run) and `trainer.stopped_by` names the callback's class. An exception a hook raises
ends the run as any error does, with the last periodic checkpoint. Under torchrun every
rank calls on_rollout_end and on_update_end (rank 0's stop decision counts, only rank
0's metrics are logged) and rank 0 alone evaluates and calls on_eval.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

HOOKS = ("on_rollout_end", "on_update_end", "on_eval")


class Callback:
    """Does nothing at every hook; override the ones you need (the module docstring)."""

    def on_rollout_end(self, trainer) -> bool | None:
        return None

    def on_update_end(self, trainer, metrics: dict[str, float]) -> bool | None:
        return None

    def on_eval(self, trainer, result, metrics: dict[str, float]) -> bool | None:
        return None


class Until(Callback):
    """`ppo.train(until=f)`: f(trainer) is asked after each update; True stops the run."""

    def __init__(self, until: Callable[[Any], bool]):
        self.until = until

    def on_update_end(self, trainer, metrics: dict[str, float]) -> bool | None:
        return False if self.until(trainer) else None


class CallbackList:
    """The callbacks of one run, called in the order given; the scalars they add wait in
    `metrics` for the next logged row, and `stopped_by` names the first that asked to
    stop."""

    def __init__(self, callbacks: Iterable[Any] = ()):
        self.callbacks = list(callbacks)
        for callback in self.callbacks:
            if isinstance(callback, type):
                raise TypeError(f"callbacks must be instances, got the class {callback.__name__}: "
                                f"pass {callback.__name__}()")
            if not any(callable(getattr(callback, hook, None)) for hook in HOOKS):
                raise TypeError(f"a callback needs at least one of the hooks {', '.join(HOOKS)} "
                                f"(subclass ppo.Callback), got {callback!r}")
        self.metrics: dict[str, float] = {}
        self.stopped_by: str | None = None

    def rollout_end(self, trainer) -> None:
        self._call("on_rollout_end", trainer)

    def update_end(self, trainer) -> None:
        self._call("on_update_end", trainer, self.metrics)

    def evaluated(self, trainer, result) -> None:
        """on_eval with the evaluation's own scalars, which then wait with the others."""
        self._call("on_eval", trainer, result, result.metrics)
        self.metrics.update(result.metrics)

    def take_metrics(self) -> dict[str, float]:
        metrics, self.metrics = self.metrics, {}
        return metrics

    def _call(self, hook: str, trainer, *arguments) -> None:
        for callback in self.callbacks:
            method = getattr(callback, hook, None)
            if method is not None and method(trainer, *arguments) is False and self.stopped_by is None:
                self.stopped_by = type(callback).__name__
