"""Hyperparameter sweeps on Optuna (`puffercore sweep CONFIG`, the `sweep` extra); the
trials run in processes as puffercore.many_runs runs seeds.

    best = sweep("sweep.toml", trials=20, jobs=2)

A sweep's file is a config file (`puffercore train --config` reads it: env and settings,
puffercore.config_files) with a [sweep] table, its search space, keyed by the same
setting names (or in [sweep.GROUP] tables):

    env = "cartpole"
    total_timesteps = 200000

    [sweep]
    "train.learning_rate" = {low = 1e-4, high = 1e-2, log = true}   # floats (log scale)
    "train.update_epochs" = {low = 2, high = 8}                      # ints
    "policy.hidden_size" = [32, 64, 128]                             # one of a list

Each trial trains PPO into DIR/trial-N and reports its recent return (the mean of the
last 20 episodes) at REPORTS evenly spaced steps, where the median pruner stops trials
below the median of the others at that step; the trial's value is the recent return at
the end. Trials run in `jobs` processes that share one SQLite file (DIR/study.db), which
the same command resumes (`trials` counts the study's finished trials, earlier ones
included; a trial stopped by Ctrl-C runs again first) and `optuna-dashboard
sqlite:///DIR/study.db` shows. The best trial's config is written to
DIR/best_config.json, which `puffercore train --config` trains.

Runs go to processes started with SIGINT ignored: Ctrl-C (or SIGTERM) reaches the caller,
which asks every run to stop at its next update (each saves its checkpoint) and waits
for them; a second Ctrl-C ends them at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import math
import os
from typing import Any

from puffercore import ppo
from puffercore.checks import check_int
from puffercore.config_files import SWEEP_TABLE, field_of, file_form, read_file, settings_of
from puffercore.flags import deprecated, field_types, groups, is_value_of, setting_name
from puffercore.many_runs import Interrupted, threads_per_run, in_processes
from puffercore.ppo.config import PPOConfig
from puffercore.ppo.episodes import RECENT_EPISODES
from puffercore.seeding import derive_seed

REPORTS = 20
INSTALL = 'pip install "puffercore[sweep]"'
BEST_CONFIG = "best_config.json"


# ---- sweeps --------------------------------------------------------------------------------
def _optuna():
    try:
        import optuna
    except ImportError:
        raise ImportError(f"puffercore sweep needs Optuna, which is not installed: {INSTALL}") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the sweep prints a line per trial itself
    return optuna


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One swept field: a range (low, high, log, step; ints for an int field) or a list
    of choices."""
    field: str
    integer: bool = False
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple | None = None

    def suggest(self, trial) -> Any:
        if self.choices is not None:
            return trial.suggest_categorical(self.field, list(self.choices))
        if self.integer:
            return trial.suggest_int(self.field, self.low, self.high, step=self.step or 1, log=self.log)
        return trial.suggest_float(self.field, self.low, self.high, step=self.step, log=self.log)


def _entries(table: Any) -> dict[str, Any]:
    """A [sweep] table's entries by setting name: "GROUP.FIELD" keys and [sweep.GROUP] tables."""
    if not isinstance(table, dict) or not table:
        raise ValueError(f"the [{SWEEP_TABLE}] table must map settings to ranges or lists, got {table!r}")
    entries: dict[str, Any] = {}
    for key, value in table.items():
        nested = key in groups(PPOConfig) and isinstance(value, dict) and not {"low", "high"} & set(value)
        for name, item in ({f"{key}.{name}": item for name, item in value.items()} if nested else {key: value}).items():
            if name in entries:
                raise ValueError(f"[{SWEEP_TABLE}] {name} is searched twice")
            entries[name] = item
    return entries


def search_space(table: dict[str, Any], where: str = "the sweep file") -> list[Parameter]:
    """The Parameters of a [sweep] table; ValueError naming the entry that is wrong."""
    kinds, space, flat = field_types(PPOConfig), [], []
    for key, value in _entries(table).items():
        field = field_of(key, PPOConfig, f"{where}: [{SWEEP_TABLE}]", flat=flat)
        if any(parameter.field == field.name for parameter in space):
            raise ValueError(f"{where}: [{SWEEP_TABLE}] {setting_name(field)} is searched twice")
        kind = kinds[field.name]
        if isinstance(value, list):
            if not value or not all(is_value_of(choice, kind) for choice in value):
                raise ValueError(f"[{SWEEP_TABLE}] {key}: a list of choices must hold {kind.__name__}s, got {value!r}")
            space.append(Parameter(field.name, choices=tuple(value)))
            continue
        if not isinstance(value, dict) or not {"low", "high"} <= set(value) or set(value) - {"low", "high", "log", "step"}:
            raise ValueError(f"[{SWEEP_TABLE}] {key}: expected {{low = ..., high = ...}} (and log, step) or a list of "
                             f"choices, got {value!r}")
        low, high, log, step = value["low"], value["high"], value.get("log", False), value.get("step")
        if kind not in (int, float) or not all(is_value_of(number, kind) for number in (low, high, step or 1)):
            raise ValueError(f"[{SWEEP_TABLE}] {key}: a range needs bounds of the field's type ({kind.__name__}), got "
                             f"{value!r}" + ("" if kind in (int, float) else "; give a list of choices"))
        if not low < high or (log and low <= 0) or (step is not None and not step > 0) or not isinstance(log, bool):
            raise ValueError(f"[{SWEEP_TABLE}] {key}: need low < high (both > 0 with log = true), a positive step "
                             f"and log true or false, got {value!r}")
        space.append(Parameter(field.name, integer=kind is int, low=low, high=high, log=log, step=step))
    if flat:
        deprecated(f"{where}: [{SWEEP_TABLE}] bare names ({', '.join(flat)})", "the settings' names, e.g. "
                   "\"train.learning_rate\"")
    return space


@dataclasses.dataclass(frozen=True)
class Study:
    """What every process of a sweep needs: where, what to train and what to search."""
    storage: str
    name: str
    directory: str
    env: Any
    base: dict
    space: tuple
    pruner: str
    seed: int

    def load(self, job: int):
        """The study, in job `job`'s process: its sampler seeded by (seed, job, trials so
        far), so a resumed sweep draws new candidates rather than the first ones again."""
        optuna = _optuna()
        warmup = PPOConfig.for_env(self.env, **self.base).total_timesteps // 4  # a quarter of the run
        pruner = optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=warmup) \
            if self.pruner == "median" else optuna.pruners.NopPruner()
        storage = optuna.storages.RDBStorage(self.storage, engine_kwargs={"connect_args": {"timeout": 120}})
        study = optuna.load_study(study_name=self.name, storage=storage, pruner=pruner)
        study.sampler = optuna.samplers.TPESampler(
            seed=derive_seed(derive_seed(self.seed, job), len(study.get_trials(deepcopy=False))) % 2**32)
        return study


def sweep(path: str, trials: int, jobs: int = 1, directory: str | None = None, pruner: str = "median",
          seed: int = 0) -> dict:
    """Search the [sweep] space of the config file at `path` until the study in
    DIRECTORY/study.db (default sweeps/<file name>) has `trials` finished trials, `jobs`
    processes at once; writes DIRECTORY/best_config.json and returns {"storage",
    "finished", "pruned", "interrupted" (the number of the signal that stopped it, else
    0), "trial"} and, when a trial completed, the best
    one's {"value", "params", "config_path", "run_dir"} ("trial" None when none did)."""
    _optuna()  # first of all, naming the extra when Optuna is missing
    check_int(trials, "trials", 1)
    check_int(jobs, "jobs", 1)
    if pruner not in ("median", "none"):
        raise ValueError(f"pruner must be 'median' or 'none', got {pruner!r}")
    fields, extras = settings_of(read_file(path), PPOConfig, path, extra=("env", SWEEP_TABLE))
    if SWEEP_TABLE not in extras:
        raise ValueError(f"{path} has no [{SWEEP_TABLE}] table: the search space (see `puffercore sweep --help`)")
    space = search_space(extras[SWEEP_TABLE], path)
    env = extras.get("env")
    if not env or not isinstance(env, str):
        raise ValueError(f"{path} names no env (env = \"cartpole\", a gymnasium id or module:attribute)")
    base = {key: value for key, value in fields.items() if key not in ("run_dir", "quiet")}
    PPOConfig.for_env(env, **base).validate()  # the file's own fields, before any trial
    name = os.path.splitext(os.path.basename(path))[0]
    directory = directory or os.path.join("sweeps", name)
    os.makedirs(directory, exist_ok=True)
    shared = Study(f"sqlite:///{os.path.join(directory, 'study.db')}", name, directory, env, base, tuple(space),
                   pruner, seed)
    with _only_sweep_of(directory):
        return _sweep_in(shared, path, trials, jobs)


@contextlib.contextmanager
def _only_sweep_of(directory: str):
    """Hold DIRECTORY/lock while the sweep runs: a second sweep of the study is refused
    (so a trial left running by an ended sweep is known to be dead)."""
    with open(os.path.join(directory, "lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"another `puffercore sweep` is running on {directory}; wait for it, or give "
                             f"another --dir") from None
        yield


def _sweep_in(shared: Study, path: str, trials: int, jobs: int) -> dict:
    optuna = _optuna()
    study = optuna.create_study(study_name=shared.name, storage=shared.storage, direction="maximize",
                                load_if_exists=True)
    experiment = json.dumps({"env": shared.env, "base": shared.base,
                             "space": [dataclasses.asdict(parameter) for parameter in shared.space]}, sort_keys=True)
    if study.user_attrs.get("experiment", experiment) != experiment:
        raise ValueError(f"{shared.storage} holds a sweep of another config than {path} (its env, fields or search "
                         f"space changed since); give another --dir for a new study")
    study.set_user_attr("experiment", experiment)
    for stale in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        # left running by a sweep that was killed: failed, and its params queued to run again
        study.tell(stale.number, state=optuna.trial.TrialState.FAIL)
        study.enqueue_trial(stale.params)
    remaining, interrupted = trials - _finished(study), 0
    if remaining > 0:
        concurrency = min(jobs, remaining)
        shares = [remaining // concurrency + (job < remaining % concurrency) for job in range(concurrency)]
        threads = threads_per_run(PPOConfig.for_env(shared.env, **shared.base), concurrency)
        jobs_ended = in_processes(_sweep_job, {f"sweep job {job}": (shared, job, share, threads)
                                               for job, share in enumerate(shares)}, concurrency)
        interrupted = max([stopped for _, stopped in jobs_ended])  # a list: wait for every job
    return {**_write_best(shared, study), "interrupted": interrupted}


def _finished(study) -> int:
    optuna = _optuna()
    return len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,
                                                        optuna.trial.TrialState.PRUNED)))


def _sweep_job(shared: Study, job: int, trials: int, threads: int, stop) -> int:
    """Run `trials` trials (ask, train, tell), printing a line for each; the number of
    the signal that ended them early (`stop.value`), else 0."""
    optuna = _optuna()
    study = shared.load(job)
    for _ in range(trials):
        if stop.value:
            return stop.value
        trial = study.ask()
        params = {parameter.field: parameter.suggest(trial) for parameter in shared.space}
        described = ", ".join(f"{name}={value:.4g}" if isinstance(value, float) else f"{name}={value}"
                              for name, value in params.items())
        try:
            value = _objective(trial, params, shared, threads, stop)
        except optuna.TrialPruned as pruned:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            print(f"trial {trial.number}: {pruned} ({described})", flush=True)
        except Interrupted as interrupted:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            study.enqueue_trial(params)  # the same params again, first, when the sweep resumes
            print(f"trial {trial.number}: {interrupted} ({described})", flush=True)
            return interrupted.number
        except ValueError as error:  # a combination the config refuses, or a run too short to tell
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            print(f"trial {trial.number} failed: {error} ({described})", flush=True)
        else:
            study.tell(trial, value)
            print(f"trial {trial.number}: return {value:.2f} ({described}); best so far: trial "
                  f"{study.best_trial.number}, {study.best_value:.2f}", flush=True)
    return 0


def _objective(trial, params: dict, shared: Study, threads: int, stop) -> float:
    """Train the trial's config, reporting its recent return at REPORTS evenly spaced
    steps; the recent return at the end, or TrialPruned, or Interrupted (Ctrl-C)."""
    optuna = _optuna()
    run_dir = os.path.join(shared.directory, f"trial-{trial.number}")
    trial.set_user_attr("run_dir", run_dir)
    config = PPOConfig.for_env(shared.env, **{**shared.base, **params, "run_dir": run_dir, "quiet": True,
                                              "torch_threads": threads})
    milestones = [config.total_timesteps * k // REPORTS for k in range(1, REPORTS)]
    pruned = []

    def report(trainer) -> bool:
        while milestones and trainer.global_step >= milestones[0]:
            recent, step = trainer.recent_return(), milestones.pop(0)
            if recent is not None:
                trial.report(recent, step)
                if trial.should_prune():
                    pruned.append(f"pruned at {trainer.global_step:,} steps, recent return {recent:.2f}")
                    return True
        return bool(stop.value)

    trainer = ppo.train(config, shared.env, until=report)
    if pruned:
        raise optuna.TrialPruned(pruned[0])
    if trainer.update < trainer.num_updates:
        raise Interrupted(f"interrupted at {trainer.global_step:,} steps; its params run again on resume",
                          int(trainer.interrupted or stop.value))  # a signal to this process, or the caller's
    value = trainer.recent_return()
    if value is None or not math.isfinite(value):
        raise ValueError(f"no recent return after {trainer.global_step:,} steps (fewer than {RECENT_EPISODES} "
                         f"episodes ended): give more total_timesteps")
    return value


def _write_best(shared: Study, study) -> dict:
    """The study's counts and its best trial, whose config goes to DIRECTORY/best_config.json
    (the file's env and fields with the trial's params; no best without a completed trial)."""
    optuna = _optuna()
    completed = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    counts = {"storage": shared.storage, "finished": _finished(study), "pruned": _finished(study) - len(completed)}
    if not completed:
        return {**counts, "trial": None}
    best = study.best_trial
    config_path = os.path.join(shared.directory, BEST_CONFIG)
    with open(config_path, "w") as file:
        json.dump(file_form({**shared.base, **best.params}, PPOConfig, env=shared.env), file, indent=2)
    return {**counts, "value": best.value, "params": best.params, "trial": best.number, "config_path": config_path,
            "run_dir": best.user_attrs.get("run_dir")}
