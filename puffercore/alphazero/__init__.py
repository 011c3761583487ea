"""AlphaZero on puffercore games: batched native MCTS (`puffercore.alphazero.mcts`),
evaluation opponents (`puffercore.alphazero.agents`), the settings (`config`), the
policy-value network (`network`), self-play (`self_play`), the replay buffer (`replay`),
the trained agent and its matches (`evaluation`) and the training loop (`trainer`)."""

from puffercore.alphazero.agents import GreedyAzulAgent, MCTSBaseline, RandomAgent
from puffercore.alphazero.mcts import BatchedMCTS, mcts_baseline_move, uniform_evaluator
from puffercore.alphazero.network import PolicyValueNet
from puffercore.alphazero.config import AlphaZeroConfig
from puffercore.alphazero.evaluation import AlphaZeroAgent
from puffercore.alphazero.trainer import Trainer, train

__all__ = [
    "AlphaZeroAgent", "AlphaZeroConfig", "BatchedMCTS", "GreedyAzulAgent", "MCTSBaseline", "PolicyValueNet",
    "RandomAgent", "Trainer", "mcts_baseline_move", "train", "uniform_evaluator",
]
