"""MCTS throughput on Connect4.

1. Batched AlphaZero MCTS (puffercore.alphazero.BatchedMCTS) at B = 1, 64, 256 games
   with the uniform evaluator, so the tree code and the per-round Python hand-off are
   what is measured: simulations per second over all games.
2. The plain MCTS baseline (UCT, one random rollout per simulation) against OpenSpiel's
   C++ `pyspiel.MCTSBot` with `RandomRolloutEvaluator(1)`, same uct_c and simulation
   count, same positions: milliseconds per move and the ratio.

    python bench/bench_mcts.py [--simulations 1000] [--positions 20]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from puffercore.alphazero import BatchedMCTS, mcts_baseline_move, uniform_evaluator
from puffercore.games import Connect4


def random_openings(count: int, seed: int = 0, max_length: int = 10) -> list[list[int]]:
    """Move lists of random Connect4 openings (0..max_length-1 moves) that leave the game live."""
    rng = np.random.default_rng(seed)
    openings = []
    while len(openings) < count:
        state, moves = Connect4().new_state(), []
        for _ in range(int(rng.integers(max_length))):
            moves.append(int(rng.choice(state.legal_actions())))
            state.apply(moves[-1])
            if state.is_terminal():
                break
        if not state.is_terminal():
            openings.append(moves)
    return openings


def connect4_after(moves: list[int]):
    state = Connect4().new_state()
    for move in moves:
        state.apply(move)
    return state


def batched_sims_per_second(batch_size: int, simulations: int, searches: int) -> float:
    mcts = BatchedMCTS(Connect4(), batch_size, num_simulations=simulations, seed=0)
    positions = [connect4_after(moves) for moves in random_openings(batch_size, seed=batch_size)]
    mcts.search(positions, uniform_evaluator)  # warm-up, and fills the pools once
    start = time.perf_counter()
    for _ in range(searches):
        for i in range(batch_size):
            mcts.reset(i)
        mcts.search(positions, uniform_evaluator)
    return batch_size * simulations * searches / (time.perf_counter() - start)


def puffercore_ms_per_move(openings, simulations: int, uct_c: float) -> float:
    positions = [connect4_after(moves) for moves in openings]
    start = time.perf_counter()
    for seed, state in enumerate(positions):
        mcts_baseline_move(state, simulations, uct_c, seed)
    return 1000 * (time.perf_counter() - start) / len(positions)


def openspiel_bot_and_states(openings, simulations: int, uct_c: float):
    """OpenSpiel's MCTSBot with one random rollout per simulation, and the openings as
    OpenSpiel states; None when open-spiel is not installed."""
    try:
        import pyspiel
    except ImportError:
        return None
    game = pyspiel.load_game("connect_four")
    bot = pyspiel.MCTSBot(game, pyspiel.RandomRolloutEvaluator(1, 0), uct_c, simulations, 1000, False, 0, False)
    states = []
    for moves in openings:
        state = game.new_initial_state()
        for move in moves:
            state.apply_action(move)
        states.append(state)
    return bot, states


def openspiel_ms_per_move(openings, simulations: int, uct_c: float) -> float | None:
    peer = openspiel_bot_and_states(openings, simulations, uct_c)
    if peer is None:
        return None
    bot, states = peer
    start = time.perf_counter()
    for state in states:
        bot.step(state)
    return 1000 * (time.perf_counter() - start) / len(states)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--simulations", type=int, default=1000, help="baseline simulations per move")
    parser.add_argument("--positions", type=int, default=20, help="baseline positions timed")
    parser.add_argument("--batched-simulations", type=int, default=200, help="simulations per batched search")
    parser.add_argument("--uct-c", type=float, default=2.0)
    args = parser.parse_args()

    print(f"Batched AlphaZero MCTS, Connect4, uniform evaluator, {args.batched_simulations} simulations per search")
    for batch_size, searches in ((1, 20), (64, 3), (256, 1)):
        rate = batched_sims_per_second(batch_size, args.batched_simulations, searches)
        print(f"  B={batch_size:4d}: {rate:12,.0f} simulations/s")

    openings = random_openings(args.positions)
    print(f"\nPlain MCTS baseline, Connect4, {args.simulations} simulations, 1 random rollout each, "
          f"uct_c={args.uct_c}, {len(openings)} positions")
    ours = puffercore_ms_per_move(openings, args.simulations, args.uct_c)
    print(f"  puffercore mcts_baseline_move: {ours:8.2f} ms/move")
    peer = openspiel_ms_per_move(openings, args.simulations, args.uct_c)
    if peer is None:
        print("  OpenSpiel pyspiel.MCTSBot: unavailable (pip install open-spiel)")
    else:
        print(f"  OpenSpiel pyspiel.MCTSBot:     {peer:8.2f} ms/move")
        print(f"  ratio (OpenSpiel / puffercore): {peer / ours:.2f}x")


if __name__ == "__main__":
    main()
