"""A trained AlphaZero checkpoint against the evaluation opponents, seats swapped: half
the games in each seat, every game's chance events seeded.

    python bench/alphazero_strength.py runs/alphazero-azul-0-... --games 200 --simulations 50 200
    python bench/alphazero_strength.py c4_run --opponents openspiel --simulations 400 --games 200

Opponents: random, uct (puffercore's plain UCT with random rollouts, which does not
solve), the game's own bots (greedy for Azul), and for Connect4 `openspiel`: OpenSpiel's
C++ MCTSBot with random-rollout simulations and solve=True (proven wins and losses
propagate up its tree), the strongest public MCTS (`pip install open-spiel`).

Prints one line per (agent simulations, opponent): win / draw / loss rates, the mean
return margin over the other seats (Azul: points / 100), the win rate in each seat (seat
0 moves first) and seconds. With more than 2 players the opponent plays every other seat.
"""

import argparse
import time

import torch

from puffercore import checkpoint
from puffercore.alphazero import MCTSBaseline, RandomAgent
from puffercore.alphazero.evaluation import GAME_OPPONENTS, AlphaZeroAgent, play_against
from puffercore.run import checkpoint_path
from puffercore.seeding import derive_seed


class OpenSpielMCTS:
    """OpenSpiel's MCTSBot on Connect4 (`simulations` random-rollout simulations per move,
    uct_c 2, solve=True, seeded), following the game through `observe`."""

    def __init__(self, simulations: int, seed: int):
        try:
            import pyspiel
        except ImportError as error:
            raise SystemExit("the openspiel opponent needs OpenSpiel: pip install open-spiel") from error
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


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="checkpoint.pt or its run directory")
    parser.add_argument("--games", type=int, default=200,
                        help="games per opponent, an equal share in each of the agent's seats (a multiple of the players)")
    parser.add_argument("--simulations", type=int, nargs="+", default=[None],
                        help="agent's MCTS simulations per move, one or more (default: its evaluation setting)")
    parser.add_argument("--opponents", nargs="+", default=None,
                        help="random, uct, and the game's own (greedy for Azul); default: all")
    parser.add_argument("--uct-simulations", type=int, default=1000,
                        help="simulations per move of the UCT baseline and of OpenSpiel's MCTSBot")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    agent = AlphaZeroAgent.load(args.checkpoint)
    players = agent.config.num_players
    if args.games < players or args.games % players:
        parser.error(f"--games must be a positive multiple of the {players} players, got {args.games}")
    opponents = {"random": RandomAgent,
                 "uct": lambda game_seed: MCTSBaseline(args.uct_simulations, seed=game_seed),
                 **GAME_OPPONENTS.get(agent.config.game, {})}
    if agent.config.game == "connect4":
        opponents["openspiel"] = lambda game_seed: OpenSpielMCTS(args.uct_simulations, game_seed)
    chosen = args.opponents or list(opponents)
    unknown = sorted(set(chosen) - set(opponents))
    if unknown:
        parser.error(f"--opponents must be among {sorted(opponents)}, got {unknown}")
    path = checkpoint_path(args.checkpoint)
    counters = checkpoint.load(path)["counters"]
    print(f"{agent.config.game}: {counters['seconds'] / 60:.1f} training minutes, {counters['games']} self-play games")
    results = {}
    for simulations in args.simulations:
        for index, name in enumerate(chosen):
            start = time.perf_counter()
            rates = play_against(agent, opponents[name], args.games, derive_seed(args.seed, index), simulations)
            results[(simulations, name)] = rates
            seats = ", ".join(f"seat {seat}: {rates[f'win_seat{seat}']:.3f}" for seat in range(players))
            print(f"agent {simulations or agent.config.eval_simulations} simulations vs {name}: "
                  f"win {rates['win']:.3f}  draw {rates['draw']:.3f}  loss {rates['loss']:.3f}  "
                  f"margin {rates['margin']:+.3f}  (wins in {seats})  "
                  f"({args.games} games, {time.perf_counter() - start:.0f} s)", flush=True)
    return results


if __name__ == "__main__":
    main()
