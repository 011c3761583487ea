"""Azul random-play throughput, single thread: whole games of uniformly random legal moves
played by the native engine in a C loop, through the Python view (legal_mask + apply per
move), and by the plain-Python reference engine of the tests (tests/azul_reference.py).

    python bench/bench_azul.py [--native-games 20000] [--view-games 300] [--reference-games 30]

Each row plays fresh games from seeds 0, 1, ...; the ratios are native and view games/s
over the reference's. (Vector-engine throughput comes with the vector env view of Azul.)
"""

import argparse
import os
import random
import sys
import time

import numpy as np

from puffercore.azul import Azul, random_games

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--native-games", type=int, default=20000)
    parser.add_argument("--view-games", type=int, default=300)
    parser.add_argument("--reference-games", type=int, default=30)
    args = parser.parse_args()
    random.seed(0)
    print(f"{'players':>7} {'native':>16} {'python view':>16} {'plain python':>16} {'native/py':>10} {'view/py':>8}")
    for num_players in (2, 3, 4):
        native_gps, moves = games_per_second(native(num_players), args.native_games)
        view_gps, _ = games_per_second(view(num_players), args.view_games)
        reference_gps, _ = games_per_second(plain_python(num_players), args.reference_games)
        print(f"{num_players:>7} {native_gps:11.0f} g/s {view_gps:11.1f} g/s {reference_gps:11.1f} g/s "
              f"{native_gps / reference_gps:9.0f}x {view_gps / reference_gps:7.1f}x   ({moves:.0f} moves/game)")


if __name__ == "__main__":
    main()
