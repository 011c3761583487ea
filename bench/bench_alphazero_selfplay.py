"""AlphaZero self-play throughput: games per minute of the trainer's self-play with the
game's preset network (untrained; the cost per game barely depends on the weights),
batched (all games' leaves in one network forward per MCTS round) against the same
search run one game at a time (one forward per leaf), and the ratio.

    python bench/bench_alphazero_selfplay.py [--game connect4] [--games 32] [--simulations 64]
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
    parser.add_argument("--game", default="connect4", choices=["connect4", "tictactoe"])
    parser.add_argument("--games", type=int, default=32, help="self-play games per measurement")
    parser.add_argument("--simulations", type=int, default=None, help="MCTS simulations per move (default: preset)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    args = parser.parse_args()
    overrides = dict(games_per_iteration=args.games, torch_threads=args.threads)
    if args.simulations:
        overrides["simulations"] = args.simulations
    batched = games_per_minute(AlphaZeroConfig.for_game(args.game, parallel_games=args.games, **overrides))
    single = games_per_minute(AlphaZeroConfig.for_game(args.game, parallel_games=1, **overrides))
    config = AlphaZeroConfig.for_game(args.game, **overrides)
    print(f"{args.game} self-play, {config.simulations} simulations per move, "
          f"{config.channels}x{config.blocks} network, {args.threads} torch threads, {args.games} games")
    print(f"  batched ({args.games} games per forward): {batched:8.1f} games/min")
    print(f"  one game at a time:                {single:8.1f} games/min")
    print(f"  ratio batched / one at a time:     {batched / single:8.2f}x")


if __name__ == "__main__":
    main()
