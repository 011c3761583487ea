"""What PPO learns with its defaults: puffercore vs stable-baselines3 (rl-zoo settings) on
the gymnasium tasks users try first, same env-step budgets, several seeds.

    python bench/compare_learning.py                          # all tasks, 3 seeds, both sides
    python bench/compare_learning.py --tasks CartPole-v1 --seeds 1 --sides puffercore

puffercore runs `puffercore train <id>` as a user would: `PPOConfig()` defaults (CleanRL's
ppo.py settings: 8 envs x 128 steps, 4 epochs, lr 2.5e-4 annealed, separate actor and
critic), plus the documented normalization flags for Pendulum. stable-baselines3 runs
its rl-zoo hyperparameters for each task (tuned per task, so the stronger baseline).
Each run is its own subprocess. Reported per task: the final return (mean of the last 20
episodes at the end of the budget), mean +- std over seeds, wall time, and the ratios;
the learning curves go to a PNG. CleanRL's published ppo.py results are printed as a
reference line (their docs, gym 0.23, 4 envs, 500k steps). Both sides run torch on one
thread: for these small MLPs that is each library's fastest setting on a small machine
(SB3 with torch's default of every core ran 5-10x slower here under load).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

from puffercore.results import add_record_flag, record

WINDOW = 20


class Task(NamedTuple):
    steps: int  # the env-step budget
    puffercore: dict  # overrides of the task's `puffercore train` config
    sb3: dict  # stable-baselines3 rl-zoo hyperparameters (see run_sb3)


TASKS = {
    "CartPole-v1": Task(500_000, {}, dict(n_envs=8, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20,
                                          ent_coef=0.0, learning_rate=("linear", 1e-3), clip_range=("linear", 0.2))),
    "Acrobot-v1": Task(500_000, {}, dict(n_envs=16, normalize=True, n_steps=256, gae_lambda=0.94, gamma=0.99,
                                         n_epochs=4, ent_coef=0.0)),
    "Pendulum-v1": Task(1_000_000, {"norm_obs": True, "norm_reward": True},
                        dict(n_envs=4, n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0,
                             learning_rate=1e-3, clip_range=0.2, use_sde=True, sde_sample_freq=4)),
}
CLEANRL = ("CleanRL published", {"CartPole-v1": "492.4 +- 13.1", "Acrobot-v1": "-89.9 +- 6.3"})


def run_puffercore(task: str, seed: int, steps: int, overrides: dict) -> dict:
    """`puffercore train <task>` (the task's preset, if it has one) with `overrides`."""
    from puffercore.ppo import PPOConfig, train
    from puffercore.ppo.config import preset_for

    curve = []

    def record(trainer) -> bool:
        recent = trainer.recent_return()
        if recent is not None:
            curve.append((trainer.global_step, recent))
        return False

    env = f"gymnasium:{task}"
    config = PPOConfig.for_env(env, seed=seed, total_timesteps=steps, quiet=True, tensorboard=False,
                               run_dir=tempfile.mkdtemp(prefix=f"bench-{task}-"), **overrides)
    start = time.perf_counter()
    trainer = train(config, env, until=record)
    settings = "its preset" if preset_for(env) else "PPOConfig() defaults"
    return {"final": trainer.recent_return(), "seconds": time.perf_counter() - start, "steps": trainer.global_step,
            "curve": curve, "settings": settings + (f" + {overrides}" if overrides else "")}


def run_sb3(task: str, seed: int, steps: int, hyperparameters: dict) -> dict:
    """SB3's PPO with rl-zoo `hyperparameters`, read as rl-zoo reads them: n_envs,
    normalize (VecNormalize with the algorithm's gamma), ("linear", start) schedules,
    policy_kwargs with activation_fn named as in torch.nn."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    settings = dict(hyperparameters)
    env = make_vec_env(task, n_envs=settings.pop("n_envs"), seed=seed)
    if settings.pop("normalize", False):
        env = VecNormalize(env, gamma=settings.get("gamma", 0.99))
    for name, value in settings.items():
        if isinstance(value, tuple):  # ("linear", start): decayed to 0 over the run, as rl-zoo's lin_ values
            settings[name] = (lambda start: lambda remaining: remaining * start)(value[1])
    if "activation_fn" in settings.get("policy_kwargs", {}):
        settings["policy_kwargs"] = {**settings["policy_kwargs"],
                                     "activation_fn": getattr(torch.nn, settings["policy_kwargs"]["activation_fn"])}
    curve = []

    class Record(BaseCallback):
        def _on_rollout_end(self) -> None:
            returns = [info["r"] for info in list(self.model.ep_info_buffer)[-WINDOW:]]
            if len(returns) == WINDOW:
                curve.append((self.num_timesteps, sum(returns) / WINDOW))

        def _on_step(self) -> bool:
            return True

    start = time.perf_counter()
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **settings)
    model.learn(total_timesteps=steps, callback=Record())
    returns = [info["r"] for info in list(model.ep_info_buffer)[-WINDOW:]]
    return {"final": sum(returns) / WINDOW if len(returns) == WINDOW else None, "seconds": time.perf_counter() - start,
            "steps": model.num_timesteps, "curve": curve, "settings": "rl-zoo hyperparameters"}


# rl-zoo hyperparameters and the PPOConfig fields that mean the same (run_sb3 reads them).
RL_ZOO_NAMES = dict(n_envs="num_envs", n_steps="horizon", batch_size="minibatch_size", n_epochs="update_epochs",
                    gamma="gamma", gae_lambda="gae_lambda", ent_coef="ent_coef", vf_coef="vf_coef",
                    max_grad_norm="max_grad_norm", clip_range="clip_coef", learning_rate="learning_rate")


def rl_zoo_overrides(hyperparameters: dict) -> dict:
    """rl-zoo's PPO `hyperparameters` as PPOConfig overrides, so that puffercore runs the
    settings stable-baselines3 runs: SB3's value loss is unclipped and its learning rate
    constant unless given as ("linear", start); VecNormalize is puffercore's norm_obs and
    norm_reward. ValueError naming a setting puffercore has no counterpart for."""
    settings, policy = dict(hyperparameters), dict(hyperparameters.get("policy_kwargs", {}))
    overrides = dict(backend="serial", clip_vloss=False, anneal_lr=False, norm_obs=bool(settings.pop("normalize", False)))
    overrides["norm_reward"] = overrides["norm_obs"]
    settings.pop("policy_kwargs", None)
    for name, value in settings.items():
        if name not in RL_ZOO_NAMES:
            raise ValueError(f"rl-zoo setting {name}={value!r} has no PPOConfig counterpart")
        if isinstance(value, tuple):  # ("linear", start)
            if name != "learning_rate":
                raise ValueError(f"rl-zoo setting {name}={value!r}: puffercore anneals only the learning rate")
            value, overrides["anneal_lr"] = value[1], True
        overrides[RL_ZOO_NAMES[name]] = value
    widths = policy.pop("net_arch", dict(pi=[64, 64], vf=[64, 64]))
    if widths["pi"] != widths["vf"] or len(set(widths["pi"])) != 1:
        raise ValueError(f"rl-zoo net_arch={widths!r}: puffercore's actor and critic are MLPs of one width")
    overrides.update(hidden_size=widths["pi"][0], num_layers=len(widths["pi"]),
                     activation=policy.pop("activation_fn", "Tanh").lower(),
                     log_std_init=float(policy.pop("log_std_init", 0.0)), ortho_init=policy.pop("ortho_init", True))
    if policy:
        raise ValueError(f"rl-zoo policy_kwargs {sorted(policy)} have no PPOConfig counterpart")
    return overrides


def run_puffercore_rl_zoo(task: str, seed: int, steps: int, hyperparameters: dict) -> dict:
    """puffercore with stable-baselines3's `hyperparameters` (rl_zoo_overrides): the two
    implementations on the same settings."""
    result = run_puffercore(task, seed, steps, rl_zoo_overrides(hyperparameters))
    return {**result, "settings": "rl-zoo hyperparameters, as SB3"}


# Each side and the Task field its runner takes.
RUNNERS = {"puffercore": (run_puffercore, "puffercore"), "puffercore-rl-zoo": (run_puffercore_rl_zoo, "sb3"),
           "sb3": (run_sb3, "sb3")}


def _in_subprocess(script: str, side: str, task: str, seed: int, steps: int) -> dict:
    command = [sys.executable, script, "--one", side, task, str(seed), str(steps)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def _shown(value: float | None) -> str:
    """A return as printed; n/a when fewer than WINDOW episodes ended (a tiny --steps)."""
    return "n/a" if value is None else f"{value:.1f}"


def _mean_std(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    return mean, (sum((value - mean) ** 2 for value in values) / len(values)) ** 0.5


def _plot(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(results)
    figure, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.6), squeeze=False)
    for axis, task in zip(axes[0], tasks):
        for side, color in (("puffercore", "tab:blue"), ("puffercore-rl-zoo", "tab:green"), ("sb3", "tab:orange")):
            for index, run in enumerate(results[task].get(side, [])):
                if run["curve"]:
                    steps, returns = zip(*run["curve"])
                    axis.plot(steps, returns, color=color, alpha=0.7, label=side if index == 0 else None)
        axis.set_title(task)
        axis.set_xlabel("env steps")
        axis.set_ylabel(f"mean return, last {WINDOW} episodes")
        if axis.get_legend_handles_labels()[0]:  # no curve before WINDOW episodes ended
            axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def _record(path: str | None, task: str, steps: int, seeds: int, overrides: dict, summary: dict) -> None:
    """The task's record: puffercore's final return (mean +- std over seeds), SB3's beside it."""
    def shown(side: str) -> str:
        mean, _, std = summary[side]
        return f"{_shown(mean)} +- {_shown(std)}"

    sb3 = "sb3" in summary and summary["sb3"][0] is not None
    record(path, measure=f"learning_{task.split('-')[0].lower()}",
           title=f"final return, {task}, {steps:,} steps, {seeds} seeds", value=shown("puffercore"), unit="",
           peer="stable-baselines3, rl-zoo settings" if sb3 else "", peer_value=shown("sb3") if sb3 else None,
           notes=", ".join(f"{name}={value}" for name, value in overrides.items()))


def compare(script: str, tasks: dict[str, Task], reference: tuple[str, dict[str, str]], seeds: int,
            png: str, description: str, sides: tuple[str, ...] = ("puffercore", "sb3")) -> None:
    """The command line of a comparison script (this one, compare_mujoco.py): every run
    of `tasks` by each of `sides` (by default) in its own subprocess of `script`, a line
    per run and per task (the final returns next to `reference`: its label and a text
    per task), the curves in a PNG."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--tasks", nargs="+", choices=sorted(tasks), default=list(tasks))
    parser.add_argument("--seeds", type=int, default=seeds, help=f"seeds 1..N per task and side (default {seeds})")
    parser.add_argument("--sides", nargs="+", choices=sorted(RUNNERS), default=list(sides),
                        help=f"which sides run (default {' '.join(sides)})")
    parser.add_argument("--steps", type=int, default=0, help="override every task's budget (for a quick look)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs at once, each its own process (wall times then count the shared machine)")
    parser.add_argument("--png", default=png, help=f"learning curves (default {png})")
    parser.add_argument("--one", nargs=4, metavar=("SIDE", "TASK", "SEED", "STEPS"), help=argparse.SUPPRESS)
    add_record_flag(parser)
    args = parser.parse_args()
    if args.one:
        side, task, seed, steps = args.one
        runner, field = RUNNERS[side]
        print(json.dumps(runner(task, int(seed), int(steps), getattr(tasks[task], field))))
        return

    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    sides = args.sides
    label, references = reference
    print(f"final return = mean of the last {WINDOW} episodes at the end of the budget; seeds 1..{args.seeds}; "
          f"{os.cpu_count()} CPUs, {args.jobs} run(s) at once, load average {os.getloadavg()[0]:.1f}")
    results: dict = {}
    for task in args.tasks:
        steps = args.steps or tasks[task].steps
        outcomes: dict[tuple[str, int], dict] = {}

        def run_one(side: str, seed: int) -> None:
            outcome = outcomes[side, seed] = _in_subprocess(script, side, task, seed, steps)
            print(f"{task:<14} {side:>17} seed {seed}: final return {_shown(outcome['final'])} after "
                  f"{outcome['steps']:,} steps, {outcome['seconds']:.1f} s", flush=True)

        # Seed by seed, every side: with --jobs 2 each side's run of a seed shares the
        # machine with another side's, so their wall times see the same load.
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for future in [pool.submit(run_one, side, seed) for seed in range(1, args.seeds + 1) for side in sides]:
                future.result()
        results[task] = {side: [outcomes[side, seed] for seed in range(1, args.seeds + 1)] for side in sides}
        summary = {}
        for side in sides:
            runs = results[task][side]
            finals = [run["final"] for run in runs if run["final"] is not None]
            mean, std = _mean_std(finals) if finals else (None, None)
            seconds = sum(run["seconds"] for run in runs) / len(runs)
            summary[side] = (mean, seconds, std)
            print(f"{task:<14} {steps:>9,} steps  {side:>17}: {_shown(mean)} +- {_shown(std)}  "
                  f"(seeds: {', '.join(_shown(run['final']) for run in runs)}), {seconds:6.1f} s per run "
                  f"[{runs[0]['settings']}]", flush=True)
        comparison = ["final return " + " vs ".join(f"{side} {_shown(summary[side][0])}" for side in sides)]
        if "sb3" in sides:
            comparison[:0] = [f"wall time sb3/{side} {summary['sb3'][1] / summary[side][1]:.2f}x"
                              for side in sides if side != "sb3"]
        if task in references:
            comparison.append(f"{label} {references[task]}")
        print(f"{task:<14} " + "; ".join(comparison), flush=True)
        if "puffercore" in sides and summary["puffercore"][0] is not None:
            _record(args.record, task, steps, args.seeds, tasks[task].puffercore, summary)
    _plot(results, args.png)
    print(f"learning curves: {args.png}")


if __name__ == "__main__":
    compare(os.path.abspath(__file__), TASKS, CLEANRL, seeds=3, png="compare_learning.png",
            description=__doc__.split("\n\n")[0])
