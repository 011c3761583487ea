"""AlphaZero throughput: positions searched per minute (self-play moves, each with a
full search) by the trainer's self-play, the game's preset against the self-play of
earlier versions (every technique off: float32 eager network, no MCTS-solver, no
evaluation cache), each technique alone, and the preset carrying unfinished games
across iterations (`carry_games`) with more slots (four times its parallel games, or
`--carry-slots N ...`), each in float32 and bf16, all at the same simulations per move.
Each measurement times a few iterations after an untimed first. Rows alternate round
by round and each keeps its best: this machine's noise is one-sided.
Then the training side: gradient steps per second in float32 (the earlier trainer) and
in the preset's precision (bf16 mixed precision where the CPU has it), on the replay the
self-play filled.

    python bench/bench_alphazero_selfplay.py [--game connect4|azul] [--games N] [--checkpoint RUN]
                                             [--carry-slots 256 1024]

An untrained network by default; `--checkpoint` plays with a trained one (its games are
shorter and more decisive, which the solver feeds on).
"""

from __future__ import annotations

import argparse
import time

from puffercore import checkpoint
from puffercore.alphazero.config import AlphaZeroConfig
from puffercore.alphazero.trainer import Trainer
from puffercore.results import add_record_flag, record
from puffercore.run import checkpoint_path

GAME_NAMES = {"connect4": "Connect4", "tictactoe": "TicTacToe", "azul": "Azul"}
EARLIER = dict(inference_precision="float32", inference_trace=False, solve=False, evaluation_cache=0)
ROWS = {
    "earlier (all four off)": EARLIER,
    "precision auto alone": {**EARLIER, "inference_precision": "auto"},
    "traced inference alone": {**EARLIER, "inference_trace": True},
    "solver alone": {**EARLIER, "solve": True},
    "evaluation cache alone": {**EARLIER, "evaluation_cache": AlphaZeroConfig.evaluation_cache},
    "puffercore preset (all four)": {},
}


def positions_per_minute(config: AlphaZeroConfig, network_state: dict | None, iterations: int) -> float:
    """Moves searched a minute over `iterations` self-play iterations after a first,
    untimed one (which warms torch up and, with carry_games, fills the slots): the moves
    of the games that finished, less those they had when carried in, plus those of the
    games still under way."""
    trainer = Trainer(config)
    if network_state is not None:
        trainer.network.load_state_dict(network_state)
    trainer.self_play()
    searched = -sum(playing.moves for playing in trainer.under_way)
    start = time.perf_counter()
    for _ in range(iterations):
        stats = trainer.self_play()
        searched += stats["self_play/games"] * stats["self_play/game_length"]
    seconds = time.perf_counter() - start
    searched += sum(playing.moves for playing in trainer.under_way)
    return searched / seconds * 60


def train_steps_per_second(config: AlphaZeroConfig, replay, steps: int = 20) -> float:
    trainer = Trainer(config)
    trainer.replay = replay
    trainer.train_step(replay.sample(trainer.replay_rng, config.batch_size))  # warm-up
    batches = [replay.sample(trainer.replay_rng, config.batch_size, trainer.game.symmetries) for _ in range(steps)]
    start = time.perf_counter()
    for batch in batches:
        trainer.train_step(batch)
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="connect4", choices=["connect4", "tictactoe", "azul"])
    parser.add_argument("--games", type=int, default=None,
                        help="self-play games per measurement (default: the preset's games per iteration)")
    parser.add_argument("--simulations", type=int, default=None, help="MCTS simulations per move (default: preset)")
    parser.add_argument("--checkpoint", default=None, help="play with this run's network (default: untrained)")
    parser.add_argument("--repeats", type=int, default=2, help="measurements per row (the best is kept)")
    parser.add_argument("--iterations", type=int, default=2, help="timed self-play iterations per measurement")
    parser.add_argument("--carry-slots", type=int, nargs="+", default=None,
                        help="slot counts of the carry_games rows, each in float32 and bf16 (default: 4x the "
                             "preset's parallel games)")
    add_record_flag(parser)
    args = parser.parse_args()
    overrides = {"simulations": args.simulations} if args.simulations else {}
    network_state = None
    if args.checkpoint:
        state = checkpoint.load(checkpoint_path(args.checkpoint))
        network_state, trained = state["network"], state["alphazero_config"]
        overrides.update(channels=trained["channels"], blocks=trained["blocks"])
    config = AlphaZeroConfig.for_game(args.game, **overrides)
    if args.games:
        overrides.update(games_per_iteration=args.games, parallel_games=min(args.games, config.parallel_games))
    config = AlphaZeroConfig.for_game(args.game, **overrides)

    rows = dict(ROWS)
    for slots in args.carry_slots or [4 * config.parallel_games]:
        for precision in ("float32", "bfloat16"):
            rows[f"carry_games, {slots} slots, {precision}"] = dict(
                carry_games=True, self_play_threads=1, parallel_games=slots, inference_precision=precision)
    best = dict.fromkeys(rows, 0.0)
    filled = Trainer(config)
    filled.self_play()
    training = {"float32 (earlier)": dict(train_precision="float32"), "puffercore preset": {}}
    steps = dict.fromkeys(training, 0.0)
    for _ in range(args.repeats):
        for name, settings in training.items():
            measured = train_steps_per_second(AlphaZeroConfig.for_game(args.game, **{**overrides, **settings}),
                                              filled.replay)
            steps[name] = max(steps[name], measured)
        for name, settings in rows.items():
            measured = positions_per_minute(AlphaZeroConfig.for_game(args.game, **{**overrides, **settings}),
                                            network_state, args.iterations)
            best[name] = max(best[name], measured)

    print(f"{args.game} self-play, {config.simulations} simulations per move, {config.channels}x{config.blocks} "
          f"network {'from ' + args.checkpoint if args.checkpoint else '(untrained)'}, "
          f"{config.games_per_iteration} games, {config.self_play_threads} self-play threads, best of {args.repeats}")
    baseline = best["earlier (all four off)"]
    for name, value in best.items():
        print(f"  {name:36s} {value:10.0f} positions/min   {value / baseline:5.2f}x")
    preset = best["puffercore preset (all four)"]
    record(args.record, measure=f"alphazero_selfplay_{args.game}",
           title=f"AlphaZero self-play, {GAME_NAMES[args.game]}, {'trained' if args.checkpoint else 'untrained'} "
                 f"{config.channels}x{config.blocks} network, {config.games_per_iteration} games, "
                 f"{config.simulations} simulations",
           value=round(preset / 1000, 1), unit="k positions/min", peer="float32 eager search, every technique off",
           peer_value=round(baseline / 1000, 1), ratio=preset / baseline)
    print(f"{args.game} training, batch {config.batch_size}, {config.torch_threads} torch threads")
    for name, value in steps.items():
        print(f"  {name:36s} {value:10.1f} steps/s         {value / steps['float32 (earlier)']:5.2f}x")


if __name__ == "__main__":
    main()
