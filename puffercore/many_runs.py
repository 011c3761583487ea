"""Many PPO runs in processes of their own: seeds side by side (`puffercore train ENV
--seeds 1 2 3`), and the process pool the sweeps run their trials in (puffercore.sweep).

    results = train_seeds(PPOConfig.for_env("cartpole"), "cartpole", seeds=[1, 2, 3])
    print(seeds_summary(results))              # the final return's mean and spread over seeds

Runs go to processes started with SIGINT ignored: Ctrl-C (or SIGTERM) reaches the caller,
which asks every run to stop at its next update (each saves its checkpoint) and waits
for them; a second Ctrl-C ends them at once.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import multiprocessing.connection
import os
import signal
import statistics
import sys
import traceback
from typing import Any, Callable, Iterator

from puffercore import ppo, run
from puffercore.checks import check_int
from puffercore.ppo.config import PPOConfig
from puffercore.ppo.episodes import RECENT_EPISODES
from puffercore.vector.processes import interrupts_ignored


# ---- runs in processes -------------------------------------------------------------------
class Interrupted(Exception):
    """A run a signal stopped early (its checkpoint saved); `number` is the signal's."""

    def __init__(self, message: str, number: int):
        super().__init__(message)
        self.number = number


@dataclasses.dataclass(frozen=True)
class Failed:
    """A run that raised or whose process died, as `in_processes(..., keep_going=True)`
    yields it: `error` says why in one line (the input the run refused; a bug's error and
    the place it was raised; the exit code of a process that died)."""
    error: str


def in_processes(function: Callable, runs: dict[str, tuple], concurrency: int,
                 keep_going: bool = False) -> Iterator[tuple[str, Any]]:
    """`function(*arguments, stop)` for each name: arguments of `runs`, each in a process of
    its own, at most `concurrency` at once; yields (name, result) as they end.
    `stop.value` (shared memory, 0 until then) becomes the number of a SIGINT or SIGTERM
    received here (`run.StopSignals`): runs end at their next update, no new one starts;
    a second Ctrl-C ends them at once. A run
    that raised raises here, naming it: a ValueError or ImportError (input the run
    refused) as a ValueError, anything else as a RuntimeError with its traceback; with
    `keep_going`, it is yielded as a `Failed` instead and the other runs go on."""
    context = multiprocessing.get_context("spawn")
    stop = context.Value("i", 0)
    waiting = list(runs.items())
    running: dict[Any, tuple[str, Any]] = {}  # connection -> (name, process)
    try:
        with run.StopSignals("update") as signals:
            while waiting or running:
                while waiting and len(running) < concurrency and not stop.value:
                    name, arguments = waiting.pop(0)
                    receiver, sender = context.Pipe(duplex=False)
                    process = context.Process(target=_child, args=(function, (*arguments, stop), sender))
                    with interrupts_ignored():  # Ctrl-C reaches the whole group: `stop` is how runs hear of it
                        process.start()
                    sender.close()
                    running[receiver] = (name, process)
                if not running:
                    break
                ready = multiprocessing.connection.wait(list(running), timeout=0.2)
                if signals.signal is not None:
                    stop.value = int(signals.signal)
                for receiver in ready:
                    name, process = running.pop(receiver)
                    try:
                        kind, value = receiver.recv()
                    except EOFError:
                        kind, value = "died", f"its process died with exit code {process.exitcode}"
                    process.join()
                    if kind == "ok":
                        yield name, value
                        continue
                    summary, details = value if kind == "error" else (value, value)  # a bug's: (one line, traceback)
                    if not keep_going:  # a config or input the run refused: one line; anything else: its traceback
                        raise (ValueError if kind == "refused" else RuntimeError)(f"{name} failed: {details}")
                    yield name, Failed(summary)
    finally:
        for _, process in running.values():
            process.terminate()
            process.join()


def _one_line(error: BaseException) -> str:
    """An error and the place it was raised, e.g. "RuntimeError: boom (my_env.py:12, in step)"."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" ({os.path.basename(frames[-1].filename)}:{frames[-1].lineno}, in {frames[-1].name})" if frames else ""
    return f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}{where}"


def _child(function: Callable, arguments: tuple, sender) -> None:
    try:
        sender.send(("ok", function(*arguments)))
    except (ValueError, ImportError) as error:
        sender.send(("refused", f"{type(error).__name__}: {error}"))
    except Exception as error:  # noqa: BLE001 -- the caller raises it (or with keep_going yields it), naming the run
        sender.send(("error", (_one_line(error), traceback.format_exc())))


def threads_per_run(config: PPOConfig, concurrency: int) -> int:
    """torch threads of one of `concurrency` runs at once: the config's, or a share of the cores."""
    return config.torch_threads or max(1, (os.cpu_count() or 1) // concurrency)


# ---- seeds ---------------------------------------------------------------------------------
def train_seeds(config: PPOConfig, env: Any, seeds: list[int], jobs: int | None = None,
                policy: Any = None) -> list[dict]:
    """Train `config` on `env` (with `policy`, as `ppo.train` takes it: a class or a
    module:attribute the run processes can import) once per seed, `jobs` runs at once (default: all), each in
    the config's RUN_DIR-seedS, else in runs/ENV-SEED-TIME as any run; returns per seed
    {"seed", "run_dir", "recent_return", "summary", "interrupted" (the number of the
    signal that stopped it early, else 0), "error" (None, or one line saying why the run
    failed)} in seed order, and prints each run's summary line as it ends. A seed that
    fails (an error in the env, its process killed) is said in one line as it ends, and
    the other seeds go on."""
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, at least one, got {seeds}")
    jobs = len(seeds) if jobs is None else check_int(jobs, "jobs", 1)
    threads = threads_per_run(config, min(jobs, len(seeds)))
    configs = {f"seed {seed}": dataclasses.replace(config, seed=seed, run_dir=config.run_dir and
                                                    f"{config.run_dir}-seed{seed}", quiet=True, torch_threads=threads)
               for seed in seeds}
    for one in configs.values():
        one.validate()
    results = {}
    runs = {name: (one, env, policy) for name, one in configs.items()}
    for name, result in in_processes(_train_one_seed, runs, jobs, keep_going=True):
        if isinstance(result, Failed):
            print(f"{name} failed: {result.error}", file=sys.stderr, flush=True)
            result = {"seed": configs[name].seed, "run_dir": configs[name].run_dir or None, "recent_return": None,
                      "summary": None, "interrupted": 0, "error": result.error}
        else:
            print(f"{name}: {result['summary']}", flush=True)
        results[result["seed"]] = result
    return [results[seed] for seed in seeds if seed in results]


def _train_one_seed(config: PPOConfig, env: Any, policy: Any, stop) -> dict:
    trainer = ppo.train(config, env, until=lambda _: bool(stop.value), policy=policy)
    if trainer.interrupted is None and stop.value and trainer.update < trainer.num_updates:
        trainer.interrupted = signal.Signals(stop.value)  # the caller's signal: the summary says how to resume
    return {"seed": config.seed, "run_dir": trainer.run_dir, "recent_return": trainer.recent_return(),
            "summary": ppo.summary(trainer), "interrupted": int(trainer.interrupted or 0), "error": None}


def seeds_summary(results: list[dict]) -> str:
    """The final return over seeds (mean, standard deviation, min and max), and each
    seed's, a failed one marked as such."""
    returns = [result["recent_return"] for result in results if result["recent_return"] is not None]
    failed = [result["seed"] for result in results if result["error"]]
    each = ", ".join(f"{result['seed']}: " + ("FAILED" if result["error"] else "none" if result["recent_return"] is None
                                              else f"{result['recent_return']:.2f}") for result in results)
    seeds = " ".join(str(result["seed"]) for result in results)
    if not returns:
        summary = f"seeds {seeds}: no run ended {RECENT_EPISODES} episodes, so none has a final return"
    else:
        spread = statistics.stdev(returns) if len(returns) > 1 else 0.0
        summary = (f"seeds {seeds}: final return (mean of each run's last {RECENT_EPISODES} episodes) "
                   f"{statistics.mean(returns):.2f} +- {spread:.2f} (std over {len(returns)} seeds), "
                   f"min {min(returns):.2f}, max {max(returns):.2f}")
    stopped = sum(bool(result["interrupted"]) for result in results)
    return (summary + f"; by seed {each}" + (f"; {stopped} interrupted before the end" if stopped else "")
            + (f"; {len(failed)} failed (seed {', '.join(map(str, failed))}): see the lines above" if failed else ""))
