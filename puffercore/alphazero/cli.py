"""`puffercore alphazero GAME [--GROUP.FIELD VALUE ...]` trains (every AlphaZeroConfig field
is a flag named by its setting, dashes or underscores; `--config FILE` reads a config file,
`--print-config` prints the resolved settings); `puffercore play GAME --checkpoint PATH`
plays a person against a trained agent in the terminal, one move per line on stdin (so a
pipe works too).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import secrets
import sys
from dataclasses import dataclass
from typing import Callable

from puffercore.alphazero.config import GAMES, PRESETS, AlphaZeroConfig
from puffercore.alphazero.evaluation import AlphaZeroAgent
from puffercore.alphazero.trainer import BUDGET_FIELDS, train
from puffercore.azul import Azul
from puffercore.config_files import checked, file_form, read_file, settings_of
from puffercore.flags import TOP_GROUP, add_dataclass_flags, dataclass_overrides

def _parse_index(text: str) -> int:
    if not text.lstrip("-").isdigit():
        raise ValueError(f"expected a number, got {text!r}")
    return int(text)


@dataclass(frozen=True)
class MoveFormat:
    """How a person types a game's moves: `parse(text) -> action` (ValueError when it is
    not a move) and `text(action)`, the same notation back."""

    hint: str
    parse: Callable[[str], int] = _parse_index
    text: Callable[[int], str] = str


MOVE_FORMATS = {
    "connect4": MoveFormat("a column, 0-6"),
    "tictactoe": MoveFormat("a cell, 0-8 row by row (4 is the centre)"),
    "azul": MoveFormat("SOURCE COLOUR LINE, e.g. '3 R 1' or 'c K f': a factory or c (centre), "
                       "a colour B Y R K W, a pattern line 0-4 or f (floor)", Azul.parse_move, Azul.move_text),
}
FLAG_ALIASES = {"num_players": ("--players",)}
# More legal moves than this are listed only on request ("?").
LISTED_MOVES = 12


def _old_flags(field: dataclasses.Field) -> tuple[str, ...]:
    """The ungrouped flags of earlier releases (--simulations for --search.simulations)."""
    return () if field.metadata["group"] == TOP_GROUP else (f"--{field.name.replace('_', '-')}", f"--{field.name}")


def add_commands(commands, game: str | None = None) -> None:
    """Add the `alphazero` and `play` subcommands; each sets `handler(args, parser)`.
    `game`: the game the command line names, whose preset --help shows as the defaults."""
    trainer = commands.add_parser("alphazero", help="train AlphaZero on a board game", description=(
        "Train AlphaZero by self-play. Settings start from the game's preset, then --config, then every flag "
        "below (`alphazero GAME --help` shows the game's preset as the defaults)."))
    trainer.add_argument("game", nargs="?", choices=sorted(PRESETS), help="game to learn")
    trainer.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its checkpoint")
    trainer.add_argument("--config", metavar="FILE", help="a JSON or TOML file of settings (a run's config.json "
                         "works): [GROUP] tables or \"GROUP.FIELD\" keys")
    trainer.add_argument("--print-config", action="store_true", help="print the resolved settings as a config file "
                         "(JSON, for --config) and exit")
    shown = AlphaZeroConfig.for_game(game) if game in PRESETS else None
    add_dataclass_flags(trainer, AlphaZeroConfig, preset=f"{game}'s preset" if shown else "the game preset",
                        shown=shown, skip=("game",), aliases=FLAG_ALIASES, deprecated_flags=_old_flags)
    trainer.set_defaults(handler=_train, command_parser=trainer)

    play = commands.add_parser("play", help="play against a trained AlphaZero agent", description=(
        "Play a game against a checkpoint in the terminal: type one move per line."))
    play.add_argument("game", choices=sorted(GAMES), help="the game the checkpoint was trained on")
    play.add_argument("--checkpoint", required=True, help="checkpoint.pt or its run directory")
    play.add_argument("--simulations", type=int, default=None, help="agent's MCTS simulations per move "
                      "(default: its evaluation setting)")
    play.add_argument("--seat", type=int, default=0, help="your seat: 0 moves first (default), 1 second")
    play.add_argument("--seed", type=int, default=None, help="seed of the game's chance events (Azul's draws); "
                      "default: a random one, printed so the game can be replayed")
    play.set_defaults(handler=_play, command_parser=play)


def _train(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    overrides = dataclass_overrides(args, AlphaZeroConfig, skip=("game",))
    if args.resume:
        others = sorted(set(overrides) - set(BUDGET_FIELDS))
        if others or args.game or args.config or args.print_config:
            parser.error("--resume continues a run with its saved config; give no game, --config or config flags "
                         f"but {' and '.join('--' + name for name in BUDGET_FIELDS)}, got "
                         f"{others or args.game or args.config or '--print-config'}")
        trainer = train(resume=args.resume, budget=overrides)
    else:
        config = resolved_config(args, parser, overrides)
        if args.print_config:
            print(json.dumps(file_form(dataclasses.asdict(config), AlphaZeroConfig), indent=2))
            return
        trainer = train(config)
    if trainer.group.is_main:  # under torchrun, one line for the job
        print(f"checkpoint: {trainer.checkpoint_path}")
        if trainer.interrupted:
            print(f"interrupted by {trainer.interrupted.name} after iteration {trainer.counters['iteration']}; "
                  f"checkpoint saved: puffercore alphazero --resume {trainer.run_dir}")
    if trainer.interrupted:
        sys.exit(128 + trainer.interrupted)  # the shell's convention for a run a signal ended


def resolved_config(args: argparse.Namespace, parser: argparse.ArgumentParser, overrides: dict) -> AlphaZeroConfig:
    """The game's preset, then the --config file's settings (checked, naming the file),
    then the flags."""
    fields = settings_of(read_file(args.config), AlphaZeroConfig, args.config)[0] if args.config else {}
    game = args.game or fields.get("game")
    if args.game and fields.get("game", args.game) != args.game:
        parser.error(f"--config {args.config} is a config for {fields['game']}, not {args.game}")
    if not game:
        parser.error(f"give a game ({', '.join(sorted(PRESETS))}) or --resume RUN_DIR")
    fields.pop("game", None)
    if game not in PRESETS:
        raise ValueError(f"{args.config}: game must be one of {sorted(PRESETS)}, got {game!r}")
    if args.config:  # the file's own settings first, so that an error names it
        checked(AlphaZeroConfig(game=game, **{**PRESETS[game], **fields}), args.config)
    return AlphaZeroConfig.for_game(game, **{**fields, **overrides})


def _play(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    agent = AlphaZeroAgent.load(args.checkpoint)
    if agent.config.game != args.game:
        parser.error(f"the checkpoint plays {agent.config.game}, not {args.game}")
    if args.simulations is not None and args.simulations < 1:
        parser.error(f"--simulations must be >= 1, got {args.simulations}")
    if not 0 <= args.seat < agent.config.num_players:
        parser.error(f"--seat must be in [0, {agent.config.num_players - 1}], got {args.seat}")
    if args.seed is None:
        args.seed = secrets.randbelow(2**63)
    elif not 0 <= args.seed < 2**64:
        parser.error(f"--seed must be in [0, 2**64), got {args.seed}")
    print(f"game seed {args.seed}")
    try:
        _play_game(agent, args)
    except KeyboardInterrupt:
        print(f"\ngame abandoned; replay it with --seed {args.seed}")


def _play_game(agent: AlphaZeroAgent, args: argparse.Namespace) -> None:
    moves = MOVE_FORMATS[args.game]
    state = agent.game.new_state(seed=args.seed, num_players=agent.config.num_players)
    while not state.is_terminal():
        print(state, flush=True)
        if state.current_player() != args.seat:
            action = agent.act(state, simulations=args.simulations)
            print(f"agent plays {moves.text(action)}")
        else:
            legal = state.legal_actions()
            listed = " ".join(map(moves.text, legal)) if len(legal) <= LISTED_MOVES else "'?' lists them"
            print(f"your move ({moves.hint}; legal: {listed}): ", end="", flush=True)
            line = sys.stdin.readline()
            if not line:
                print("\nno more input: game abandoned")
                return
            text = line.strip()
            if text == "?":
                print("legal moves: " + ", ".join(map(moves.text, legal)))
                continue
            try:
                action = moves.parse(text)
            except ValueError as error:
                print(f"{text!r} is not a move: {error}")
                continue
            if action not in legal:
                print(f"{text!r} is not a legal move")
                continue
        state.apply(action)
    print(state)
    returns = state.returns()
    mine, best_other = returns[args.seat], max(value for seat, value in enumerate(returns) if seat != args.seat)
    print("you win" if mine > best_other else "draw" if mine == best_other else "the agent wins")
