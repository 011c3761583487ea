"""AlphaZero self-play throughput: games per minute of the trainer's self-play with the
game's preset network (untrained; the cost per game barely depends on the weights):
batched (all games' leaves in one network forward per MCTS round) on 1 and 2 self-play
threads, against the same search run one game at a time (one forward per leaf), and the
ratios.

    python bench/bench_alphazero_selfplay.py [--game connect4] [--games 64] [--simulations 64]
"""

from __future__ import annotations

import argparse
import time

from puffercore.alphazero.trainer import AlphaZeroConfig, Trainer


def games_per_minute(config: AlphaZeroConfig) -> float:
    trainer = Trainer(config)
    start = time.perf_counter()
    trainer.self_play()
    return config.games_per_iteration / (time.perf_counter() - start) * 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="connect4", choices=["connect4", "tictactoe", "azul"])
    parser.add_argument("--games", type=int, default=64, help="self-play games per measurement")
    parser.add_argument("--simulations", type=int, default=None, help="MCTS simulations per move (default: preset)")
    parser.add_argument("--torch-threads", type=int, default=2, help="torch threads of the one-thread rows")
    args = parser.parse_args()
    overrides = dict(games_per_iteration=args.games, torch_threads=args.torch_threads)
    if args.simulations:
        overrides["simulations"] = args.simulations

    def measure(parallel_games: int, self_play_threads: int) -> float:
        return games_per_minute(AlphaZeroConfig.for_game(
            args.game, parallel_games=parallel_games, self_play_threads=self_play_threads, **overrides))

    two_threads = measure(args.games, 2)
    one_thread = measure(args.games, 1)
    single = measure(1, 1)
    config = AlphaZeroConfig.for_game(args.game, **overrides)
    print(f"{args.game} self-play, {config.simulations} simulations per move, "
          f"{config.channels}x{config.blocks} network, {args.games} games")
    print(f"  batched, 2 self-play threads ({args.games // 2} games per forward each): {two_threads:8.1f} games/min")
    print(f"  batched, 1 thread ({args.games} games per forward, {args.torch_threads} torch threads): {one_thread:8.1f} games/min")
    print(f"  one game at a time, 1 thread:                {single:8.1f} games/min")
    print(f"  ratio 2 threads / 1 thread:                  {two_threads / one_thread:8.2f}x")
    print(f"  ratio batched (1 thread) / one at a time:    {one_thread / single:8.2f}x")


if __name__ == "__main__":
    main()
