"""Azul random-play throughput: whole games of uniformly random legal moves.

Single thread: played by the native engine in a C loop, through the Python view
(legal_mask + apply per move), and by the plain-Python reference engine of the tests
(tests/azul_reference.py). Each row plays fresh games from seeds 0, 1, ...; the ratios
are native and view games/s over the reference's.

Through the vector engine: the RL env puffercore.ocean.AzulEnv with opponent="random", so
every seat plays uniformly random legal moves as above; the agent's move is drawn from
the action masks of all envs at once in NumPy (argmax of pooled uniform noise times the
mask, which picks uniformly among the legal moves), and each env step plays the agent's
move and the opponents' replies. Games/s counts finished episodes. Measured on one
thread (the env itself) and on puffercore.vector.make(Azul, N, backend="threads",
num_workers=2), with the cores the process kept busy (CPU time / wall time: below 2
for the threads when the machine is shared); the ratios are over the C loop (single
thread) and the plain-Python reference.

    python bench/bench_azul.py [--native-games 20000] [--view-games 300] [--reference-games 30]
                               [--vector-envs 1024] [--vector-seconds 3]
"""

import argparse
import os
import random
import sys
import time

import numpy as np

import puffercore
from puffercore.azul import Azul, random_games
from puffercore.ocean import AzulEnv

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import azul_reference as reference  # noqa: E402


def games_per_second(play, games):
    start = time.perf_counter()
    moves = play(games)
    elapsed = time.perf_counter() - start
    return games / elapsed, moves / games


def native(num_players):
    def play(games):
        return random_games(games, num_players, seed=0, check=False)["moves"]
    return play


def view(num_players):
    game = Azul()

    def play(games):
        rng, moves = np.random.default_rng(0), 0
        for seed in range(games):
            state = game.new_state(seed=seed, num_players=num_players)
            while not state.is_terminal():
                state.apply(int(rng.choice(np.flatnonzero(state.legal_mask()))))
                moves += 1
        return moves
    return play


def plain_python(num_players):
    def play(games):
        return sum(reference.random_game(num_players, seed)["moves"] for seed in range(games))
    return play


NOISE_POOL = 16


def env_games_per_second(env, seconds):
    """Finished random games per second of a vectorized Azul env (opponent="random"),
    the agent's moves drawn from the masks; and the cores this process kept busy
    meanwhile (CPU time over wall time), which on a shared machine says how much of the
    threads' parallelism was available."""
    observations, _ = env.reset(seed=0)
    masks = env.observation_tree.unflatten(observations)["action_mask"]  # a view: always current
    noise = np.random.default_rng(0).random((NOISE_POOL, *masks.shape), dtype=np.float32)
    scratch = np.empty(masks.shape, np.float32)

    def play(steps):
        games = 0.0
        for k in range(steps):
            np.multiply(noise[k % NOISE_POOL], masks, out=scratch)
            info = env.step(scratch.argmax(axis=1).astype(np.int32))[4]
            games += info.get("episodes", 0)
        return games

    play(50)  # warm-up: the games get under way
    games, start, cpu_start = 0.0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
        games += play(NOISE_POOL)
    elapsed = time.perf_counter() - start
    return games / elapsed, (time.process_time() - cpu_start) / elapsed


def vector_rates(num_players, num_envs, seconds):
    """Games/s of the env stepped on this thread, and through the threads engine."""
    kwargs = {"num_players": num_players, "opponent": "random"}
    env = AzulEnv(num_envs=num_envs, seed=0, **kwargs)
    single = env_games_per_second(env, seconds)
    env.close()
    vector = puffercore.vector.make(AzulEnv, num_envs, backend="threads", num_workers=2, seed=0, **kwargs)
    threads = env_games_per_second(vector, seconds)
    vector.close()
    return single, threads


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--native-games", type=int, default=20000)
    parser.add_argument("--view-games", type=int, default=300)
    parser.add_argument("--reference-games", type=int, default=30)
    parser.add_argument("--vector-envs", type=int, default=1024)
    parser.add_argument("--vector-seconds", type=float, default=3.0)
    args = parser.parse_args()
    random.seed(0)
    print(f"{'players':>7} {'native':>16} {'python view':>16} {'plain python':>16} {'native/py':>10} {'view/py':>8}")
    rates = {}
    for num_players in (2, 3, 4):
        native_gps, moves = games_per_second(native(num_players), args.native_games)
        view_gps, _ = games_per_second(view(num_players), args.view_games)
        reference_gps, _ = games_per_second(plain_python(num_players), args.reference_games)
        print(f"{num_players:>7} {native_gps:11.0f} g/s {view_gps:11.1f} g/s {reference_gps:11.1f} g/s "
              f"{native_gps / reference_gps:9.0f}x {view_gps / reference_gps:7.1f}x   ({moves:.0f} moves/game)")
        rates[num_players] = native_gps, reference_gps

    print(f"\nRL env puffercore.ocean.AzulEnv, {args.vector_envs} envs, random agent vs random opponents:")
    print(f"{'players':>7} {'env, 1 thread':>22} {'threads x2':>22} {'threads/1':>10} {'threads/native':>15} "
          f"{'threads/py':>11}")
    for num_players in (2, 3, 4):
        native_gps, reference_gps = rates[num_players]
        (single, single_cores), (threads, threads_cores) = vector_rates(num_players, args.vector_envs,
                                                                        args.vector_seconds)
        print(f"{num_players:>7} {single:9.0f} g/s ({single_cores:3.1f} cores) "
              f"{threads:9.0f} g/s ({threads_cores:3.1f} cores) {threads / single:9.2f}x "
              f"{threads / native_gps:14.2f}x {threads / reference_gps:10.0f}x")


if __name__ == "__main__":
    main()
