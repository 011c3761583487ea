"""AlphaZero's self-play: games played by the batched native MCTS, every search round one
network forward for all the games' leaves (inference on the CPU under no_grad).

With playout cap randomization (KataGo; `full_search_fraction` < 1) a move gets the full
search (`simulations`, root noise) with that probability and is recorded for training;
the other moves get a cheap search (`fast_simulations`, no noise) that only plays the
game on: more games, and so more game results, for the same evaluations.

    played = play_iteration(game, config, network, search_seed, game_seeds)
    for history, result, moves in played:
        replay.add_game(history, result, moves, config.search_value_weight, config.value_discount)
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from puffercore.alphazero.config import AlphaZeroConfig
from puffercore.alphazero.mcts import BatchedMCTS, game_utility
from puffercore.alphazero.network import CachedEvaluator, PolicyValueNet, make_evaluator
from puffercore.seeding import derive_seed


def play_iteration(game, config: AlphaZeroConfig, network: PolicyValueNet, search_seed: int,
                   game_seeds: list[int]) -> list[tuple[list, np.ndarray, int]]:
    """Play one iteration's games, game g from `game_seeds[g]`; returns (history, result,
    moves played) per game in game order (result: the final returns as the search values
    them, `game_utility` with the config's lead_returns and outcome_weight), a history
    holding (observation, legal mask, search policy, player to move, root search value by
    seat, whether the solver proved it, moves played before it) per move recorded for
    training (every full search).

    With self_play_threads = T, game g is played by thread g % T, each thread with its
    own batched search (seeded by `search_seed` and its index) over its share of
    parallel_games; the native search and torch's forward release the GIL, so one
    thread's tree work overlaps another's network pass. The result depends on the seeds
    and T, not on thread timing."""
    games = len(game_seeds)
    threads = min(config.self_play_threads, games)
    evaluate = make_evaluator(network, config.inference_precision, config.inference_trace)
    shares = [range(k, games, threads) for k in range(threads)]
    slots = max(1, config.parallel_games // threads)

    def play_share(k: int) -> list[tuple]:
        if threads > 1:
            # The threads share the cores: intra-op threads would fight them. The
            # setting is per thread (OpenMP), so each pool thread makes its own.
            torch.set_num_threads(1)
        # A cache per thread: which thread evaluates a position first must not change results.
        cached = CachedEvaluator(evaluate, config.evaluation_cache) if config.evaluation_cache else evaluate
        return play_games(game, config, shares[k], game_seeds, slots, derive_seed(search_seed, k), cached)

    if threads == 1:
        parts = [play_share(0)]
    else:
        with ThreadPoolExecutor(threads) as pool:
            parts = list(pool.map(play_share, range(threads)))
    played = sorted((played_game for part in parts for played_game in part), key=lambda played_game: played_game[0])
    return [played_game[1:] for played_game in played]


def play_games(game, config: AlphaZeroConfig, numbers: range, game_seeds: list[int], slots: int, search_seed: int,
               evaluate) -> list[tuple]:
    """Play the games `numbers` (game g from `game_seeds[g]`), up to `slots` at once in one
    batched search; returns (number, history, result, moves played) per game, in the
    order they end.
    A game stops at its end or after max_moves moves (scored by its returns so far)."""
    max_moves = config.max_moves or game.max_moves
    slots = min(slots, len(numbers))
    full_search_draws = np.random.default_rng(search_seed)
    mcts = BatchedMCTS(game, slots, num_simulations=config.simulations, dirichlet_alpha=config.dirichlet_alpha,
                       dirichlet_epsilon=config.dirichlet_epsilon, seed=search_seed, **config.search_options())
    states: list = [None] * slots
    slot_games = [-1] * slots
    moves_played = [0] * slots
    histories: list[list] = [[] for _ in range(slots)]
    to_start = iter(numbers)
    played = []

    def start_game(slot: int) -> None:  # the slot's next game, or None once all have started
        histories[slot] = []
        moves_played[slot] = 0
        mcts.reset(slot)
        states[slot] = None
        number = next(to_start, None)
        if number is not None:
            states[slot] = game.new_state(seed=game_seeds[number], num_players=config.num_players)
            slot_games[slot] = number

    for slot in range(slots):
        start_game(slot)
    while any(state is not None for state in states):
        full = full_search_draws.random(slots) < config.full_search_fraction
        simulations = np.where(full, config.simulations, min(config.fast_simulations, config.simulations))
        policies = mcts.search(states, evaluate, simulations=simulations, noise=full)
        for slot, state in enumerate(states):
            if state is None:
                continue
            if full[slot]:
                proven = mcts.proven_value(slot)
                search_value = proven if proven is not None else mcts.root_value(slot)
                histories[slot].append((state.observation(), state.legal_mask(), policies[slot],
                                        state.current_player(), search_value, proven is not None,
                                        moves_played[slot]))
            moves_played[slot] += 1
            temperature = 1.0 if moves_played[slot] <= config.temperature_moves else 0.0
            action = mcts.choose_action(slot, temperature)
            state.apply(action)
            mcts.advance(slot, action)
            if state.is_terminal() or moves_played[slot] >= max_moves:
                result = game_utility(state.returns(), config.lead_returns, config.outcome_weight)
                played.append((slot_games[slot], histories[slot], result, moves_played[slot]))
                start_game(slot)
    return played
