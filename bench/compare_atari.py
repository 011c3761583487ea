"""Preprocessed Atari throughput: puffercore against EnvPool and gymnasium, side by side
in one run.

    python bench/compare_atari.py                      # Breakout, 8 envs, 3 rounds of 3 s
    python bench/compare_atari.py --game Pong --seconds 5 --rounds 5
    python bench/compare_atari.py --envs 32                # more envs per worker

Rows (every one steps --envs envs, 8 by default, or 1 for the single-env rows, on random actions drawn
beforehand, to 84x84x4 uint8 observations with the same preprocessing):
  puffercore processes  puffercore.vector, processes backend, 2 workers, AtariEnv
  puffercore staggered  the same, batches of half the envs (recv whichever half is ready, send)
  puffercore ale        puffercore.vector, ale backend (ale-py's C++ vector env), 2 threads
  envpool               EnvPool's C++ Atari, 2 threads, the same preprocessing (if installed)
  envpool async         the same, batches of half the envs (EnvPool's async mode)
  gym Async             gymnasium AsyncVectorEnv, AtariPreprocessing + FrameStackObservation
  gym Sync              gymnasium SyncVectorEnv, the same wrappers
  gym Async + AtariEnv  AsyncVectorEnv of AtariEnv: the env's share apart from the vector's
  1 env: AtariEnv       one AtariEnv in this process
  1 env: gym wrappers   one AtariPreprocessing + FrameStackObservation in this process
and, last, the 84x84 frame resize alone: AtariEnv's C kernel against cv2's INTER_AREA.
Rows are measured in alternating rounds; the table shows each row's median, then the
ratios. Needs ale-py and, for gymnasium's AtariPreprocessing, opencv-python(-headless);
the EnvPool row needs `pip install envpool`.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import ale_py  # noqa: E402
import gymnasium  # noqa: E402
import numpy as np  # noqa: E402

import puffercore.vector  # noqa: E402
from puffercore.atari import AtariEnv  # noqa: E402

gymnasium.register_envs(ale_py)
NUM_WORKERS, POOL = 2, 64


def gymnasium_atari(game: str):
    env = gymnasium.make(f"ALE/{game}-v5", frameskip=1, repeat_action_probability=0.0)
    env = gymnasium.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84,
                                                terminal_on_life_loss=True, grayscale_obs=True)
    return gymnasium.wrappers.FrameStackObservation(env, 4)


def envpool_atari(game: str, num_envs: int, num_threads: int, batch_size: int | None = None):
    """EnvPool's Atari with the preprocessing of AtariEnv: its defaults differ on episodic
    life and reward clipping (off), so both are set, and the rest is spelled out."""
    import envpool

    return envpool.make(f"{game}-v5", env_type="gymnasium", num_envs=num_envs, batch_size=batch_size or num_envs,
                        num_threads=num_threads,
                        noop_max=30, frame_skip=4, img_height=84, img_width=84, stack_num=4, gray_scale=True,
                        episodic_life=True, use_fire_reset=True, reward_clip=True, repeat_action_probability=0.0,
                        max_episode_steps=27_000, seed=0)


def timed(step, actions: np.ndarray, seconds: float, envs_per_step: int) -> float:
    """Env steps per second of calling `step(actions[i % POOL])` for `seconds`."""
    steps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        step(actions[steps % POOL])
        steps += 1
    return steps * envs_per_step / elapsed


def make_rows(game: str, num_envs: int):
    """name -> (a started stepper taking one batch of actions, envs per call, closer)."""
    rows = {}
    half = num_envs // 2
    vec = puffercore.vector.make(functools.partial(AtariEnv, game), num_envs, backend="processes",
                                 num_workers=NUM_WORKERS, seed=0)
    vec.reset()
    rows["puffercore processes"] = (vec.step, num_envs, vec.close)
    staggered = puffercore.vector.make(functools.partial(AtariEnv, game), num_envs, backend="processes",
                                       num_workers=NUM_WORKERS, batch_size=half, seed=0)
    staggered.async_reset()
    rows["puffercore staggered"] = (functools.partial(_recv_send, staggered), half, staggered.close)
    ale = puffercore.vector.make(functools.partial(AtariEnv, game), num_envs, backend="ale",
                                 num_workers=NUM_WORKERS, seed=0)
    ale.reset()
    rows["puffercore ale"] = (ale.step, num_envs, ale.close)
    try:
        pool = envpool_atari(game, num_envs, NUM_WORKERS)
        async_pool = envpool_atari(game, num_envs, NUM_WORKERS, batch_size=half)
    except ImportError:
        print("envpool: not installed (pip install envpool), its rows are skipped")
    else:
        pool.reset()
        rows["envpool"] = (pool.step, num_envs, pool.close)
        async_pool.async_reset()
        rows["envpool async"] = (functools.partial(_envpool_recv_send, async_pool), half, async_pool.close)
    for name, vector_class, creator in (("gym Async", gymnasium.vector.AsyncVectorEnv, gymnasium_atari),
                                        ("gym Sync", gymnasium.vector.SyncVectorEnv, gymnasium_atari),
                                        ("gym Async + AtariEnv", gymnasium.vector.AsyncVectorEnv, AtariEnv)):
        gym_vec = vector_class([functools.partial(creator, game)] * num_envs)
        gym_vec.reset(seed=0)
        rows[name] = (gym_vec.step, num_envs, gym_vec.close)
    for name, creator in (("1 env: AtariEnv", AtariEnv), ("1 env: gym wrappers", gymnasium_atari)):
        env = creator(game)
        env.reset(seed=0)
        rows[name] = (functools.partial(_step_single, env), 1, env.close)
    return rows


def _recv_send(vec, actions) -> None:
    vec.recv()
    vec.send(actions[: vec.batch_size])


def _envpool_recv_send(pool, actions) -> None:
    info = pool.recv()[-1]
    pool.send(actions[: len(info["env_id"])], info["env_id"])


def resize_micros(repeats: int = 2000) -> tuple[float, float]:
    """Microseconds per 210x160 -> 84x84 frame: AtariEnv's C area resize and cv2's
    INTER_AREA (what gymnasium's AtariPreprocessing calls), on the same random frame."""
    import cv2

    from puffercore.atari import AreaResize

    frame = np.random.default_rng(0).integers(0, 256, (210, 160), dtype=np.uint8)
    out, resize = np.empty((84, 84), np.uint8), AreaResize((210, 160), (84, 84))
    timings = []
    for run in (lambda: resize(frame, out), lambda: cv2.resize(frame, (84, 84), interpolation=cv2.INTER_AREA)):
        run()
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        timings.append((time.perf_counter() - start) / repeats * 1e6)
    return timings[0], timings[1]


def _step_single(env, action) -> None:
    _, _, terminal, truncation, _ = env.step(int(action[0]))
    if terminal or truncation:
        env.reset()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--game", default="Breakout")
    parser.add_argument("--seconds", type=float, default=3.0, help="per row per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--envs", type=int, default=8, help="envs of every vector row (CleanRL's preset: 8)")
    args = parser.parse_args()
    if args.seconds <= 0 or args.rounds < 1 or args.envs < NUM_WORKERS or args.envs % NUM_WORKERS:
        parser.error(f"--seconds must be > 0, --rounds >= 1, --envs a multiple of {NUM_WORKERS}")
    actions = np.random.default_rng(0).integers(0, AtariEnv(args.game).action_space.n, (POOL, args.envs))
    rows = make_rows(args.game, args.envs)
    try:
        for step, per_call, _ in rows.values():  # warm up: worker start, first frames
            timed(step, actions, 0.3, per_call)
        results = {name: [] for name in rows}
        for _ in range(args.rounds):
            for name, (step, per_call, _) in rows.items():
                results[name].append(timed(step, actions, args.seconds, per_call))
    finally:
        for _, _, close in rows.values():
            close()
    median = {name: statistics.median(values) for name, values in results.items()}
    print(f"{args.game}: preprocessed env steps/s (4 frames each), median of {args.rounds} rounds of "
          f"{args.seconds:g} s, {os.cpu_count()} CPUs")
    for name, value in median.items():
        print(f"  {name:24s} {value:10,.0f}")
    ours = median["puffercore processes"]
    if "envpool" in median:
        print(f"puffercore processes / envpool:   {ours / median['envpool']:.2f}x")
        print(f"puffercore staggered / envpool async: {median['puffercore staggered'] / median['envpool async']:.2f}x")
        print(f"puffercore ale / envpool:         {median['puffercore ale'] / median['envpool']:.2f}x")
    print(f"puffercore ale / processes:       {median['puffercore ale'] / ours:.2f}x")
    print(f"puffercore processes / gym Async: {ours / median['gym Async']:.2f}x")
    print(f"puffercore processes / gym Sync:  {ours / median['gym Sync']:.2f}x")
    print(f"1 env, AtariEnv / gym wrappers:   {median['1 env: AtariEnv'] / median['1 env: gym wrappers']:.2f}x")
    ours_us, cv2_us = resize_micros()
    print(f"84x84 resize: puffercore {ours_us:.1f} us, cv2 INTER_AREA {cv2_us:.1f} us per frame ({cv2_us / ours_us:.2f}x)")


if __name__ == "__main__":
    main()
