"""AlphaZero's self-play: games played by the batched native MCTS, every search round one
network forward for all the games' leaves (inference under no_grad, on the CPU or, with
`device` cuda, batched on the GPU: `alphazero.device`).

With playout cap randomization (KataGo; `full_search_fraction` < 1) a move gets the full
search (`simulations`, root noise) with that probability and is recorded for training;
the other moves get a cheap search (`fast_simulations`, no noise) that only plays the
game on: more games, and so more game results, for the same evaluations.

With `carry_games` the games unfinished at an iteration's end go on in the next one, so
every forward is a full batch (the trainer keeps them, and saves them with its
checkpoint as their actions so far).

    played, under_way = play_iteration(game, config, network, search_seed, new_game, first_number, carried)
    for history, result, moves in played:
        replay.add_game(history, result, moves, config.search_value_weight, config.value_discount)
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import torch

from puffercore.alphazero.config import AlphaZeroConfig
from puffercore.alphazero.mcts import BatchedMCTS, game_utility
from puffercore.alphazero.network import CachedEvaluator, PolicyValueNet, make_evaluator
from puffercore.seeding import derive_seed


@dataclass
class GameInPlay:
    """A self-play game under way: its number (its order, and its seed's index), its
    position, the history recorded so far (the tuples `play_iteration` describes) and the
    actions played (which rebuild the position from the game's seed)."""
    number: int
    state: object
    history: list = field(default_factory=list)
    actions: list = field(default_factory=list)

    @property
    def moves(self) -> int:
        return len(self.actions)


def play_iteration(game, config: AlphaZeroConfig, network: PolicyValueNet, search_seed: int, new_game,
                   first_number: int, carried: list[GameInPlay] = ()) -> tuple[list[tuple], list[GameInPlay]]:
    """Play one iteration's games: `config.games_per_iteration` of them finish. Game
    number n starts from `new_game(n)`, its first position; the new games are numbered from
    `first_number` on. Returns (history, result, moves played) per finished game in game
    order (result: the final returns as the search values them, `game_utility` with the
    config's lead_returns and outcome_weight), a history holding (observation, legal mask,
    search policy, player to move, root search value by seat, whether the solver proved
    it, moves played before it) per move recorded for training (every full search), and
    the games still under way.

    Without `config.carry_games` the iteration plays exactly its games, the last rounds
    with slots emptying as games end, and none is left under way. With it the slots stay
    full: a slot whose game ends starts the next, the iteration ends once its quota has
    finished, and the games still under way (with `carried`, the last iteration's) go
    on in the next one, searched from a fresh tree by the new network (KataGo's
    continuous self-play); `parallel_games` may then exceed games_per_iteration.

    With self_play_threads = T (no carrying), game g is played by thread g % T, each
    thread with its own batched search (seeded by `search_seed` and its index) over its
    share of parallel_games; the native search and torch's forward release the GIL, so
    one thread's tree work overlaps another's network pass. The result depends on the
    seeds and T, not on thread timing."""
    games = config.games_per_iteration
    threads = 1 if config.carry_games else min(config.self_play_threads, games)
    slots = config.parallel_games if config.carry_games else max(1, config.parallel_games // threads)
    # On a CUDA device each thread gets a lane of its own (`alphazero.device`).
    evaluate = make_evaluator(network, config.inference_precision, config.inference_trace, lanes=threads,
                              max_rows=slots)
    if config.carry_games:
        cached = CachedEvaluator(evaluate, config.evaluation_cache) if config.evaluation_cache else evaluate
        finished, under_way = play_games(game, config, itertools.count(first_number), new_game, config.parallel_games,
                                         search_seed, cached, carried, quota=games)
        return [played_game[1:] for played_game in sorted(finished, key=lambda played: played[0])], under_way
    shares = [range(first_number + k, first_number + games, threads) for k in range(threads)]

    def play_share(k: int) -> list[tuple]:
        if threads > 1:
            # The threads share the cores: intra-op threads would fight them. The
            # setting is the process's, not the thread's: training sets its own again.
            torch.set_num_threads(1)
        # A cache per thread: which thread evaluates a position first must not change results.
        cached = CachedEvaluator(evaluate, config.evaluation_cache) if config.evaluation_cache else evaluate
        slots_used = min(slots, len(shares[k]))
        return play_games(game, config, shares[k], new_game, slots_used, derive_seed(search_seed, k), cached,
                          quota=len(shares[k]))[0]

    if threads == 1:
        parts = [play_share(0)]
    else:
        with ThreadPoolExecutor(threads) as pool:
            parts = list(pool.map(play_share, range(threads)))
    played = sorted((played_game for part in parts for played_game in part), key=lambda played_game: played_game[0])
    return [played_game[1:] for played_game in played], []


def play_games(game, config: AlphaZeroConfig, numbers: Iterable[int], new_game, slots: int, search_seed: int,
               evaluate, carried: list[GameInPlay] = (), quota: int | None = None) -> tuple[list[tuple], list[GameInPlay]]:
    """Play games in `slots` slots of one batched search: the `carried` games first (each
    from a fresh tree), then the games `numbers` yields (game n from
    `new_game(n)`) as slots free, until `quota` games have finished (default: until
    `numbers` runs out and every game has ended). Returns (number, history, result, moves
    played) per finished game, in the order they end, and the games still under way.
    A game stops at its end or after max_moves moves (scored by its returns so far)."""
    max_moves = config.max_moves or game.max_moves
    numbers = iter(numbers)
    full_search_draws = np.random.default_rng(search_seed)
    mcts = BatchedMCTS(game, slots, num_simulations=config.simulations, dirichlet_alpha=config.dirichlet_alpha,
                       dirichlet_epsilon=config.dirichlet_epsilon, seed=search_seed, **config.search_options())
    in_slot: list[GameInPlay | None] = [None] * slots
    waiting = list(carried)[::-1]  # popped from the end: in the order given
    played = []

    def start_game(slot: int) -> None:  # the slot's next game, or None once all have started
        mcts.reset(slot)
        if waiting:
            in_slot[slot] = waiting.pop()
            return
        number = next(numbers, None)
        in_slot[slot] = None if number is None else GameInPlay(number, new_game(number))

    for slot in range(slots):
        start_game(slot)
    while any(playing is not None for playing in in_slot) and (quota is None or len(played) < quota):
        states = [None if playing is None else playing.state for playing in in_slot]
        full = full_search_draws.random(slots) < config.full_search_fraction
        simulations = np.where(full, config.simulations, min(config.fast_simulations, config.simulations))
        policies = mcts.search(states, evaluate, simulations=simulations, noise=full)
        for slot, playing in enumerate(in_slot):
            if playing is None:
                continue
            state = playing.state
            if full[slot]:
                proven = mcts.proven_value(slot)
                search_value = proven if proven is not None else mcts.root_value(slot)
                playing.history.append((state.observation(), state.legal_mask(), policies[slot],
                                        state.current_player(), search_value, proven is not None, playing.moves))
            temperature = 1.0 if playing.moves < config.temperature_moves else 0.0
            action = mcts.choose_action(slot, temperature)
            playing.actions.append(action)
            state.apply(action)
            mcts.advance(slot, action)
            if state.is_terminal() or playing.moves >= max_moves:
                result = game_utility(state.returns(), config.lead_returns, config.outcome_weight)
                played.append((playing.number, playing.history, result, playing.moves))
                start_game(slot)
    under_way = [playing for playing in in_slot if playing is not None] + waiting[::-1]
    return played, sorted(under_way, key=lambda playing: playing.number)


def games_state_dict(games: list[GameInPlay]) -> list[dict]:
    """Games under way as tensors a checkpoint holds (`load_games` reads them back)."""
    saved = []
    for playing in games:
        columns = list(zip(*playing.history))
        history = None if not columns else [torch.from_numpy(np.stack(column)) if isinstance(column[0], np.ndarray)
                                            else torch.tensor(column) for column in columns]
        saved.append({"number": playing.number, "actions": torch.tensor(playing.actions, dtype=torch.int64),
                      "history": history})
    return saved


def load_games(saved: list[dict], new_state) -> list[GameInPlay]:
    """The games `games_state_dict` saved, each position rebuilt by replaying its actions
    from `new_state(number)`, the game's start."""
    games = []
    for entry in saved:
        state, actions = new_state(entry["number"]), entry["actions"].tolist()
        for action in actions:
            state.apply(action)
        columns = [column.numpy() if column.dim() > 1 else column.tolist() for column in entry["history"] or ()]
        games.append(GameInPlay(entry["number"], state, [tuple(row) for row in zip(*columns)], actions))
    return games
