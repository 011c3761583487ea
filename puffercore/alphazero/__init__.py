"""AlphaZero on puffercore games: batched native MCTS (`puffercore.alphazero.mcts`) and
evaluation opponents (`puffercore.alphazero.agents`)."""

from puffercore.alphazero.agents import GreedyAzulAgent, MCTSBaseline, RandomAgent
from puffercore.alphazero.mcts import BatchedMCTS, mcts_baseline_move, uniform_evaluator

__all__ = [
    "BatchedMCTS", "GreedyAzulAgent", "MCTSBaseline", "RandomAgent", "mcts_baseline_move", "uniform_evaluator",
]
