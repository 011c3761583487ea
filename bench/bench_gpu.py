"""The GPU tables of issue 46 in one run, on whatever machine runs it, naming the CPU,
its cores and the card:

1. end to end, steps/s per preset (cartpole; squared at 4096 envs on every core; snake),
   on cuda and on the CPU (`ppo.train`, wall time, setup included), each device with
   the settings `--device` gives it (cartpole and snake: their GPU presets on cuda);
2. the PPO update in ms per preset (cartpole, snake, mujoco, atari): the trainer's
   `learn()` on a collected rollout, on its eager path (--compile false) against the
   plan's CUDA-graphed step (compile auto on cuda: `puffercore.ppo.graphed`);
3. Breakout: env steps/s on the processes backend (AtariEnv) and the ale backend
   (ale-py's C++ vector env), random actions; and end to end on the ale backend;
4. the threads engine, sync against staggered (batch = half the envs), CartPole at
   16384 envs, by worker count (1, 2, 4, 8, 16 where the cores exist);
5. collection on cuda, steps/s: the device rollout (`puffercore.ppo.device_rollout`,
   graphed forward and sampling, pinned staging) against the host path
   (`--train.inference torch`), rollouts only, no update; and the device rollout on
   staggered batches (`--vec.batch-size` half the envs), where the engine steps one half
   while the GPU infers on the other: the measure that decides the GPU presets' batching.
6. AlphaZero Connect4 self-play, positions searched per minute: the preset on the CPU
   against `--device cuda` (its cuda settings), and their ratio;
7. learning: `train cartpole` on each device (cuda: its GPU preset), seeds 1-3, steps
   and seconds until the recent return reaches 475 (bench/compare_training.py's measure).

    python bench/bench_gpu.py                    # everything this machine can run
    python bench/bench_gpu.py --quick            # short runs (a CPU-only check of the script)
    python bench/bench_gpu.py --json out.json    # the numbers, for the README's rows

Without a CUDA device the cuda columns and the update and collection tables say they
were skipped.
Timings on a machine shared with other work are not comparable run to run.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_update import PRESETS as UPDATE_PRESETS, preset_trainer, timed_learn  # noqa: E402
from bench_alphazero_selfplay import positions_per_minute  # noqa: E402
from vector_timing import staggered_rate, sync_rate  # noqa: E402
from compare_training import SOLVED, run_puffercore  # noqa: E402

import puffercore.vector  # noqa: E402
from puffercore import info, ppo  # noqa: E402
from puffercore.alphazero.config import AlphaZeroConfig  # noqa: E402
from puffercore.ocean import CartPole  # noqa: E402
from puffercore.ppo import PPOConfig  # noqa: E402
from puffercore.ppo.config import GPU_PRESETS, PRESETS  # noqa: E402
from puffercore.precision import resolve_precision  # noqa: E402

CORES = len(os.sched_getaffinity(0))


def end_to_end_presets(quick: bool) -> dict[str, dict]:
    """Preset name -> (env, overrides): the issue's runs, shortened by --quick."""
    squared = dict(num_envs=4096, num_workers=CORES, backend="threads", horizon=64, minibatch_size=65536)
    if quick:
        return {"cartpole": ("cartpole", dict(total_timesteps=128 * 8 * 4)),
                "squared 4096": ("squared", {**squared, "horizon": 8, "minibatch_size": 8192,
                                             "total_timesteps": 4096 * 8 * 2}),
                "snake": ("snake", dict(total_timesteps=512 * 64 * 2))}
    # cartpole and snake on cuda take their GPU presets (config.GPU_PRESETS): at least 4 updates of them
    return {"cartpole": ("cartpole", dict(total_timesteps=4096 * 32 * 8)),
            "squared 4096": ("squared", {**squared, "total_timesteps": 4096 * 64 * 8}),
            "snake": ("snake", dict(total_timesteps=4096 * 64 * 4))}


def train_rate(env: str, device: str, overrides: dict) -> float:
    with tempfile.TemporaryDirectory() as run_dir:
        config = PPOConfig.for_env(env, **overrides, device=device, quiet=True, tensorboard=False,
                                   checkpoint_interval=0, run_dir=run_dir)
        start = time.perf_counter()
        trainer = ppo.train(config, env)
        return trainer.global_step / (time.perf_counter() - start)


def table_end_to_end(devices: list[str], quick: bool) -> dict:
    print("\n1. end to end, steps/s (ppo.train, setup included; cuda: the env's GPU preset where it has one)")
    print(f"   {'preset':<14}" + "".join(f"{device:>14}" for device in devices))
    results = {}
    for name, (env, overrides) in end_to_end_presets(quick).items():
        results[name] = {device: train_rate(env, device, overrides) for device in devices}
        print(f"   {name:<14}" + "".join(f"{results[name][device] / 1e3:>12.1f} k" for device in devices), flush=True)
    return results


def update_ms(name: str, compile_setting: str, seconds: float) -> tuple[float, str]:
    """(ms of one update, the gradients path that ran) of preset `name` on cuda: the
    trainer's own `learn()` (GAE, every epoch's minibatches, the statistics' read) on
    one collected rollout, after a first update that warms up (and captures). compile
    "false" takes the eager UpdateStep, "auto" the plan's CUDA-graphed step."""
    trainer = preset_trainer(name, compile_setting, device="cuda")
    try:
        path = trainer.plan.gradients.name
        if trainer.plan.graphed and trainer.update_step.mode != "graphed":
            path += f" ({trainer.update_step.mode}: capture failed)"
        return timed_learn(trainer, seconds)[0], path
    finally:
        trainer.close()


def table_updates(seconds: float) -> dict:
    print("\n2. the PPO update on cuda, ms (Trainer.learn: GAE and every epoch's minibatches)")
    print(f"   {'preset':<10}{'eager':>10}{'graphed':>10}{'ratio':>8}")
    results = {}
    for name in UPDATE_PRESETS:
        try:
            (eager, _), (graphed, path) = update_ms(name, "false", seconds), update_ms(name, "auto", seconds)
        except Exception as error:  # a preset this machine cannot build is reported, not fatal
            print(f"   {name:<10} unavailable ({type(error).__name__}: {error})")
            continue
        results[name] = {"eager_ms": eager, "graphed_ms": graphed, "graphed_path": path}
        note = "" if path == "graphed" else f"  (the plan took {path})"
        print(f"   {name:<10}{eager:>10.1f}{graphed:>10.1f}{eager / graphed:>7.2f}x{note}", flush=True)
    return results


def table_breakout(devices: list[str], quick: bool, seconds: float) -> dict:
    print(f"\n3. Breakout, env steps/s (random actions, {CORES} workers)")
    from puffercore.atari import AtariEnv

    num_envs = 8 if quick else 64
    creator = functools.partial(AtariEnv, "Breakout")
    builds = {"processes": lambda: puffercore.vector.make(creator, num_envs, backend="processes",
                                                          num_workers=min(CORES, num_envs)),
              "ale": lambda: puffercore.vector.make(creator, num_envs, backend="ale", num_workers=min(CORES, num_envs))}
    results = {}
    for backend, build in builds.items():
        vec = build()
        try:
            results[f"{backend} x{num_envs}"] = sync_rate(vec, seconds)
        finally:
            vec.close()
        print(f"   {backend:<10} {num_envs} envs: {results[f'{backend} x{num_envs}'] / 1e3:8.2f} k steps/s", flush=True)
    device = devices[-1]
    steps = num_envs * 128 * (1 if quick else 4)
    overrides = dict(backend="ale", num_envs=num_envs, num_workers=min(CORES, num_envs), total_timesteps=steps,
                     minibatch_size=num_envs * 128 // 4)
    results[f"train ale x{num_envs} {device}"] = rate = train_rate("atari:Breakout", device, overrides)
    print(f"   end to end, ale backend, {num_envs} envs, {device}: {rate / 1e3:.2f} k steps/s", flush=True)
    return results


def table_staggered(seconds: float, num_envs: int) -> dict:
    print(f"\n4. threads engine, CartPole {num_envs} envs, M steps/s (staggered: batch = half the envs)")
    print(f"   {'workers':<8}{'sync':>8}{'stagg.':>8}{'ratio':>8}")
    results = {}
    for workers in [w for w in (1, 2, 4, 8, 16) if w <= CORES]:
        with puffercore.vector.make(CartPole, num_envs, backend="threads", num_workers=workers) as vec:
            sync = sync_rate(vec, seconds)
        with puffercore.vector.make(CartPole, num_envs, backend="threads", num_workers=workers,
                                    batch_size=num_envs // 2) as vec:
            staggered = staggered_rate(vec, seconds)
        results[workers] = {"sync": sync, "staggered": staggered}
        print(f"   {workers:<8}{sync / 1e6:>8.1f}{staggered / 1e6:>8.1f}{staggered / sync:>7.2f}x", flush=True)
    return results


def collection_presets() -> dict[str, tuple[str, dict]]:
    """Table 5's runs: cartpole at 4096 envs on every core, and the snake preset."""
    cartpole = dict(num_envs=4096, num_workers=CORES, backend="threads", horizon=32, minibatch_size=32768)
    return {"cartpole 4096": ("cartpole", cartpole), "snake": ("snake", {})}


def collection_rate(env: str, overrides: dict, inference: str, seconds: float, halves: bool = False) -> float:
    """Steps/s of `Trainer.collect` alone on cuda, after one rollout (where the device path
    captures); `halves`: staggered batches of half the envs."""
    config = PPOConfig.for_env(env, **overrides, device="cuda", inference=inference, quiet=True, tensorboard=False,
                               checkpoint_interval=0)
    if halves:
        config = dataclasses.replace(config, batch_size=config.num_envs // 2)
    trainer = ppo.Trainer(env, config)
    try:
        trainer.reset_envs()
        trainer.collect()
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            trainer.collect()
            steps += trainer.rows * config.horizon
        torch.cuda.synchronize()
        return steps / (time.perf_counter() - start)
    finally:
        trainer.close()


def table_collection(seconds: float) -> dict:
    print("\n5. collection on cuda, k steps/s (rollouts only): device rollout against the host path, and on "
          "staggered halves")
    print(f"   {'preset':<14}{'host':>10}{'device':>10}{'ratio':>8}{'halves':>10}{'vs sync':>9}")
    results = {}
    for name, (env, overrides) in collection_presets().items():
        host, device = (collection_rate(env, overrides, inference, seconds) for inference in ("torch", "auto"))
        halves = collection_rate(env, overrides, "auto", seconds, halves=True)
        results[name] = {"host": host, "device": device, "device_halves": halves}
        print(f"   {name:<14}{host / 1e3:>10.1f}{device / 1e3:>10.1f}{device / host:>7.2f}x{halves / 1e3:>10.1f}"
              f"{halves / device:>8.2f}x", flush=True)
    return results


def table_alphazero(devices: list[str], quick: bool) -> dict:
    print("\n6. AlphaZero Connect4 self-play, positions searched per minute (one timed iteration after an untimed one)")
    threads = torch.get_num_threads()  # the trainer sets its own
    results = {}
    for device in devices:
        short = dict(games_per_iteration=8, parallel_games=8, simulations=8) if quick else {}
        config = AlphaZeroConfig.for_game("connect4", device=device, **short)
        results[device] = positions_per_minute(config, None, iterations=1)
        print(f"   {device:<5}{results[device] / 1e3:>9.1f} k   {config.self_play_threads} self-play threads x "
              f"{config.parallel_games // config.self_play_threads} games, {config.games_per_iteration} games, "
              f"{config.simulations} simulations, evaluation cache {config.evaluation_cache}, inference "
              f"{resolve_precision(config.inference_precision, device, convolutional=True)}", flush=True)
    if "cuda" in results:
        results["ratio"] = results["cuda"] / results["cpu"]
        print(f"   cuda / cpu: {results['ratio']:.2f}x (the issue's bar: 3x)")
    torch.set_num_threads(threads)
    return results


def table_learning(devices: list[str], quick: bool) -> dict:
    print(f"\n7. learning: train cartpole to a recent return of {SOLVED:.0f} (cuda: its GPU preset), "
          f"M steps / seconds, setup included")
    seeds = (1,) if quick else (1, 2, 3)
    print(f"   {'device':<8}" + "".join(f"{f'seed {seed}':>16}" for seed in seeds))
    results = {}
    for device in devices:
        preset = GPU_PRESETS["cartpole"] if device == "cuda" else PRESETS["cartpole"]
        max_steps = preset["num_envs"] * preset["horizon"] * 2 if quick else preset["total_timesteps"]
        runs = [run_puffercore(seed, max_steps, device=device) for seed in seeds]
        results[device] = {seed: {key: run[key] for key in ("solved_steps", "solved_seconds", "final_return")}
                           for seed, run in zip(seeds, runs)}
        cells = [f"{run['solved_steps'] / 1e6:.2f} / {run['solved_seconds']:.1f}" if run["solved_steps"]
                 else f"not ({run['final_return'] or 0:.0f})" for run in runs]
        print(f"   {device:<8}" + "".join(f"{cell:>16}" for cell in cells), flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short runs: check the script, not the speed")
    parser.add_argument("--json", help="write the numbers to this file")
    parser.add_argument("--tables", default="1,2,3,4,5,6,7", help="which tables to run (comma-separated numbers)")
    args = parser.parse_args()
    tables = {int(table) for table in args.tables.split(",")}
    cuda = torch.cuda.is_available()
    machine = info.machine()
    print(f"bench_gpu on {info.machine_label(machine)}; torch {torch.__version__}"
          + ("" if cuda else "; no CUDA device: the cuda columns and the update and collection tables are skipped"))
    devices = ["cpu", "cuda"] if cuda else ["cpu"]
    seconds = 0.3 if args.quick else 1.0
    results: dict = {"machine": machine, "quick": args.quick}

    def save() -> None:
        # after every table, so a run cut short by the device call's limit keeps what it measured
        if args.json:
            with open(args.json, "w") as out:
                json.dump(results, out, indent=1)

    if 1 in tables:
        results["end_to_end"] = table_end_to_end(devices, args.quick)
        save()
    if 2 in tables:
        if cuda:
            results["update"] = table_updates(seconds)
            save()
        else:
            print("\n2. the PPO update on cuda: skipped (no CUDA device)")
    if 3 in tables:
        results["breakout"] = table_breakout(devices, args.quick, seconds)
        save()
    if 4 in tables:
        results["staggered"] = table_staggered(seconds, 4096 if args.quick else 16384)
        save()
    if 5 in tables:
        if cuda:
            results["collection"] = table_collection(seconds)
            save()
        else:
            print("\n5. collection on cuda: skipped (no CUDA device)")
    if 6 in tables:
        results["alphazero"] = table_alphazero(devices, args.quick)
        save()
    if 7 in tables:
        results["learning"] = table_learning(devices, args.quick)
        save()


if __name__ == "__main__":
    main()
