"""`puffercore judge connect4 AGENT ...` (moves scored by a perfect solver) and
`puffercore strength RUN --opponents ...` (win rates against bots). Their solvers and
bots (bitbully, OpenSpiel) come with `pip install "puffercore[bench]"`; `--help` works
without them. `--record [PATH]` appends the results as records for the README's table
(`puffercore.results`).
"""

from __future__ import annotations

import argparse
import os
import shlex

from puffercore.results import add_record_flag, record

DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "puffercore", "connect4_judge")


def add_commands(commands) -> None:
    """Add the `judge` and `strength` subcommands; each sets `handler(args, parser)`."""
    from puffercore.judges import connect4, strength

    judge = commands.add_parser("judge", help="score an agent's moves with a perfect solver (Connect4)",
                                description="Judge agents move by move with a perfect solver.")
    games = judge.add_subparsers(dest="game", required=True, metavar="GAME")
    c4 = games.add_parser("connect4", help="bitbully's Connect4 solver", description=connect4.__doc__.split("\n\n")[0])
    c4.add_argument("agents", nargs="+", metavar="AGENT",
                    help="checkpoints (file or run directory), 'solver' or 'random'")
    c4.add_argument("--simulations", type=int, nargs="+", default=[1, 50, 400],
                    help="agent's MCTS simulations per move (1: the raw network; default 1 50 400)")
    c4.add_argument("--sources", nargs="+", default=["random", "strong", "pons"],
                    help="random, strong, pons (its six categories) or single Pons categories "
                         f"({', '.join(connect4.PONS_CATEGORIES)})")
    c4.add_argument("--positions", type=int, default=500,
                    help="positions per source (per category for pons: a fifth of this; default 500)")
    c4.add_argument("--seed", type=int, default=0, help="seed of the position sets and of random play (default 0)")
    c4.add_argument("--cache", default=DEFAULT_CACHE,
                    help=f"where solved position sets are kept ('' to solve afresh; default {DEFAULT_CACHE})")
    c4.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    c4.add_argument("--solve", choices=["true", "false"], default=None,
                    help="search with the MCTS-solver on or off (default: the checkpoint's setting)")
    add_record_flag(c4)
    c4.set_defaults(handler=_judge_connect4, command_parser=c4)

    bots = commands.add_parser("strength", help="win rates of an AlphaZero run (or Azul's greedy bot) against bots",
                               description=strength.__doc__.split("\n\n")[0])
    bots.add_argument("agent", metavar="RUN", help=f"checkpoint.pt or its run directory, or '{strength.GREEDY}' "
                      "(Azul's greedy bot)")
    bots.add_argument("--opponents", nargs="+", default=None, help=(
        "random, uct, the game's own (greedy for Azul) and openspiel for Connect4; for greedy: random, uct "
        "(default: all)"))
    bots.add_argument("--games", type=int, default=200, help=(
        "games per opponent; for a run an equal share in each of the agent's seats (a multiple of the players; "
        "default 200)"))
    bots.add_argument("--simulations", type=int, nargs="+", default=None,
                      help="agent's MCTS simulations per move, one or more (default: its evaluation setting)")
    bots.add_argument("--uct-simulations", type=int, default=1000,
                      help="simulations per move of the UCT baseline and of OpenSpiel's MCTSBot (default 1000)")
    bots.add_argument("--players", type=int, default=2, help=f"with {strength.GREEDY}: Azul's players (default 2)")
    bots.add_argument("--seed", type=int, default=1, help="seed of a run's games (default 1)")
    bots.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    add_record_flag(bots)
    bots.set_defaults(handler=_strength, command_parser=bots)


def _missing_dependency(parser: argparse.ArgumentParser, error: ImportError) -> None:
    """One line naming the extra to install, not a traceback."""
    parser.exit(2, f"{parser.prog}: {error}\n")


def _judge_connect4(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    from puffercore.judges import connect4

    try:
        results = connect4.judge(args.agents, args.simulations, args.sources, args.positions, args.seed,
                                 args.cache or None, args.threads, None if args.solve is None else args.solve == "true")
    except ImportError as error:
        _missing_dependency(parser, error)
    command = shlex.join(["puffercore", "judge", "connect4", *args.agents, "--simulations",
                          *map(str, args.simulations), "--sources", *args.sources, "--positions",
                          str(args.positions), "--seed", str(args.seed),
                          *(["--solve", args.solve] if args.solve else [])])
    for (agent, simulations, source), result in results.items():
        if source != "all" or agent in ("solver", "random"):
            continue  # one record per judged checkpoint and search; the sanity sides are 100% and chance
        record(args.record, measure=f"connect4_judge_{simulations}_simulations",
               title=f"AlphaZero Connect4: moves keeping the solver's result, {simulations} simulations "
                     f"({result['positions']} positions: {', '.join(args.sources)})",
               value=round(100 * result["keeps_result"], 1), unit="%", peer="perfect solver (bitbully)",
               peer_value=100.0, command=command,
               notes=f"{agent}; optimal {100 * result['optimal']:.1f}%, decisive positions: keeps "
                     f"{100 * result['decisive_keeps_result']:.1f}% of {result['decisive_positions']}")


def _strength(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    from puffercore.judges import strength

    common = ["--games", str(args.games), "--uct-simulations", str(args.uct_simulations)]
    try:
        if args.agent == strength.GREEDY:
            if args.simulations:
                parser.error(f"--simulations is for a run's agent; {strength.GREEDY} does not search "
                             "(--uct-simulations sets its UCT opponent's)")
            results = strength.greedy_azul(args.opponents, args.games, args.players, args.uct_simulations)
            command = shlex.join(["puffercore", "strength", strength.GREEDY, "--opponents", *results, *common,
                                  "--players", str(args.players)])
            for name, result in results.items():
                record(args.record, measure=f"azul_greedy_vs_{name}_{args.players}p",
                       title=f"Azul greedy bot against {_opponent_title(name, args.uct_simulations)}, "
                             f"{args.players} players", value=round(100 * result["win"], 1), unit="% won",
                       peer=name, command=command,
                       notes=f"{args.games} games: {result['wins']} wins, {result['shared']} shared, "
                             f"{result['losses']} losses, mean margin {result['margin']:+.1f} points")
            return
        game, results = strength.strength(args.agent, args.games, args.simulations or [None], args.opponents,
                                          args.uct_simulations, args.seed, args.threads)
    except ImportError as error:
        _missing_dependency(parser, error)
    opponents = list(dict.fromkeys(name for _, name in results))
    command = shlex.join(["puffercore", "strength", args.agent, "--opponents", *opponents, *common,
                          *(["--simulations", *map(str, args.simulations)] if args.simulations else []),
                          "--seed", str(args.seed)])
    for (simulations, name), rates in results.items():
        record(args.record, measure=f"alphazero_{game}_vs_{name}_{simulations}_simulations",
               title=f"AlphaZero {game} ({simulations} simulations) against "
                     f"{_opponent_title(name, args.uct_simulations)}",
               value=round(100 * rates["win"], 1), unit="% won", peer=name, command=command,
               notes=f"{args.agent}; {args.games} games, both seats: draw {rates['draw']:.3f}, loss "
                     f"{rates['loss']:.3f}, margin {rates['margin']:+.3f}")


def _opponent_title(name: str, uct_simulations: int) -> str:
    return {"uct": f"UCT ({uct_simulations} random-rollout simulations)",
            "openspiel": f"OpenSpiel's MCTSBot ({uct_simulations} simulations, solving)"}.get(name, name)
