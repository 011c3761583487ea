"""Training speed on CartPole-v1: puffercore PPO vs stable-baselines3 PPO, side by side.

    python bench/compare_training.py              # both, one after the other
    python bench/compare_training.py --only puffercore --seed 3
    python bench/compare_training.py --compile-rounds 3   # puffercore eager vs compiled, alternating
    python bench/compare_training.py --cleanrl-script ppo.py --cleanrl-python OLD_GYM_VENV/bin/python

Each side runs in its own subprocess (clean torch thread settings and imports) and
stops when the mean return of its last 20 finished episodes reaches 475 (gymnasium's
CartPole-v1 threshold) or at its step cap. Reported: wall-clock seconds from the start
of training (env and policy creation included) to solved, env steps to solved, and
end-to-end env steps per second; then the ratios.

puffercore: `puffercore train cartpole`'s preset (ocean CartPole, a C env with the
gymnasium dynamics). Its episode infos are per-batch means, so "last 20 episodes" is the
last few batches' episodes covering at least 20 (see Trainer.recent_return).
stable-baselines3: its rl-zoo tuned CartPole-v1 hyperparameters (8 envs, n_steps 32,
batch 256, 20 epochs, gamma 0.98, GAE 0.8, lr and clip linearly decayed from 1e-3 and
0.2, no entropy bonus) on gymnasium's CartPole-v1 with its default DummyVecEnv. Torch
uses every core by default, which on a small machine shared with other jobs makes its
threads thrash (SB3 measured 11 s here when the machine was quiet, 110-120 s under load);
`--sb3-torch-threads 1` runs it the way puffercore runs torch for a small MLP.

`--cleanrl-script PATH/ppo.py`: a third side, CleanRL's ppo.py from its repository run as
it is (its defaults: 4 gym CartPole-v1 envs x 128 steps), in the interpreter
`--cleanrl-python` names: an environment with the gym it imports. Its version of
2f4172e imports gym's old API: `pip install "gym==0.23.1" "numpy<2" pygame tensorboard
torch` in a separate virtual environment.

`--compile-rounds N`: the end-to-end row of the compiled update (`--compile`): the
puffercore side with its loss eager and compiled, in N alternating rounds, medians of
time to solve (the compile included: a user waits for it) and steps per second.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from puffercore.results import add_record_flag, record

SOLVED = 475.0
WINDOW = 20


def run_puffercore(seed: int, max_steps: int, torch_threads: int = 0, compile_setting: str = "",
                   device: str = "cpu") -> dict:
    from puffercore.ppo import PPOConfig, train

    start, cpu_start = time.perf_counter(), time.process_time()
    solved: dict = {}

    def until(trainer) -> bool:
        recent = trainer.recent_return()
        if recent is not None and recent >= SOLVED:
            solved.update(seconds=time.perf_counter() - start, cpu_seconds=time.process_time() - cpu_start,
                          steps=trainer.global_step)
            return True
        return False

    # on cuda, for_env puts cartpole's GPU preset over its CPU preset
    config = PPOConfig.for_env("cartpole", device=device, seed=seed, total_timesteps=max_steps, quiet=True,
                               tensorboard=False, torch_threads=torch_threads, checkpoint_interval=0,
                               run_dir=os.path.join("runs", f"bench-cartpole-{seed}"))
    if compile_setting:
        config.compile = compile_setting
    trainer = train(config, "cartpole", until=until)
    seconds = time.perf_counter() - start
    # CPU seconds of this process: on a machine shared with other jobs, the steadier
    # measure of the work (its torch and env threads run on cores it does not wait for).
    return {"solved_seconds": solved.get("seconds"), "solved_cpu_seconds": solved.get("cpu_seconds"),
            "solved_steps": solved.get("steps"), "steps": trainer.global_step, "seconds": seconds,
            "sps": trainer.global_step / seconds, "final_return": trainer.recent_return(),
            "config": f"{config.num_envs} envs x {config.horizon} steps, "
            f"minibatch {config.minibatch_size}, {config.update_epochs} epochs, backend {config.backend}, "
            f"compile {config.compile}"}


def run_sb3(seed: int, max_steps: int, torch_threads: int = 0) -> dict:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    def linear(initial: float):
        return lambda progress_remaining: progress_remaining * initial

    if torch_threads:
        torch.set_num_threads(torch_threads)
    start = time.perf_counter()
    solved: dict = {}

    class StopWhenSolved(BaseCallback):
        def _on_step(self) -> bool:
            returns = [info["r"] for info in list(self.model.ep_info_buffer)[-WINDOW:]]
            if len(returns) == WINDOW and sum(returns) / WINDOW >= SOLVED:
                solved.update(seconds=time.perf_counter() - start, steps=self.num_timesteps)
                return False
            return True

    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20,
                ent_coef=0.0, learning_rate=linear(1e-3), clip_range=linear(0.2), seed=seed, device="cpu", verbose=0)
    model.learn(total_timesteps=max_steps, callback=StopWhenSolved())
    seconds = time.perf_counter() - start
    returns = [info["r"] for info in list(model.ep_info_buffer)[-WINDOW:]]
    return {"solved_seconds": solved.get("seconds"), "solved_steps": solved.get("steps"),
            "steps": model.num_timesteps, "seconds": seconds, "sps": model.num_timesteps / seconds,
            "final_return": sum(returns) / len(returns) if returns else None,
            "config": "rl-zoo CartPole-v1: 8 envs x 32 steps, minibatch 256, 20 epochs, DummyVecEnv, "
                      f"{torch.get_num_threads()} torch threads"}


class _Solved(BaseException):
    """Raised out of CleanRL's script when its logged returns reach SOLVED."""


def run_cleanrl(seed: int, max_steps: int, script: str) -> dict:
    """CleanRL's ppo.py as it is, run in this interpreter (one with the gym its version
    imports), stopped when the mean of its last WINDOW logged episodic returns reaches
    SOLVED. It logs the first finished episode of each vector step, so its window spans
    a few more episodes than it counts. Torch and gym are imported before the clock
    starts, as the other sides' are."""
    import re
    import runpy

    import gym  # noqa: F401
    import torch  # noqa: F401

    returns: list[float] = []
    solved: dict = {}
    last_step = [0]

    class Log:
        def write(self, text: str) -> int:
            for match in re.finditer(r"global_step=(\d+), episodic_return=\[?([-0-9.e+]+)", text):
                last_step[0] = int(match.group(1))
                returns.append(float(match.group(2)))
                if len(returns) >= WINDOW and sum(returns[-WINDOW:]) / WINDOW >= SOLVED:
                    solved.update(seconds=time.perf_counter() - start, steps=last_step[0])
                    raise _Solved
            return len(text)

        def flush(self) -> None:
            pass

    sys.argv = [script, "--seed", str(seed), "--cuda", "false", "--total-timesteps", str(max_steps)]
    stdout, sys.stdout = sys.stdout, Log()
    start = time.perf_counter()
    try:
        runpy.run_path(script, run_name="__main__")
    except _Solved:
        pass
    finally:
        sys.stdout = stdout
    seconds = time.perf_counter() - start
    window = returns[-WINDOW:]
    return {"solved_seconds": solved.get("seconds"), "solved_steps": solved.get("steps"), "steps": last_step[0],
            "seconds": seconds, "sps": last_step[0] / seconds,
            "final_return": sum(window) / len(window) if window else None,
            "config": f"CleanRL {os.path.basename(script)} as it is (4 envs x 128 steps, 4 minibatches, "
                      f"4 epochs, gym {sys.modules['gym'].__version__}), {sys.modules['torch'].get_num_threads()} "
                      f"torch threads"}


RUNNERS = {"puffercore": run_puffercore, "sb3": run_sb3}


def _in_subprocess(name: str, seed: int, max_steps: int, torch_threads: int, compile_setting: str = "",
                   python: str = sys.executable, script: str = "") -> dict:
    command = [python, os.path.abspath(__file__), "--only", name, "--seed", str(seed),
               "--max-steps", str(max_steps), "--torch-threads", str(torch_threads), "--json"]
    if compile_setting:
        command += ["--compile", compile_setting]
    if script:
        command += ["--cleanrl-script", os.path.abspath(script)]
    with tempfile.TemporaryDirectory() as directory:  # where a side's logs go (CleanRL's runs/)
        output = subprocess.run(command, check=True, capture_output=True, text=True, cwd=directory).stdout
    return json.loads(output.strip().splitlines()[-1])


def compare_compiled(seed: int, max_steps: int, rounds: int) -> None:
    """puffercore's CartPole preset with the loss eager and compiled, alternating."""
    print(f"puffercore CartPole preset, seed {seed}, eager vs compiled loss, {rounds} alternating rounds "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    runs: dict[str, list[dict]] = {"false": [], "true": []}
    for _ in range(rounds):
        for setting in runs:
            runs[setting].append(_in_subprocess("puffercore", seed, max_steps, 0, setting))
    medians = {}
    for setting, results in runs.items():
        solved = [result["solved_seconds"] for result in results if result["solved_seconds"]]
        medians[setting] = (statistics.median(solved) if solved else None,
                            statistics.median(result["sps"] for result in results))
        cpu = [result["solved_cpu_seconds"] for result in results if result["solved_cpu_seconds"]]
        print(f"  compile {setting:5s}: solved in {_format(medians[setting][0], '.2f')} s, "
              f"{_format(statistics.median(cpu) if cpu else None, '.2f')} s CPU (medians of {len(solved)} solved), "
              f"{medians[setting][1]:,.0f} steps/s end to end")
    (eager_solve, eager_sps), (compiled_solve, compiled_sps) = medians["false"], medians["true"]
    if eager_solve and compiled_solve:
        print(f"  eager / compiled: time to solve {eager_solve / compiled_solve:.2f}x, "
              f"steps per second {compiled_sps / eager_sps:.2f}x")


def _format(value, pattern: str) -> str:
    return "not solved" if value is None else format(value, pattern)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted([*RUNNERS, "cleanrl"]), help="run one side in this process")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=0, help="step cap per side (default 500k puffercore, 300k sb3)")
    parser.add_argument("--sb3-torch-threads", type=int, default=0,
                        help="torch threads for SB3 (default 0: torch's default, every core)")
    parser.add_argument("--torch-threads", type=int, default=0, help=argparse.SUPPRESS)  # for --only
    parser.add_argument("--compile", choices=("auto", "true", "false"), default="",
                        help="puffercore's train.compile (default: the preset's)")
    parser.add_argument("--compile-rounds", type=int, default=0,
                        help="puffercore eager vs compiled in this many alternating rounds, instead of SB3")
    parser.add_argument("--json", action="store_true", help="print one JSON line (with --only)")
    parser.add_argument("--cleanrl-script", default="",
                        help="CleanRL's ppo.py, from its repository: a third side, run as it is")
    parser.add_argument("--cleanrl-python", default=sys.executable,
                        help="the interpreter of an environment with the gym CleanRL's script imports "
                             "(and torch, tensorboard); default this one")
    add_record_flag(parser)
    args = parser.parse_args()
    if args.record and (args.only or args.compile_rounds > 0):
        parser.error("--record records the side-by-side run: leave out --only and --compile-rounds")
    caps = {"puffercore": args.max_steps or 500_000, "sb3": args.max_steps or 300_000,
            "cleanrl": args.max_steps or 500_000}

    if args.only:
        if args.only == "cleanrl":
            if not args.cleanrl_script:
                parser.error("--only cleanrl needs --cleanrl-script")
            result = run_cleanrl(args.seed, caps["cleanrl"], args.cleanrl_script)
        elif args.only == "puffercore":
            result = run_puffercore(args.seed, caps["puffercore"], args.torch_threads, args.compile)
        else:
            result = run_sb3(args.seed, caps["sb3"], args.torch_threads)
        print(json.dumps(result) if args.json else result)
        return
    if args.compile_rounds > 0:
        compare_compiled(args.seed, caps["puffercore"], args.compile_rounds)
        return

    print(f"CartPole-v1, solved = mean return of the last {WINDOW} episodes >= {SOLVED:g}; seed {args.seed}; "
          f"{os.cpu_count()} CPUs (shared machine: other jobs may be running; load average "
          f"{os.getloadavg()[0]:.1f})")
    results = {}
    for name in [*RUNNERS, *(["cleanrl"] if args.cleanrl_script else [])]:
        if name == "cleanrl":
            results[name] = _in_subprocess(name, args.seed, caps[name], 0, python=args.cleanrl_python,
                                           script=args.cleanrl_script)
        else:
            results[name] = _in_subprocess(name, args.seed, caps[name], args.sb3_torch_threads if name == "sb3" else 0)
        result = results[name]
        print(f"{name:>11}: solved in {_format(result['solved_seconds'], '.2f')} s, "
              f"{_format(result['solved_steps'], ',')} steps; {result['sps']:,.0f} steps/s end to end "
              f"({result['steps']:,} steps in {result['seconds']:.2f} s; last return "
              f"{_format(result['final_return'], '.1f')}) [{result['config']}]", flush=True)
    ours, theirs = results["puffercore"], results["sb3"]
    sb3_threads = args.sb3_torch_threads or os.cpu_count()
    peers = {"sb3": ("stable-baselines3", f"stable-baselines3, rl-zoo settings, {sb3_threads} torch threads"),
             "cleanrl": ("CleanRL's ppo.py run as it is", "CleanRL ppo.py, its defaults and gym")}
    if ours["solved_seconds"] and theirs["solved_seconds"]:
        print(f"ratio sb3/puffercore: wall-clock to solve {theirs['solved_seconds'] / ours['solved_seconds']:.1f}x, "
              f"steps to solve {theirs['solved_steps'] / ours['solved_steps']:.2f}x")
    print(f"ratio puffercore/sb3: steps per second {ours['sps'] / theirs['sps']:.1f}x")
    cleanrl = results.get("cleanrl")
    if cleanrl and ours["solved_seconds"] and cleanrl["solved_seconds"]:
        print(f"ratio cleanrl/puffercore: wall-clock to solve {cleanrl['solved_seconds'] / ours['solved_seconds']:.1f}x, "
              f"steps to solve {cleanrl['solved_steps'] / ours['solved_steps']:.2f}x")
    for name, (against, peer) in peers.items():
        if name in results and ours["solved_seconds"] and results[name]["solved_seconds"]:
            record(args.record, measure=f"cartpole_time_to_475_{name}", title=f"PPO on CartPole to 475 vs {against}",
                   value=round(ours["solved_seconds"], 2), unit="s", peer=peer,
                   peer_value=round(results[name]["solved_seconds"], 2),
                   ratio=results[name]["solved_seconds"] / ours["solved_seconds"], notes=f"seed {args.seed}")


if __name__ == "__main__":
    main()
