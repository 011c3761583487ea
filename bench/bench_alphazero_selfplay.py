"""AlphaZero self-play throughput: games per minute of the trainer's self-play with the
game's preset network (untrained; the cost per game barely depends on the weights):
batched (all games' leaves in one network forward per MCTS round) on 1 and 2 self-play
threads, against the same search run one game at a time (one forward per leaf), and the
ratios. The threaded and one-thread rows play the preset's iteration (`--games`, all of
them at once); the one-at-a-time row plays `--single-games` games, as it is slow. Each row
is measured `--repeats` times, alternating, and its best is kept: the first runs of a
process pay torch's warm-up and this machine's noise is one-sided.

    python bench/bench_alphazero_selfplay.py [--game connect4] [--games 256] [--simulations 64]
"""

from __future__ import annotations

import argparse
import time

from puffercore.alphazero.config import AlphaZeroConfig
from puffercore.alphazero.trainer import Trainer


def games_per_minute(config: AlphaZeroConfig) -> float:
    trainer = Trainer(config)
    start = time.perf_counter()
    trainer.self_play()
    return config.games_per_iteration / (time.perf_counter() - start) * 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="connect4", choices=["connect4", "tictactoe", "azul"])
    parser.add_argument("--games", type=int, default=None,
                        help="self-play games per measurement (default: the preset's games per iteration)")
    parser.add_argument("--single-games", type=int, default=16, help="games of the one-at-a-time row")
    parser.add_argument("--simulations", type=int, default=None, help="MCTS simulations per move (default: preset)")
    parser.add_argument("--torch-threads", type=int, default=2, help="torch threads of the one-thread rows")
    parser.add_argument("--repeats", type=int, default=2, help="measurements per row (the best is kept)")
    args = parser.parse_args()
    overrides = dict(torch_threads=args.torch_threads)
    if args.simulations:
        overrides["simulations"] = args.simulations
    config = AlphaZeroConfig.for_game(args.game, **overrides)
    games = args.games or config.games_per_iteration

    rows = {"two_threads": dict(games_per_iteration=games, parallel_games=games, self_play_threads=2),
            "one_thread": dict(games_per_iteration=games, parallel_games=games, self_play_threads=1),
            "single": dict(games_per_iteration=args.single_games, parallel_games=1, self_play_threads=1)}
    best = dict.fromkeys(rows, 0.0)
    for _ in range(args.repeats):
        for name, settings in rows.items():
            measured = games_per_minute(AlphaZeroConfig.for_game(args.game, **overrides, **settings))
            best[name] = max(best[name], measured)

    print(f"{args.game} self-play, {config.simulations} simulations per move, "
          f"{config.channels}x{config.blocks} network, {games} games at once, best of {args.repeats}")
    print(f"  batched, 2 self-play threads ({games // 2} games per forward each): {best['two_threads']:8.1f} games/min")
    print(f"  batched, 1 thread ({games} games per forward, {args.torch_threads} torch threads): "
          f"{best['one_thread']:8.1f} games/min")
    print(f"  one game at a time, 1 thread:                {best['single']:8.1f} games/min")
    print(f"  ratio 2 threads / 1 thread:                  {best['two_threads'] / best['one_thread']:8.2f}x")
    print(f"  ratio batched (1 thread) / one at a time:    {best['one_thread'] / best['single']:8.2f}x")


if __name__ == "__main__":
    main()
