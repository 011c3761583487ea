"""Win rates against bots. A trained AlphaZero checkpoint against the evaluation
opponents, seats swapped: half the games in each seat, every game's chance events seeded.

    puffercore strength runs/alphazero-azul-0-... --games 200 --simulations 50 200
    puffercore strength c4_run --opponents openspiel --simulations 400 --games 200
    puffercore strength greedy --opponents random uct --uct-simulations 1000   # Azul's greedy bot

Opponents: random, uct (puffercore's plain UCT with random rollouts, which does not
solve), the game's own bots (greedy for Azul), and for Connect4 `openspiel`: OpenSpiel's
C++ MCTSBot with random-rollout simulations and solve=True (proven wins and losses
propagate up its tree), the strongest public MCTS (`pip install "puffercore[bench]"`).

A checkpoint gets one line per (agent simulations, opponent): win / draw / loss rates,
the mean return margin over the other seats (Azul: points / 100), the win rate in each
seat (seat 0 moves first) and seconds. With more than 2 players the opponent plays every
other seat. `greedy` is Azul's greedy bot head to head with random or UCT, seats
alternating game by game, table draws seeded per game: wins (sole winner after the
complete-rows tie-break), shared wins, losses and the mean score margin over the
opponents' mean.
"""

from __future__ import annotations

import time

import numpy as np

from puffercore.judges.connect4 import INSTALL

GREEDY = "greedy"  # the agent name of Azul's greedy bot
GREEDY_OPPONENTS = ("random", "uct")


class OpenSpielMCTS:
    """OpenSpiel's MCTSBot on Connect4 (`simulations` random-rollout simulations per move,
    uct_c 2, solve=True, seeded), following the game through `observe`."""

    def __init__(self, simulations: int, seed: int):
        try:
            import pyspiel
        except ImportError:
            raise ImportError(f"the openspiel opponent needs OpenSpiel: {INSTALL}") from None
        game = pyspiel.load_game("connect_four")
        evaluator = pyspiel.RandomRolloutEvaluator(1, seed % 2**31)
        self.bot = pyspiel.MCTSBot(game, evaluator, 2.0, simulations, 1000, True, seed % 2**31, False)
        self.state = game.new_initial_state()

    def observe(self, action: int) -> None:
        self.state.apply_action(action)

    def act(self, state) -> int:
        pieces = int(state.observation().sum())  # own and opponent planes: one 1 per piece
        if pieces != len(self.state.history()) or sorted(state.legal_actions()) != self.state.legal_actions():
            raise RuntimeError("OpenSpiel's copy of the game has left the real one: was every move observed?")
        return self.bot.step(self.state)


def _check_opponents(chosen: list[str], known) -> None:
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise ValueError(f"opponents must be among {sorted(known)}, got {unknown}")


def strength(checkpoint_path: str, games: int = 200, simulations: list[int | None] = (None,),
             opponents: list[str] | None = None, uct_simulations: int = 1000, seed: int = 1,
             threads: int = 2) -> tuple[str, dict]:
    """A checkpoint (file or run directory) against `opponents` (default: all of its
    game's), `games` games each at each agent simulation count (None: its evaluation
    setting); prints a line each and returns the game's name and {(simulations searched,
    opponent): rates}."""
    import torch

    from puffercore import checkpoint
    from puffercore.alphazero import MCTSBaseline, RandomAgent
    from puffercore.alphazero.evaluation import GAME_OPPONENTS, AlphaZeroAgent, play_against
    from puffercore.run import checkpoint_path as resolve_checkpoint_path
    from puffercore.seeding import derive_seed

    torch.set_num_threads(threads)
    agent = AlphaZeroAgent.load(checkpoint_path)
    players = agent.config.num_players
    if games < players or games % players:
        raise ValueError(f"games must be a positive multiple of the {players} players, got {games}")
    known = {"random": RandomAgent, "uct": lambda game_seed: MCTSBaseline(uct_simulations, seed=game_seed),
             **GAME_OPPONENTS.get(agent.config.game, {})}
    if agent.config.game == "connect4":
        known["openspiel"] = lambda game_seed: OpenSpielMCTS(uct_simulations, game_seed)
    chosen = list(opponents or known)
    _check_opponents(chosen, known)
    counters = checkpoint.load(resolve_checkpoint_path(checkpoint_path))["counters"]
    print(f"{agent.config.game}: {counters['seconds'] / 60:.1f} training minutes, {counters['games']} self-play games")
    results = {}
    for count in simulations:
        for index, name in enumerate(chosen):
            start = time.perf_counter()
            rates = play_against(agent, known[name], games, derive_seed(seed, index), count)
            searched = count or agent.config.eval_simulations
            results[(searched, name)] = rates
            seats = ", ".join(f"seat {seat}: {rates[f'win_seat{seat}']:.3f}" for seat in range(players))
            print(f"agent {searched} simulations vs {name}: "
                  f"win {rates['win']:.3f}  draw {rates['draw']:.3f}  loss {rates['loss']:.3f}  "
                  f"margin {rates['margin']:+.3f}  (wins in {seats})  "
                  f"({games} games, {time.perf_counter() - start:.0f} s)", flush=True)
    return agent.config.game, results


def greedy_azul(opponents: list[str] | None = None, games: int = 200, players: int = 2,
                uct_simulations: int = 1000) -> dict:
    """Azul's greedy bot in one seat (seat = game % players) against copies of each
    opponent (random, uct; default both); opponents seeded by the game's index, table
    draws by 10000 + index. Prints a line each and returns {opponent: result}."""
    from puffercore.alphazero import GreedyAzulAgent, MCTSBaseline, RandomAgent
    from puffercore.azul import Azul

    chosen = list(opponents or GREEDY_OPPONENTS)
    _check_opponents(chosen, GREEDY_OPPONENTS)
    if games < 1 or not 2 <= players <= 4:
        raise ValueError(f"games must be >= 1 and players 2-4, got {games} and {players}")

    def opponent(name: str, game_index: int):
        if name == "random":
            return RandomAgent(seed=game_index)
        return MCTSBaseline(simulations=uct_simulations, seed=game_index)

    results = {}
    for name in chosen:
        wins = shared = 0
        margins = []
        start = time.perf_counter()
        for game_index in range(games):
            seat = game_index % players
            agents = [opponent(name, game_index) for _ in range(players)]
            agents[seat] = GreedyAzulAgent()
            state = Azul().new_state(seed=10_000 + game_index, num_players=players)
            while not state.is_terminal():
                state.apply(agents[state.current_player()].act(state))
            winners, scores = state.winners(), state.scores()
            wins += winners == [seat]
            shared += seat in winners and len(winners) > 1
            margins.append(scores[seat] - np.mean([s for k, s in enumerate(scores) if k != seat]))
        losses = games - wins - shared
        shown = name if name == "random" else f"uct{uct_simulations}"
        results[name] = {"wins": wins, "shared": shared, "losses": losses, "win": wins / games,
                         "margin": float(np.mean(margins))}
        print(f"greedy vs {shown}, {players} players, {games} games: {wins} wins, {shared} shared, "
              f"{losses} losses ({wins / games:.1%} won), mean margin {np.mean(margins):+.1f} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    return results
