"""Opponents for evaluating AlphaZero agents: `act(state) -> action` for any game."""

from __future__ import annotations

import numpy as np

from puffercore._search import mcts_baseline_move
from puffercore.azul import GreedyAzulAgent  # noqa: F401 (an opponent of this module's kind; lives with its game)
from puffercore.games import GameState
from puffercore.seeding import check_seed


def _check_live_state(state) -> None:
    if not isinstance(state, GameState):
        raise TypeError(f"state must be a GameState, got {type(state).__name__}")
    if state.is_terminal():
        raise ValueError("state is terminal; there is no move to choose")


class RandomAgent:
    """Uniformly random legal moves from its own seeded generator."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(check_seed(seed))

    def act(self, state: GameState) -> int:
        _check_live_state(state)
        legal = state.legal_actions()
        return legal[int(self.rng.integers(len(legal)))]


class MCTSBaseline:
    """Plain MCTS (UCT, random rollouts) with `simulations` per move. Each move gets the
    next seed of a seeded sequence, so a game replays exactly from the agent's seed."""

    def __init__(self, simulations: int = 1000, uct_c: float = 2.0, seed: int = 0):
        self.simulations = simulations
        self.uct_c = uct_c
        self.seeds = np.random.SeedSequence(check_seed(seed))

    def act(self, state: GameState) -> int:
        _check_live_state(state)
        move_seed = int(self.seeds.spawn(1)[0].generate_state(1, np.uint64)[0])
        action, _ = mcts_baseline_move(state, self.simulations, self.uct_c, move_seed)
        return action
