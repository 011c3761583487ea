"""Azul bots head to head: the greedy bot against the random agent or the plain MCTS
(UCT) baseline, seats alternating game by game, table draws seeded per game.

    python bench/azul_strength.py --opponent random --games 200
    python bench/azul_strength.py --opponent uct --simulations 1000 --games 200

With more than 2 players the greedy bot plays one seat against copies of the opponent.
Prints wins (sole winner after the complete-rows tie-break), shared wins, losses and the
mean score margin over the opponents' mean.
"""

import argparse
import time

import numpy as np

from puffercore.alphazero import GreedyAzulAgent, MCTSBaseline, RandomAgent
from puffercore.azul import Azul


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opponent", choices=["random", "uct"], default="random")
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--players", type=int, default=2)
    parser.add_argument("--simulations", type=int, default=1000)
    args = parser.parse_args()

    def opponent(game_index):
        if args.opponent == "random":
            return RandomAgent(seed=game_index)
        return MCTSBaseline(simulations=args.simulations, seed=game_index)

    wins = shared = 0
    margins = []
    start = time.perf_counter()
    for game_index in range(args.games):
        seat = game_index % args.players
        agents = [opponent(game_index) for _ in range(args.players)]
        agents[seat] = GreedyAzulAgent()
        state = Azul().new_state(seed=10_000 + game_index, num_players=args.players)
        while not state.is_terminal():
            state.apply(agents[state.current_player()].act(state))
        winners, scores = state.winners(), state.scores()
        wins += winners == [seat]
        shared += seat in winners and len(winners) > 1
        margins.append(scores[seat] - np.mean([s for k, s in enumerate(scores) if k != seat]))
    losses = args.games - wins - shared
    name = args.opponent if args.opponent == "random" else f"uct{args.simulations}"
    print(f"greedy vs {name}, {args.players} players, {args.games} games: {wins} wins, {shared} shared, "
          f"{losses} losses ({wins / args.games:.1%} won), mean margin {np.mean(margins):+.1f} "
          f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
