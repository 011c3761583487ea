"""The `puffercore` command (also `python -m puffercore`):

    puffercore train cartpole                       # preset config, ocean CartPole
    puffercore train snake --vec.backend threads --train.learning-rate 1e-3
    puffercore train gymnasium:Acrobot-v1           # any gymnasium id
    puffercore train my_envs:MyEnv                  # any env class or creator, imported
    puffercore train --config runs/cartpole-.../config.json
    puffercore train --resume runs/cartpole-...     # continue from the run's checkpoint
    puffercore eval --checkpoint runs/cartpole-.../checkpoint.pt --render
    puffercore eval --checkpoint runs/cartpole-... --video cartpole.mp4 --episodes 3
    puffercore bench compare_training               # runs bench/compare_training.py
    puffercore plot runs/cartpole-...               # learning_curve.png
    puffercore alphazero connect4 --minutes 30      # AlphaZero self-play training
    puffercore play connect4 --checkpoint runs/alphazero-connect4-...

Every PPOConfig field is a flag, named --GROUP.FIELD (run-group fields have no prefix),
with dashes or underscores.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import shlex
import sys

import puffercore
from puffercore import logger, ppo
from puffercore.alphazero import cli as alphazero_cli
from puffercore.flags import add_dataclass_flags, dataclass_overrides


def _read_config_file(path: str) -> dict:
    """PPOConfig fields (and optionally "env") from a JSON or TOML file, e.g. a run's
    config.json."""
    try:
        if path.endswith(".toml"):
            import tomllib

            with open(path, "rb") as file:
                values = tomllib.load(file)
        else:
            with open(path) as file:
                values = json.load(file)
    except OSError as error:
        raise ValueError(f"--config {path}: {error.strerror}") from None
    except ValueError as error:  # json.JSONDecodeError and tomllib.TOMLDecodeError
        raise ValueError(f"--config {path}: not valid {'TOML' if path.endswith('.toml') else 'JSON'} ({error})") from None
    if not isinstance(values, dict):
        raise ValueError(f"--config {path}: expected a table of config fields, got {type(values).__name__}")
    return values


def _train(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    overrides = dataclass_overrides(args, ppo.PPOConfig)
    if args.resume:
        if args.config:
            parser.error("--resume continues a run with its saved config; give flags to change what may change")
        trainer = ppo.train(overrides, args.env, resume=args.resume)
    else:
        values = _read_config_file(args.config) if args.config else {}
        env = args.env or values.get("env")
        if not env:
            parser.error("give an env (e.g. cartpole, gymnasium:Acrobot-v1, my_module:MyEnv) or --resume RUN_DIR")
        values = {name: value for name, value in values.items() if name != "env"}
        config = ppo.PPOConfig.for_env(env, **{**values, **overrides})
        config.validate()
        trainer = ppo.train(config, env)
    if trainer.group.is_main:  # under torchrun, one line for the job
        print(ppo.summary(trainer))
    if trainer.interrupted:
        sys.exit(128 + trainer.interrupted)  # the shell's convention for a run a signal ended


def _eval(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    frames = []
    drawn_env = args.env or (ppo.saved_env_spec(args.checkpoint) if args.render else None)

    def show(observation, reward):
        frames.append(_ascii_frame(drawn_env, observation, reward))

    returns = ppo.evaluate(args.checkpoint, episodes=args.episodes, seed=args.seed, greedy=not args.sample,
                           max_steps=args.max_steps, on_step=show if args.render else None, env=args.env,
                           video=args.video)
    if args.render:
        print("\n\n".join(frames[-args.render_steps:]))
    mean = sum(returns) / len(returns)
    print(f"{args.checkpoint}: {len(returns)} episodes, mean return {mean:.2f}, "
          f"min {min(returns):.2f}, max {max(returns):.2f}")
    print("returns:", " ".join(f"{value:.1f}" for value in returns))
    if args.video:
        print(f"video: {args.video}")


def _ascii_frame(env: str, observation, reward: float) -> str:
    """A text picture of one observation: CartPole's cart and pole, grid envs' cells,
    other envs' numbers."""
    if env == "cartpole":
        x, theta = float(observation[0]), float(observation[2])
        width = 41
        cart = min(width - 1, max(0, int(round((x + 2.4) / 4.8 * (width - 1)))))
        lean = "/" if theta > 0.05 else "\\" if theta < -0.05 else "|"
        return "\n".join([" " * cart + lean, "-" * cart + "#" + "-" * (width - 1 - cart),
                          f"x={x:+.3f} theta={theta:+.3f} reward={reward:.1f}"])
    size = int(round(len(observation) ** 0.5))
    if observation.dtype.kind == "u" and size * size == len(observation):
        symbols = ".o#@*%"
        rows = observation.reshape(size, size)
        return "\n".join("".join(symbols[min(int(v), len(symbols) - 1)] for v in row) for row in rows) + \
            f"\nreward={reward:.1f}"
    return " ".join(f"{float(v):+.3f}" for v in observation) + f"  reward={reward:.1f}"


def _bench_dir() -> str:
    """bench/ of the source checkout: the current directory's (a checkout with puffercore
    installed from it), else the one beside the package (an editable install)."""
    beside_package = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(puffercore.__file__))), "bench")
    in_working_dir = os.path.join(os.getcwd(), "bench")
    return in_working_dir if os.path.isfile(os.path.join(in_working_dir, "compare_throughput.py")) else beside_package


def _bench(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    directory = _bench_dir()
    scripts = sorted(name[:-3] for name in os.listdir(directory) if name.endswith(".py")) if os.path.isdir(directory) else []
    if not scripts:
        parser.error(f"no benchmark scripts found in {directory} (they ship with the source checkout)")
    if args.script not in scripts:
        parser.error(f"unknown benchmark {args.script!r}; choose from {scripts}")
    sys.argv = [os.path.join(directory, args.script + ".py"), *args.script_args]
    runpy.run_path(sys.argv[0], run_name="__main__")


def _new_env(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    from puffercore.scaffold import write_env

    folder = write_env(args.name, args.dir, numba=args.numba)
    class_name = "".join(part.capitalize() for part in args.name.split("_"))
    if args.numba:
        print(f"wrote {folder}/{args.name}.py (state fields, reset and step in Python, compiled by numba)\n"
              f"train:  cd {shlex.quote(folder)} && puffercore train {args.name}:{class_name}\n"
              f"guide:  docs/authoring.md, \"Write your env in Python with Numba\"")
        return
    print(f"wrote {folder}: {args.name}.h (the env: struct, reset, step) and {args.name}.pyx (its binding)\n"
          f"build:  python -c \"from puffercore.build import build_env; build_env('{folder}/{args.name}.pyx')\"\n"
          f"train:  cd {shlex.quote(folder)} && puffercore train {args.name}:{class_name}\n"
          f"guide:  docs/authoring.md (the env ABI, spaces, logs, tests)")


def _import_from_working_directory() -> None:
    """`module:attribute` envs import from the working directory, as `python -m puffercore`
    has them (the console script's sys.path starts at its own bin/ folder): `new-env`'s
    `cd maze && puffercore train maze:Maze`. Last on the path, unlike -m's first: a
    source checkout's puffercore/ (no compiled extensions) must not shadow the installed
    package in the worker processes that inherit the path."""
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.append(here)


def _plot(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    print(logger.plot(args.run_dir, args.output, metric=args.metric))


class _Parser(argparse.ArgumentParser):
    """Errors as one line and a hint, not the usage block first (train's has 60 flags)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n(see `{self.prog} --help`)\n")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("puffercore")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="puffercore", description="puffercore: train, evaluate and benchmark RL agents")
    parser.add_argument("--version", action="version", version=f"puffercore {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = commands.add_parser("train", help="train PPO on an env", description=(
        "Train PPO. ENV: an ocean env (cartpole, snake, squared, memory, connect4, azul), a gymnasium id "
        "(Acrobot-v1 or gymnasium:Acrobot-v1) or module:attribute naming an env class or creator. Settings "
        "start from the ocean env's preset, then --config, then every flag below."))
    train.add_argument("env", nargs="?", help="the env to train on")
    train.add_argument("--config", metavar="FILE", help="a JSON or TOML file of config fields (a run's config.json works)")
    train.add_argument("--resume", metavar="RUN_DIR", help=(
        "continue the run in RUN_DIR from its checkpoint; flags may change only "
        + ", ".join(ppo.RESUMABLE_FIELDS)))
    add_dataclass_flags(train, ppo.PPOConfig, preset="the env preset", group=lambda field: field.metadata["group"],
                        prefix=lambda field: "" if field.metadata["group"] == "run" else field.metadata["group"] + ".",
                        aliases={"compile": ("--compile",)})
    train.set_defaults(handler=_train, command_parser=train)

    evaluate = commands.add_parser("eval", help="play a checkpoint's policy", description=(
        "Play episodes with a trained policy and print their returns (and an ASCII render, or a video)."))
    evaluate.add_argument("env", nargs="?", help="the env, when the checkpoint could not name it (else checked against it)")
    evaluate.add_argument("--checkpoint", required=True, help="checkpoint.pt or its run directory")
    evaluate.add_argument("--episodes", type=int, default=5, help="episodes to play (default 5)")
    evaluate.add_argument("--seed", type=int, default=0, help="env seed (default 0)")
    evaluate.add_argument("--max-steps", type=int, default=10_000,
                          help="env steps at most; episodes still running then end there (default 10000)")
    evaluate.add_argument("--sample", action="store_true", help="sample actions instead of taking the most likely")
    evaluate.add_argument("--render", action="store_true", help="print ASCII frames of the last steps")
    evaluate.add_argument("--render-steps", type=int, default=5, help="frames to print with --render (default 5)")
    evaluate.add_argument("--video", metavar="FILE", help=(
        "record the episodes into an MP4 from the env's rgb_array render (pip install \"puffercore[video]\")"))
    evaluate.set_defaults(handler=_eval, command_parser=evaluate)

    bench = commands.add_parser("bench", help="run a benchmark script from bench/", description=(
        "Run bench/SCRIPT.py with the remaining arguments, e.g. `puffercore bench compare_training`."))
    bench.add_argument("script", help="script name in bench/ without .py")
    bench.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    bench.set_defaults(handler=_bench, command_parser=bench)

    new_env = commands.add_parser("new-env", help="write a ready-to-build C env folder", description=(
        "Copy the env template into DIR/NAME (NAME.h: struct, reset, step; NAME.pyx: the binding), renamed."))
    new_env.add_argument("name", help="lowercase module name, e.g. maze (the class is Maze)")
    new_env.add_argument("--dir", default=".", help="where to create the folder (default: here)")
    new_env.add_argument("--numba", action="store_true", help="a Python env compiled by numba instead of C")
    new_env.set_defaults(handler=_new_env, command_parser=new_env)

    plot = commands.add_parser("plot", help="write a PNG learning curve of a run", description=(
        "Plot a metric of RUN_DIR/metrics.csv against env steps into a PNG."))
    plot.add_argument("run_dir", help="a run directory (with metrics.csv)")
    plot.add_argument("--metric", default="episode_return", help="column to plot (default episode_return)")
    plot.add_argument("--output", help="PNG path (default RUN_DIR/learning_curve.png)")
    plot.set_defaults(handler=_plot, command_parser=plot)
    alphazero_cli.add_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> None:
    _import_from_working_directory()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:  # every command sets its handler(args, its parser)
        args.handler(args, args.command_parser)
    except (ValueError, FileNotFoundError, FileExistsError, ImportError) as error:
        args.command_parser.error(str(error))


if __name__ == "__main__":
    main()
