"""A trained AlphaZero network as a player (`AlphaZeroAgent`: a greedy, noise-free MCTS)
and matches against opponents (`play_against`), in both seats.

    agent = AlphaZeroAgent.load("runs/alphazero-connect4-...")
    rates = play_against(agent, RandomAgent, games=20, seed=0)   # {"win": ..., "draw": ..., ...}
"""

from __future__ import annotations

import os

import numpy as np

from puffercore import checkpoint, run
from puffercore.alphazero.agents import GreedyAzulAgent
from puffercore.alphazero.config import GAMES, AlphaZeroConfig
from puffercore.alphazero.mcts import BatchedMCTS
from puffercore.alphazero.network import CachedEvaluator, PolicyValueNet, build_network, make_evaluator
from puffercore.config_files import saved_config
from puffercore.seeding import derive_seed

# Evaluation opponents beyond the random agent and the MCTS baseline every game gets.
GAME_OPPONENTS = {"azul": {"greedy": lambda game_seed: GreedyAzulAgent()}}


class AlphaZeroAgent:
    """A trained network behind a greedy (no noise, most visited) MCTS."""

    def __init__(self, network: PolicyValueNet, config: AlphaZeroConfig):
        self.network = network.eval()
        self.config = config
        self.game = GAMES[config.game]()
        self.evaluate = make_evaluator(self.network, config.inference_precision, config.inference_trace)
        if config.evaluation_cache:  # evaluation games start alike: their searches repeat positions
            self.evaluate = CachedEvaluator(self.evaluate, config.evaluation_cache)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "AlphaZeroAgent":
        """From a checkpoint file or a run directory holding checkpoint.pt."""
        state, config = load_checkpoint(path)
        network = build_network(config)
        network.load_state_dict(state["network"])
        return cls(network, config)

    def search(self, batch_size: int, simulations: int | None = None, seed: int = 0):
        """A noise-free BatchedMCTS for this agent's games."""
        return BatchedMCTS(self.game, batch_size, num_simulations=simulations or self.config.eval_simulations,
                           root_noise=False, seed=seed, **self.config.search_options())

    def act(self, state, simulations: int | None = None) -> int:
        if state.game != self.game:
            raise ValueError(f"this agent plays {self.game.name}, got a {state.game.name} state")
        if state.is_terminal():
            raise ValueError("state is terminal; there is no move to choose")
        mcts = self.search(1, simulations)
        mcts.search([state], self.evaluate)
        return mcts.choose_action(0, temperature=0.0)


def load_checkpoint(path: str | os.PathLike) -> tuple[dict, AlphaZeroConfig]:
    """The state and config of an AlphaZero checkpoint (a file or a run directory),
    checked before anything is built from them: the config field by field, the game
    among those puffercore plays, the network's weights against the sizes the config
    gives (`checkpoint.check_weights`); ValueError naming the file otherwise."""
    path = run.checkpoint_path(path)
    state = checkpoint.load(path, required=("alphazero_config", "network"), kind="an AlphaZero checkpoint")
    config = saved_config(AlphaZeroConfig, state["alphazero_config"], path)
    checkpoint.check_weights(lambda: build_network(config), state["network"], path)
    return state, config


def play_against(agent: AlphaZeroAgent, make_opponent, games: int, seed: int,
                 simulations: int | None = None) -> dict[str, float]:
    """`games` games of the agent (`simulations` per move, default its evaluation setting)
    against `make_opponent(seed)` (an object with `act(state) -> action`, and optionally
    `observe(action)`, told every move of its game, its own included), which plays every
    other seat of its game. The agent takes each seat in turn for an equal share of the
    games (seat 0 in the first, seat 1 in the next, ...); all its searches run in one
    batch. Returns its win, draw and loss rates (a win: a return above every other
    seat's), its win rate in each seat (`win_seat0`, ...: a first-mover edge hides in the
    overall rate) and `margin`, its mean return minus the mean of the others' (Azul:
    points / 100)."""
    num_players = agent.config.num_players
    if games % num_players:
        raise ValueError(f"games must be a multiple of num_players={num_players} (the agent plays every seat), "
                         f"got {games}")
    seeds = [derive_seed(seed, index) for index in range(games)]
    opponents = [make_opponent(game_seed) for game_seed in seeds]
    agent_seats = [index * num_players // games for index in range(games)]
    states = [agent.game.new_state(seed=game_seed, num_players=num_players) for game_seed in seeds]
    mcts = agent.search(games, simulations, seed=seed)

    def play(index: int, action: int) -> None:
        states[index].apply(action)
        observe = getattr(opponents[index], "observe", None)
        if observe is not None:  # an opponent that keeps its own copy of the game
            observe(action)
        if mcts.root_state(index) is not None:  # keep the agent's tree for its next move
            mcts.advance(index, action)

    while True:
        for index, state in enumerate(states):
            while not state.is_terminal() and state.current_player() != agent_seats[index]:
                play(index, opponents[index].act(state))
        to_search = [None if state.is_terminal() else state for state in states]
        if all(state is None for state in to_search):
            break
        mcts.search(to_search, agent.evaluate)
        for index, state in enumerate(to_search):
            if state is not None:
                play(index, mcts.choose_action(index, temperature=0.0))
    outcomes, margins = [], []
    for state, seat in zip(states, agent_seats):
        returns = state.returns()
        others = np.delete(returns, seat)
        outcomes.append(np.sign(returns[seat] - others.max()))
        margins.append(returns[seat] - others.mean())
    outcomes, agent_seats = np.array(outcomes), np.array(agent_seats)
    return {"win": float((outcomes > 0).mean()), "draw": float((outcomes == 0).mean()),
            "loss": float((outcomes < 0).mean()), "margin": float(np.mean(margins)),
            **{f"win_seat{seat}": float((outcomes[agent_seats == seat] > 0).mean()) for seat in range(num_players)}}
