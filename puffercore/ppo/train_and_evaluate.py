"""Running PPO: `train` (a run directory with metrics, checkpoints and resume) and
`evaluate` (a checkpoint's policy playing episodes).

    trainer = train(PPOConfig.for_env("cartpole"), "cartpole")
    trainer = train({"total_timesteps": 1_000_000}, resume="runs/cartpole-...")   # extend a run
    returns = evaluate("runs/cartpole-...", episodes=10)
    returns = evaluate("runs/cartpole-...", episodes=3, video="cartpole.mp4")   # and a video of them

Checkpoints are taken at rollout boundaries every `checkpoint_interval` updates, at the
end, and when SIGINT (Ctrl-C) or SIGTERM asks the run to stop (`run.StopSignals`: the
update in progress is finished first, on every rank together), or a callback does
(`ppo.callbacks`); they hold model, optimizer, RNG streams, counters and normalization
statistics. Evaluation during training (`eval_interval`) and its best.pt are
`ppo.evaluation`'s. Env state in general cannot be snapshotted (a C env struct array, a
gymnasium env in another process), so a resumed run starts its envs with a reset seeded
by (env seed, update): it is deterministic (the same checkpoint resumes to the same
result on CPU) but it is not the uninterrupted run, whose episodes went on.
Checkpointing never touches the envs, so a run's result does not depend on its
checkpoint interval.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from typing import Any, Callable

import numpy as np
import torch

from puffercore import checkpoint, env_sources, logger, run
from puffercore.config_files import file_form, saved_config
from puffercore.checks import check_int
from puffercore.ppo.callbacks import CallbackList, Until
from puffercore.ppo.config import PPOConfig
from puffercore.ppo.gpu_settings import settings_note
from puffercore.ppo.evaluation import Evaluator, eval_vector, play, set_observation_statistics
from puffercore.ppo.parts import (BUILTIN_POLICY, check_saved_sizes, resolve_saved_policy, saved_policy,
                                 saved_policy_name)
from puffercore.ppo.trainer import Trainer
from puffercore.video import VideoRecorder, rendering_env


# What a PPO checkpoint holds at least (Trainer.state_dict).
CHECKPOINT_KEYS = ("env", "config", "model", "optimizer", "rng", "counters")
# What a resumed run may change: the budget, where it runs and how it reports. Everything
# else would make the resumed run a different experiment.
RESUMABLE_FIELDS = ("total_timesteps", "device", "torch_threads", "num_workers", "log_interval", "tensorboard",
                    "wandb_project", "quiet", "checkpoint_interval", "compile", "eval_interval", "eval_episodes",
                    "capture_video")


def train(config: PPOConfig | None = None, env: Any = None, resume: str | None = None,
          stop_after: int | None = None, until: Callable[[Trainer], bool] | None = None,
          callbacks: list | tuple = (), policy: Any = None) -> Trainer:
    """Train PPO on `env` (see `Trainer`) with `policy` (an `ActorCritic` class, a function
    making one, or "module:attribute"; default the DefaultPolicy `config` describes; see
    `puffercore.ppo.policy`); returns the (closed) Trainer.

    `resume`: a run directory to continue from its checkpoint, with its saved env and
    config. `config` may then change only RESUMABLE_FIELDS (e.g. a larger
    total_timesteps to extend the run); `env` is needed when the checkpoint's env is not
    one puffercore knows by name (`env_sources.resolve_saved`: an env class, a creator, a
    module:attribute the checkpoint names but never imports itself), and `policy` when it
    was trained with one of the user's (`parts.resolve_saved_policy`). `stop_after`: end
    after that many updates of this call (checkpointing as at the end), as a preempted
    job would. `until(trainer)`: called after each update (on every rank of a torchrun
    job, where rank 0's answer counts); True ends the run early (benchmarks stop at a
    target return). `callbacks`: `ppo.Callback`s, called at the end of each rollout,
    update and evaluation (`ppo.callbacks`); one that returns False ends the run as
    `until` does (`trainer.stopped_by` names it). SIGINT or SIGTERM ends the run after
    the update in progress, with a checkpoint (`trainer.interrupted` names the signal);
    the handlers cover the trainer's whole life, closing included, so that a signal a
    moment late kills nothing."""
    hooks = CallbackList([*callbacks, *([Until(until)] if until is not None else [])])
    saved = None
    if resume is not None:
        saved = checkpoint.load(os.path.join(resume, run.CHECKPOINT_NAME), required=CHECKPOINT_KEYS,
                                kind="a PPO checkpoint")
        env = env_sources.resolve_saved(saved["env"], env, resume)
        policy = resolve_saved_policy(saved_policy_name(saved), policy, resume)
        config = resumed_config(dataclasses.asdict(saved_config(PPOConfig, saved["config"], resume)), config)
        check_saved_sizes(saved, policy, config, resume)  # before the trainer builds the policy
    elif env is None:
        raise ValueError("env is required (an ocean env name, a gymnasium id, an env class or creator, a vector env)")
    elif config is None:
        config = PPOConfig.for_env(env)
    with run.StopSignals("update") as signals:
        trainer = Trainer(env, config, run_dir=resume, policy=policy)
        try:
            if saved is not None:
                trainer.load_state_dict(saved)
            _run(trainer, signals, stop_after, hooks, resumed=saved is not None)
        except BaseException:
            trainer.close(failed=True)
            raise
        trainer.close()
    return trainer


def resumed_config(saved: dict[str, Any], config: PPOConfig | dict[str, Any] | None) -> PPOConfig:
    """The saved config with the changes `config` (a PPOConfig, or a dict of overrides)
    makes; ValueError naming the fields a resumed run may not change."""
    overrides = dataclasses.asdict(config) if isinstance(config, PPOConfig) else dict(config or {})
    changed = sorted(name for name, value in overrides.items() if saved.get(name) != value)
    refused = [name for name in changed if name not in RESUMABLE_FIELDS]
    if refused:
        raise ValueError(f"a resumed run keeps its config; these can't change: {refused} "
                         f"(changeable: {', '.join(RESUMABLE_FIELDS)})")
    if overrides.get("total_timesteps", saved["total_timesteps"]) < saved["total_timesteps"]:
        raise ValueError(f"total_timesteps can only grow on resume (the run has {saved['total_timesteps']})")
    return PPOConfig(**{**saved, **overrides})


def _run(trainer: Trainer, signals: run.StopSignals, stop_after: int | None, hooks: CallbackList,
         resumed: bool) -> None:
    """The update loop. Under torchrun only rank 0 writes (run files, metrics, console,
    checkpoints), evaluates and decides when to log and stop; the other ranks follow its
    decisions, so their collectives always line up. A stop signal on any rank stops
    every rank after the same update."""
    config, group = trainer.config, trainer.group
    trainer.run_dir = trainer.run_dir or run.create_run_dir(trainer.env_name, config.seed, group)
    metrics = evaluator = None
    if group.is_main:
        policy = trainer.policy_source.name
        named = {"policy": policy} if policy not in (None, BUILTIN_POLICY) else {}
        # the plan beside the config: which paths the update and collection take, and why (ppo.plan)
        run.write_run_files(trainer.run_dir, file_form(dataclasses.asdict(config), PPOConfig, env=trainer.env_spec,
                                                       **named, plan=trainer.plan.as_dict()), config.seed, trainer.seeds)
        if config.eval_interval:  # before the logger: a run that can't evaluate fails before it writes metrics
            evaluator = Evaluator(trainer, lambda out: trainer.policy.head.greedy(out.params), resumed)
        try:
            metrics = logger.Logger(trainer.run_dir, config=dataclasses.asdict(config), tensorboard=config.tensorboard,
                                    wandb_project=config.wandb_project or None,
                                    resume_step=trainer.global_step if resumed else None, quiet=config.quiet)
        except BaseException:
            if evaluator is not None:
                evaluator.close()
            raise
    quiet = config.quiet or not group.is_main
    if not quiet:
        print(trainer.plan.summary(), flush=True)
        parameters = sum(parameter.numel() for parameter in trainer.policy.parameters())
        for line in settings_note(trainer.env_name, config, parameters, getattr(trainer.vec, "num_workers", None)):
            print(line, flush=True)
    start = time.perf_counter() - sum(trainer.timers.values())  # a resumed run counts its earlier time
    session_start, session_first_step = time.perf_counter(), trainer.global_step
    last_log = time.perf_counter()
    first_update = trainer.update
    try:
        while trainer.update < trainer.num_updates:
            if trainer.update == first_update:
                trainer.reset_envs()
            trainer.collect()
            hooks.rollout_end(trainer)
            learn_start = time.perf_counter()
            trainer.learn()
            trainer.timers["learn"] += time.perf_counter() - learn_start
            trainer.update += 1
            trainer.global_step += trainer.transitions_per_update

            finished = trainer.update == trainer.num_updates
            evaluated = None
            if evaluator is not None and evaluator.due(trainer.update, finished):
                evaluated = evaluator(trainer)
                hooks.evaluated(trainer, evaluated)
                if evaluated.video is not None:
                    metrics.video(trainer.global_step, "eval/video", evaluated.video)
            hooks.update_end(trainer)
            trainer.interrupted = signals.received(group)
            stopped = (stop_after is not None and trainer.update - first_update >= stop_after) or \
                hooks.stopped_by is not None or trainer.interrupted is not None
            log_now = finished or stopped or evaluated is not None or \
                time.perf_counter() - last_log >= config.log_interval or \
                (config.log_steps and trainer.global_step // config.log_steps >
                 (trainer.global_step - trainer.transitions_per_update) // config.log_steps)
            log_now, stopped = (bool(group.from_main(decision)) for decision in (log_now, stopped))
            trainer.stopped_by = hooks.stopped_by
            if finished or stopped or (config.checkpoint_interval and trainer.update % config.checkpoint_interval == 0):
                trainer.save_checkpoint()
            if log_now:
                last_log = time.perf_counter()
                scalars = trainer.metrics(time.perf_counter() - start)  # every rank: episode stats are gathered
                scalars.update(hooks.take_metrics())
                if metrics is not None:
                    metrics.log(trainer.global_step, scalars)
                if not quiet:
                    rate = (trainer.global_step - session_first_step) / max(time.perf_counter() - session_start, 1e-9)
                    logger.console_print(_title(trainer, time.perf_counter() - start, rate), scalars,
                                         trainer.update / trainer.num_updates)
            if stopped:
                break
    except KeyboardInterrupt:
        # A second Ctrl-C (the first asked for a stop after the update) or one raised by code:
        # keep what was learned; the CLI prints how to resume.
        trainer.interrupted = signal.SIGINT
        trainer.save_checkpoint()
    finally:
        trainer.elapsed = time.perf_counter() - start
        if evaluator is not None:
            evaluator.close()
        if metrics is not None:
            metrics.close()


def _title(trainer: Trainer, elapsed: float, rate: float) -> str:
    total = trainer.num_updates * trainer.transitions_per_update
    remaining = (total - trainer.global_step) / rate if rate > 0 else float("inf")
    return (f"puffercore PPO | {trainer.env_name} | step {trainer.global_step:,}/{total:,} | "
            f"elapsed {_duration(elapsed)}, ETA {_duration(remaining)} | {trainer.run_dir}")


def _duration(seconds: float) -> str:
    if not seconds < 1e7:
        return "?"
    minutes, seconds = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


def summary(trainer: Trainer) -> str:
    """One line on how a run ended: steps, time, the recent return, where it is."""
    recent = trainer.recent_return()
    ended = f"interrupted by {trainer.interrupted.name}" if trainer.interrupted else \
        f"stopped by the callback {trainer.stopped_by}" if trainer.stopped_by else "done"
    return (f"{ended}: {trainer.global_step:,} steps in {_duration(trainer.elapsed)} "
            f"({trainer.global_step / max(trainer.elapsed, 1e-9):,.0f} steps/s)"
            + (f", recent return {recent:.2f}" if recent is not None else "")
            + f"; run directory {trainer.run_dir}"
            + (f" (checkpoint saved: puffercore train --resume {trainer.run_dir})" if ended != "done" else ""))


def saved_env_spec(path: str) -> str | None:
    """The env a checkpoint (file or run directory) was trained on, as `env_sources.resolve` takes it."""
    state = checkpoint.load(run.checkpoint_path(path), required=CHECKPOINT_KEYS, kind="a PPO checkpoint")
    return state["env"]


@torch.no_grad()
def evaluate(path: str, episodes: int = 10, seed: int = 0, greedy: bool = True, max_steps: int = 10_000,
             on_step: Callable[[np.ndarray, float], None] | None = None, env: Any = None,
             video: str | None = None, on_render: Callable[[str], None] | None = None,
             policy: Any = None) -> list[float]:
    """Returns of the first `episodes` episodes that end when a checkpoint's policy plays
    one env, as the env reports them in its info -- the `episode_return` that training
    logs: an Atari game's raw score over all its lives, not the clipped reward of one
    life (observations are normalized with the checkpoint's frozen statistics, rewards
    never). An env that reports no episodes gets the sum of its rewards per row, each
    row that ends counting as one episode. `path`: a checkpoint file or its run
    directory. `env`: needed only when the checkpoint could not name its env; another
    env than the checkpoint's is refused; `policy` likewise, for a run trained with a
    policy of the user's (`ppo.train(policy=...)`). greedy: the most likely action (or the
    Gaussian mean) instead of a sample. After `max_steps` env steps the rows still
    running count as episodes ended there, with their reward sums (a greedy policy may
    never end one, e.g. a snake circling forever).
    `on_step(observation, reward)` sees row 0 at each step, e.g. to render it. `video`:
    an MP4 path to record the episodes into (the `video` extra): one frame of the env's
    rgb_array render (of its env 0) per step, showing what the policy acted on; a
    terminal state, which autoreset replaces at once, is not shown. `on_render(text)`: the
    env's own text picture (its "ansi" render of env 0) before each step, as video has
    frames; not both."""
    for name, value in (("episodes", episodes), ("max_steps", max_steps)):
        check_int(value, name, 1)
    if video is not None and on_render is not None:
        raise ValueError("video and on_render each need the env's own render mode (rgb_array, ansi): give one")
    recorder = VideoRecorder(video) if video is not None else None  # a missing encoder fails before any work
    state = checkpoint.load(run.checkpoint_path(path), required=CHECKPOINT_KEYS, kind="a PPO checkpoint")
    config = saved_config(PPOConfig, state["config"], path)
    env = env_sources.resolve_saved(state["env"], env, path)
    if recorder is not None or on_render is not None:
        env = rendering_env(env, "rgb_array" if recorder is not None else "ansi")
    vec = eval_vector(env, config, seed=seed)
    try:
        set_observation_statistics(vec, (state["normalize"] or {}).get("observations"))
        policy = saved_policy(state, policy, path, vec)
    except BaseException:
        vec.close()
        raise
    generator = torch.Generator().manual_seed(seed)

    def act(out) -> torch.Tensor:
        return policy.head.greedy(out.params) if greedy else policy.sample(out, generator)[0]

    def before_step(vec, ended: int) -> None:
        if recorder is not None:
            recorder.capture(vec)
        if on_render is not None:
            on_render(vec.render())

    try:
        return play(policy, vec, episodes, act, seed, max_steps, before_step, on_step).returns
    finally:
        vec.close()
        if recorder is not None:
            recorder.close()
