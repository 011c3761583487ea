"""What PPO learns with its defaults: puffercore vs stable-baselines3 (rl-zoo settings) on
the gymnasium tasks users try first, same env-step budgets, several seeds.

    python bench/compare_learning.py                          # all tasks, 3 seeds, both sides
    python bench/compare_learning.py --tasks CartPole-v1 --seeds 1 --only puffercore

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
import json
import os
import subprocess
import sys
import tempfile
import time

WINDOW = 20
TASKS = {  # id: (env-step budget, puffercore overrides of PPOConfig(), SB3 rl-zoo hyperparameters)
    "CartPole-v1": (500_000, {}, dict(n_envs=8, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20,
                                      ent_coef=0.0, learning_rate=("linear", 1e-3), clip_range=("linear", 0.2))),
    "Acrobot-v1": (500_000, {}, dict(n_envs=16, normalize=True, n_steps=256, gae_lambda=0.94, gamma=0.99, n_epochs=4,
                                     ent_coef=0.0)),
    "Pendulum-v1": (1_000_000, {"norm_obs": True, "norm_reward": True},
                    dict(n_envs=4, n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0,
                         learning_rate=1e-3, clip_range=0.2, use_sde=True, sde_sample_freq=4)),
}
CLEANRL = {"CartPole-v1": "492.4 +- 13.1", "Acrobot-v1": "-89.9 +- 6.3"}


def run_puffercore(task: str, seed: int, steps: int) -> dict:
    from puffercore.ppo import PPOConfig, train

    curve = []

    def record(trainer) -> bool:
        recent = trainer.recent_return()
        if recent is not None:
            curve.append((trainer.global_step, recent))
        return False

    overrides = TASKS[task][1]
    config = PPOConfig(seed=seed, total_timesteps=steps, quiet=True, tensorboard=False,
                       run_dir=tempfile.mkdtemp(prefix=f"bench-{task}-"), **overrides)
    start = time.perf_counter()
    trainer = train(config, f"gymnasium:{task}", until=record)
    return {"final": trainer.recent_return(), "seconds": time.perf_counter() - start, "steps": trainer.global_step,
            "curve": curve, "settings": f"PPOConfig() defaults{' + ' + str(overrides) if overrides else ''}"}


def run_sb3(task: str, seed: int, steps: int) -> dict:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    settings = dict(TASKS[task][2])
    env = make_vec_env(task, n_envs=settings.pop("n_envs"), seed=seed)
    if settings.pop("normalize", False):
        env = VecNormalize(env)
    for name, value in settings.items():
        if isinstance(value, tuple):  # ("linear", start): decayed to 0 over the run, as rl-zoo's lin_ values
            settings[name] = (lambda start: lambda remaining: remaining * start)(value[1])
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
    return {"final": sum(returns) / len(returns), "seconds": time.perf_counter() - start,
            "steps": model.num_timesteps, "curve": curve, "settings": "rl-zoo hyperparameters"}


RUNNERS = {"puffercore": run_puffercore, "sb3": run_sb3}


def _in_subprocess(side: str, task: str, seed: int, steps: int) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--one", side, task, str(seed), str(steps)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


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
        for side, color in (("puffercore", "tab:blue"), ("sb3", "tab:orange")):
            for index, run in enumerate(results[task].get(side, [])):
                if run["curve"]:
                    steps, returns = zip(*run["curve"])
                    axis.plot(steps, returns, color=color, alpha=0.7, label=side if index == 0 else None)
        axis.set_title(task)
        axis.set_xlabel("env steps")
        axis.set_ylabel(f"mean return, last {WINDOW} episodes")
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=list(TASKS))
    parser.add_argument("--seeds", type=int, default=3, help="seeds 1..N per task and side (default 3)")
    parser.add_argument("--only", choices=sorted(RUNNERS), help="one side only")
    parser.add_argument("--steps", type=int, default=0, help="override every task's budget (for a quick look)")
    parser.add_argument("--png", default="compare_learning.png", help="learning curves (default compare_learning.png)")
    parser.add_argument("--one", nargs=4, metavar=("SIDE", "TASK", "SEED", "STEPS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        side, task, seed, steps = args.one
        print(json.dumps(RUNNERS[side](task, int(seed), int(steps))))
        return

    sides = [args.only] if args.only else list(RUNNERS)
    print(f"final return = mean of the last {WINDOW} episodes at the end of the budget; seeds 1..{args.seeds}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    results: dict = {}
    for task in args.tasks:
        steps = args.steps or TASKS[task][0]
        results[task] = {side: [_in_subprocess(side, task, seed, steps) for seed in range(1, args.seeds + 1)]
                         for side in sides}
        summary = {}
        for side in sides:
            runs = results[task][side]
            finals = [run["final"] for run in runs]
            mean, std = _mean_std(finals)
            seconds = sum(run["seconds"] for run in runs) / len(runs)
            summary[side] = (mean, seconds)
            print(f"{task:<12} {steps:>9,} steps  {side:>10}: {mean:8.1f} +- {std:6.1f}  "
                  f"(seeds: {', '.join(f'{final:.1f}' for final in finals)}), {seconds:6.1f} s per run "
                  f"[{runs[0]['settings']}]", flush=True)
        if len(sides) == 2:
            print(f"{task:<12} wall time sb3/puffercore {summary['sb3'][1] / summary['puffercore'][1]:.1f}x; "
                  f"final return puffercore {summary['puffercore'][0]:.1f} vs sb3 {summary['sb3'][0]:.1f}"
                  + (f"; CleanRL published {CLEANRL[task]}" if task in CLEANRL else ""), flush=True)
    _plot(results, args.png)
    print(f"learning curves: {args.png}")


if __name__ == "__main__":
    main()
