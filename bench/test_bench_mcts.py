"""pytest-benchmark suite for the MCTS code (run: python -m pytest bench/test_bench_mcts.py).
Same measurements as bench_mcts.py; OpenSpiel's MCTSBot is the peer when installed."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ is not a package
from bench_mcts import connect4_after, openspiel_bot_and_states, random_openings  # noqa: E402
from puffercore.alphazero import BatchedMCTS, mcts_baseline_move, uniform_evaluator
from puffercore.games import Connect4

SIMULATIONS = 1000
OPENINGS = random_openings(10)


@pytest.mark.parametrize("batch_size", [1, 64, 256])
def test_batched_search_200_simulations(benchmark, batch_size):
    mcts = BatchedMCTS(Connect4(), batch_size, num_simulations=200, seed=0)
    positions = [connect4_after(moves) for moves in random_openings(batch_size, seed=batch_size)]

    def fresh_search():
        for i in range(batch_size):
            mcts.reset(i)
        return mcts.search(positions, uniform_evaluator)

    policies = benchmark(fresh_search)
    assert policies.shape == (batch_size, 7)


def test_puffercore_baseline_1000_simulations(benchmark):
    positions = [connect4_after(moves) for moves in OPENINGS]
    actions = benchmark(lambda: [mcts_baseline_move(state, SIMULATIONS, 2.0, 0)[0] for state in positions])
    assert len(actions) == len(positions)


def test_openspiel_mctsbot_1000_simulations(benchmark):
    peer = openspiel_bot_and_states(OPENINGS, SIMULATIONS, 2.0)
    if peer is None:
        pytest.skip("open-spiel is not installed")
    bot, states = peer
    actions = benchmark(lambda: [bot.step(state) for state in states])
    assert len(actions) == len(states)
