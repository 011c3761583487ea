"""`puffercore alphazero GAME [--FIELD VALUE ...]` trains (every AlphaZeroConfig field is a
flag, dashes or underscores); `puffercore play GAME --checkpoint PATH` plays a person
against a trained agent in the terminal, one move per line on stdin (so a pipe works too).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from puffercore.alphazero.trainer import GAMES, PRESETS, AlphaZeroAgent, AlphaZeroConfig, train

MOVE_HINTS = {"connect4": "a column, 0-6", "tictactoe": "a cell, 0-8 row by row (4 is the centre)"}


def add_commands(commands) -> None:
    """Add the `alphazero` and `play` subcommands; each sets `handler(args, parser)`."""
    trainer = commands.add_parser("alphazero", help="train AlphaZero on a board game", description=(
        "Train AlphaZero by self-play. Settings start from the game's preset; every flag overrides it."))
    trainer.add_argument("game", nargs="?", choices=sorted(PRESETS), help="game to learn")
    trainer.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its checkpoint")
    options = trainer.add_argument_group("config options")
    for field in dataclasses.fields(AlphaZeroConfig):
        if field.name == "game":
            continue
        names = {f"--{field.name.replace('_', '-')}", f"--{field.name}"}
        options.add_argument(*sorted(names), dest=field.name, type=type(field.default), default=None,
                             help=f"{field.metadata['help']} (default {field.default!r}, or the game preset)")
    trainer.set_defaults(handler=_train)

    play = commands.add_parser("play", help="play against a trained AlphaZero agent", description=(
        "Play a game against a checkpoint in the terminal: type one move per line."))
    play.add_argument("game", choices=sorted(GAMES), help="the game the checkpoint was trained on")
    play.add_argument("--checkpoint", required=True, help="checkpoint.pt or its run directory")
    play.add_argument("--simulations", type=int, default=None, help="agent's MCTS simulations per move "
                      "(default: its evaluation setting)")
    play.add_argument("--seat", type=int, default=0, help="your seat: 0 moves first (default), 1 second")
    play.set_defaults(handler=_play)


def _train(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    overrides = {field.name: getattr(args, field.name) for field in dataclasses.fields(AlphaZeroConfig)
                 if field.name != "game" and getattr(args, field.name) is not None}
    if args.resume:
        if overrides or args.game:
            parser.error("--resume continues a run with its saved config; give no game and no config flags")
        trainer = train(resume=args.resume)
    else:
        if not args.game:
            parser.error(f"give a game ({', '.join(sorted(PRESETS))}) or --resume RUN_DIR")
        trainer = train(AlphaZeroConfig.for_game(args.game, **overrides))
    print(f"checkpoint: {trainer.checkpoint_path}")


def _play(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    agent = AlphaZeroAgent.load(args.checkpoint)
    if agent.config.game != args.game:
        parser.error(f"the checkpoint plays {agent.config.game}, not {args.game}")
    if args.simulations is not None and args.simulations < 1:
        parser.error(f"--simulations must be >= 1, got {args.simulations}")
    if not 0 <= args.seat < agent.config.num_players:
        parser.error(f"--seat must be in [0, {agent.config.num_players - 1}], got {args.seat}")
    state = agent.game.new_state(num_players=agent.config.num_players)
    while not state.is_terminal():
        print(state, flush=True)
        if state.current_player() != args.seat:
            action = agent.act(state, simulations=args.simulations)
            print(f"agent plays {action}")
        else:
            legal = state.legal_actions()
            print(f"your move ({MOVE_HINTS[args.game]}; legal: {' '.join(map(str, legal))}): ", end="", flush=True)
            line = sys.stdin.readline()
            if not line:
                print("\nno more input: game abandoned")
                return
            text = line.strip()
            if not text.lstrip("-").isdigit() or int(text) not in legal:
                print(f"{text!r} is not a legal move")
                continue
            action = int(text)
        state.apply(action)
    print(state)
    returns = state.returns()
    mine, best_other = returns[args.seat], max(value for seat, value in enumerate(returns) if seat != args.seat)
    print("you win" if mine > best_other else "draw" if mine == best_other else "the agent wins")
