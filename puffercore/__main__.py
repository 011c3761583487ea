"""The `puffercore` command (also `python -m puffercore`):

    puffercore train cartpole                       # preset config, ocean CartPole
    puffercore train snake --vec.backend threads --train.learning-rate 1e-3
    puffercore train gymnasium:Acrobot-v1           # any gymnasium id
    puffercore train my_envs:MyEnv                  # any env class or creator, imported
    puffercore train --config runs/cartpole-.../config.json
    puffercore train cartpole --print-config > my.json   # the resolved settings, for --config
    puffercore train --resume runs/cartpole-...     # continue from the run's checkpoint
    puffercore train connect4 --policy my_policies:BoardCNN   # a network of your own (ppo.ActorCritic)
    puffercore eval runs/cartpole-... --render         # a run directory or its checkpoint.pt
    puffercore eval runs/cartpole-... --video cartpole.mp4 --episodes 3
    puffercore export runs/cartpole-... --format onnx   # the policy as runs/cartpole-.../policy.onnx
    puffercore bench compare_training               # runs bench/compare_training.py
    puffercore plot runs/cartpole-...               # learning_curve.png
    puffercore plot runs/cartpole-*-seed* --x time --output curve.pdf   # seeds: mean and a band
    puffercore sweep sweep.toml --trials 20 --jobs 2   # Optuna search over a config's [sweep] table
    puffercore alphazero connect4 --minutes 30      # AlphaZero self-play training
    puffercore play connect4 --checkpoint runs/alphazero-connect4-...
    puffercore judge connect4 runs/alphazero-connect4-... --simulations 1 50 400   # a solver scores its moves
    puffercore strength runs/alphazero-azul-... --opponents greedy uct --games 400   # win rates against bots

Every PPOConfig (AlphaZeroConfig) field is a flag named by its setting, --GROUP.FIELD
(run-group fields have no prefix), with dashes or underscores: the same names as config
files' [GROUP] tables and "GROUP.FIELD" keys (puffercore.flags, puffercore.config_files).
An unknown flag gets the closest known one and the subcommand's --help.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import runpy
import shlex
import sys
import warnings

import puffercore
from puffercore import env_sources, ppo
from puffercore.alphazero import cli as alphazero_cli
from puffercore.judges import cli as judges_cli
from puffercore.info import format_report, forced_isa, report
from puffercore.config_files import SWEEP_TABLE, checked, file_form, puffercore_version, read_file, settings_of
from puffercore.ppo.config import preset_for
from puffercore.flags import DeprecatedName, add_dataclass_flags, dataclass_overrides, flag_name, setting_name, suggestion
from puffercore.logger import counted, format_number
from puffercore.ppo.export import FORMATS as EXPORT_FORMATS
from puffercore.video import render_modes


def _train(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    overrides = dataclass_overrides(args, ppo.PPOConfig)
    if args.seeds and (args.resume or "seed" in overrides):
        parser.error("--seeds trains new runs, one per seed: give no --resume and no --seed")
    if args.jobs is not None and not args.seeds:
        parser.error("--jobs is for --seeds (how many seeds train at once)")
    if args.policy:
        _refuse_policy_settings(args.policy, overrides, parser)
    if args.resume:
        if args.config or args.print_config:
            parser.error("--resume continues a run with its saved config; give flags to change what may change")
        trainer = ppo.train(overrides, args.env, resume=args.resume, policy=args.policy)
    else:
        env, config = _resolved_config(args, parser, overrides)
        if args.print_config:
            named = {"policy": args.policy} if args.policy else {}
            print(json.dumps(file_form(dataclasses.asdict(config), ppo.PPOConfig, env=env, **named), indent=2))
            return
        if args.seeds:
            from puffercore.many_runs import seeds_summary, train_seeds

            results = train_seeds(config, env, args.seeds, args.jobs, policy=args.policy)
            print(seeds_summary(results))
            stopped = max(result["interrupted"] for result in results)
            if stopped:
                sys.exit(128 + stopped)  # as for one run a signal ended
            if any(result["error"] for result in results):
                sys.exit(1)
            return
        trainer = ppo.train(config, env, policy=args.policy)
    if trainer.group.is_main:  # under torchrun, one line for the job
        print(ppo.summary(trainer))
    if trainer.interrupted:
        sys.exit(128 + trainer.interrupted)  # the shell's convention for a run a signal ended


def _refuse_policy_settings(policy: str, overrides: dict, parser: argparse.ArgumentParser) -> None:
    """A policy of the user's makes its own network: policy.* flags would be ignored."""
    typed = [setting_name(field) for field in dataclasses.fields(ppo.PPOConfig)
             if field.name in overrides and field.metadata["group"] == "policy"]
    if typed:
        parser.error(f"{flag_name(typed[0])}: the custom policy {policy} does not read policy.* settings (they "
                     f"size the default MLP, LSTM or CNN); set its network in its own code")


def _resolved_config(args: argparse.Namespace, parser: argparse.ArgumentParser, overrides: dict) -> tuple:
    """(env, PPOConfig): the env's preset, then the --config file's settings (checked,
    naming the file), then the flags. A file never chooses code to import: an env or a
    policy it names by module:attribute must be given on the command line too."""
    fields, extras = settings_of(read_file(args.config), ppo.PPOConfig, args.config,
                                 extra=("env", "policy", "plan", SWEEP_TABLE)) if args.config else ({}, {})
    file_env, file_policy = extras.get("env"), extras.get("policy")
    for key, value in (("env", file_env), ("policy", file_policy)):
        if value is not None and not (isinstance(value, str) and value):
            raise ValueError(f"{args.config}: {key} must be a non-empty str, got {value!r}")
    if args.env and file_env and file_env != args.env and (env_sources.imports_code(file_env)
                                                           or not env_sources.same_env(args.env, file_env)):
        raise ValueError(f"--config {args.config} is a config for env {file_env!r} (its values include that "
                         f"env's preset), not {args.env!r}: leave out the env argument to train {file_env!r} "
                         f"with it, or remove \"env\" from a copy of the file to apply its values to {args.env!r}")
    if file_env and not args.env and env_sources.imports_code(file_env):
        raise ValueError(f"--config {args.config} names the env {file_env!r}, code to import, and a file never "
                         f"chooses code to run: if you trust it, give it on the command line too "
                         f"(puffercore train {file_env} --config {args.config})")
    if file_policy and file_policy != args.policy:
        raise ValueError(f"--config {args.config} names the policy {file_policy!r}, code to import, and a file never "
                         f"chooses code to run: " + (f"it is not --policy {args.policy}" if args.policy else
                                                     f"if you trust it, give --policy {file_policy} too"))
    env = args.env or file_env
    if not env:
        parser.error("give an env (e.g. cartpole, gymnasium:Acrobot-v1, my_module:MyEnv) or --resume RUN_DIR")
    if args.config:  # the file's own settings first, so that an error names it
        checked(ppo.PPOConfig.for_env(env, **fields), args.config)
    config = ppo.PPOConfig.for_env(env, **{**fields, **overrides})
    config.validate()
    return env, config


def _sweep(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    from puffercore.sweep import sweep

    result = sweep(args.config, trials=args.trials, jobs=args.jobs, directory=args.dir, pruner=args.pruner,
                   seed=args.seed)
    print(f"{result['finished']} of {args.trials} trials finished ({result['pruned']} pruned)"
          + (f"; interrupted: `puffercore sweep {args.config} --trials {args.trials}"
             + (f" --dir {args.dir}" if args.dir else "") + "` resumes the study" if result["interrupted"] else ""))
    if result["trial"] is None:
        print("no trial has completed yet, so there is no best config")
    else:
        params = ", ".join(f"{name}={value:.4g}" if isinstance(value, float) else f"{name}={value}"
                           for name, value in result["params"].items())
        print(f"best: trial {result['trial']}, return {result['value']:.2f} ({params}), run {result['run_dir']}\n"
              f"best config: {result['config_path']}  (train it: puffercore train --config {result['config_path']})")
    print(f"dashboard: optuna-dashboard {result['storage']}")
    if result["interrupted"]:
        sys.exit(128 + result["interrupted"])  # as for one run a signal ended


def _the_run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """args.run from RUN by position or its alias --checkpoint RUN. With --checkpoint,
    eval's positional argument is the env, as in `eval ENV --checkpoint RUN`."""
    if args.checkpoint is not None and args.run is not None:
        if not hasattr(args, "env"):
            parser.error(f"give the run once: RUN by position ({args.run}) or --checkpoint ({args.checkpoint})")
        if args.env is not None:
            parser.error(f"give the env once: --env {args.env}, or by position before --checkpoint ({args.run})")
        args.env = args.run
    args.run = args.checkpoint if args.checkpoint is not None else args.run
    if args.run is None:
        parser.error(f"give a run directory or its checkpoint.pt: {parser.prog} RUN")


def _eval(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    _the_run(args, parser)
    pictures, rewards, observations = [], [], []
    # --render: the env's own text picture where it has one (not with --video, which takes
    # the env's render mode), else the observation's numbers.
    own_picture = args.render and not args.video and "ansi" in (render_modes(
        env_sources.resolve_saved(ppo.saved_env_spec(args.run), args.env, args.run)) or ())

    def record(observation, reward):
        observations.append(observation.copy())
        rewards.append(reward)

    returns = ppo.evaluate(args.run, episodes=args.episodes, seed=args.seed, greedy=not args.sample,
                           max_steps=args.max_steps, on_step=record if args.render else None, env=args.env,
                           video=args.video, on_render=pictures.append if own_picture else None,
                           policy=args.policy)
    if args.render:
        frames = [picture.rstrip("\n") + f"\nreward={format_number(reward)}"
                  for picture, reward in zip(pictures, rewards)] if own_picture else \
            [" ".join(f"{float(value):+.3f}" for value in observation) + f"  reward={format_number(reward)}"
             for observation, reward in zip(observations, rewards)]
        print("\n\n".join(frames[-args.render_steps:]))
    mean = sum(returns) / len(returns)
    print(f"{args.run}: {counted(len(returns), 'episode')}, mean return {format_number(mean)}, "
          f"min {format_number(min(returns))}, max {format_number(max(returns))}")
    print("returns:", " ".join(format_number(value) for value in returns))
    if args.video:
        print(f"video: {args.video}")


def _export(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    _the_run(args, parser)
    path = ppo.export_policy(args.run, args.format, output=args.output, policy=args.policy)
    print(f"wrote {path}")


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


def _info(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    found = report()
    print(json.dumps(found, indent=2) if args.json else format_report(found))


def _plot(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    from puffercore.plots import plot

    runs = args.runs + (args.checkpoint or [])
    if not runs:
        parser.error("give one run directory or more: puffercore plot RUN [RUN ...]")
    print(plot(runs, args.output, metric=args.metric, x=args.x, smooth=args.smooth, title=args.title))


class _Parser(argparse.ArgumentParser):
    """Errors as one line and a hint, not the usage block first (train's has 60 flags)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n(see `{self.prog} --help`)\n")


def _named(argv: list[str], command: str) -> str | None:
    """The first argument after `command` when the command line starts with it (the env
    of `train ENV`, the game of `alphazero GAME`), for --help to show its preset."""
    return argv[1] if len(argv) > 1 and argv[0] == command and not argv[1].startswith("-") else None


POLICY_HELP = "an ActorCritic class of yours, imported (puffercore.ppo.policy)"


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The `puffercore` parser; `argv`, when given, names the env or game whose preset
    `train ENV --help` and `alphazero GAME --help` show as the defaults."""
    parser = _Parser(prog="puffercore", description="puffercore: train, evaluate and benchmark RL agents")
    parser.add_argument("--version", action="version", version=f"puffercore {puffercore_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = commands.add_parser("train", help="train PPO on an env", description=(
        "Train PPO. ENV: an ocean env (cartpole, snake, squared, memory, connect4, azul), a gymnasium id "
        "(Acrobot-v1 or gymnasium:Acrobot-v1) or module:attribute naming an env class or creator. Settings "
        "start from the ocean env's preset, then --config, then every flag below."))
    train.add_argument("env", nargs="?", help="the env to train on")
    train.add_argument("--config", metavar="FILE", help="a JSON or TOML file of settings (a run's config.json works): "
                       "[GROUP] tables or \"GROUP.FIELD\" keys, and env")
    train.add_argument("--print-config", action="store_true", help="print the resolved settings as a config file "
                       "(JSON, for --config) and exit")
    train.add_argument("--resume", metavar="RUN_DIR", help=(
        "continue the run in RUN_DIR from its checkpoint; flags may change only "
        + ", ".join(ppo.RESUMABLE_FIELDS)))
    train.add_argument("--seeds", type=int, nargs="+", metavar="SEED", help=(
        "train one run per seed, side by side in processes (runs/ENV-SEED-TIME each, or RUN_DIR-seedS with "
        "--run-dir), and print the final return's mean and spread"))
    train.add_argument("--jobs", type=int, metavar="N", help="with --seeds: runs at once (default: all)")
    train.add_argument("--policy", metavar="MODULE:CLASS", help=POLICY_HELP + " (default: the MLP, LSTM or CNN the "
                       "policy options describe); with --resume, the policy the run was trained with")
    env = _named(argv or [], "train")
    shown = ppo.PPOConfig.for_env(env) if env and preset_for(env) else None
    add_dataclass_flags(train, ppo.PPOConfig, preset=f"{env}'s preset" if shown else "the env preset", shown=shown,
                        aliases={"compile": ("--compile",)})
    train.set_defaults(handler=_train, command_parser=train)

    evaluate = commands.add_parser("eval", help="play a checkpoint's policy", description=(
        "Play episodes with a trained policy and print their returns (and a text render, or a video)."))
    evaluate.add_argument("run", nargs="?", metavar="RUN", help="a run directory or its checkpoint.pt")
    evaluate.add_argument("--checkpoint", metavar="RUN", help="the same as RUN (then a positional argument is the env)")
    evaluate.add_argument("--env", help="the env, when the checkpoint could not name it (else checked against it)")
    evaluate.add_argument("--episodes", type=int, default=5, help="episodes to play (default 5)")
    evaluate.add_argument("--seed", type=int, default=0, help="env seed (default 0)")
    evaluate.add_argument("--max-steps", type=int, default=10_000,
                          help="env steps at most; episodes still running then end there (default 10000)")
    evaluate.add_argument("--sample", action="store_true", help="sample actions instead of taking the most likely")
    evaluate.add_argument("--render", action="store_true", help=(
        "print the last steps: the env's own text picture (its ansi render), else the observation's numbers"))
    evaluate.add_argument("--render-steps", type=int, default=5, help="frames to print with --render (default 5)")
    evaluate.add_argument("--video", metavar="FILE", help=(
        "record the episodes into an MP4 from the env's rgb_array render (pip install \"puffercore[video]\")"))
    evaluate.add_argument("--policy", metavar="MODULE:CLASS", help=POLICY_HELP + ", when the run was trained with one")
    evaluate.set_defaults(handler=_eval, command_parser=evaluate)

    export = commands.add_parser("export", help="write a run's policy as ONNX or TorchScript", description=(
        "Write the policy of a checkpoint as one file that acts without puffercore (onnxruntime, torch.jit.load): "
        "observation normalization folded in, action masks applied; inputs observations (and a recurrent policy's "
        "state_0, ...), outputs the greedy actions, the distribution's params and the value (puffercore.ppo.export)."))
    export.add_argument("run", nargs="?", metavar="RUN", help="a run directory or its checkpoint.pt")
    export.add_argument("--checkpoint", metavar="RUN", help="the same as RUN")
    export.add_argument("--format", required=True, choices=tuple(EXPORT_FORMATS),
                        help="onnx (pip install \"puffercore[onnx]\") or torchscript")
    export.add_argument("--output", metavar="FILE", help="where to write it (default RUN/policy.onnx or RUN/policy.pt)")
    export.add_argument("--policy", metavar="MODULE:CLASS", help=POLICY_HELP + ", when the run was trained with one")
    export.set_defaults(handler=_export, command_parser=export)

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

    plot = commands.add_parser("plot", help="draw learning curves of runs (PNG, PDF, SVG)", description=(
        "Plot a metric of runs' metrics.csv against env steps or wall time. Runs of one config (seeds) are "
        "drawn as their mean and a band of one standard deviation; the legend names what tells configs apart."))
    plot.add_argument("runs", nargs="*", metavar="RUN", help="run directories (with metrics.csv and config.json)")
    plot.add_argument("--checkpoint", action="append", metavar="RUN", help="a run, as RUN (repeatable)")
    plot.add_argument("--metric", default="episode_return", help="column to plot (default episode_return; "
                      "recent_return: the mean of the last 20 episodes)")
    plot.add_argument("--x", choices=("step", "time"), default="step", help="x axis: env steps or training time")
    plot.add_argument("--smooth", type=int, default=1, metavar="N", help="trailing mean over N points (default 1: none)")
    plot.add_argument("--title", help="the title (default: the algorithm and the envs)")
    plot.add_argument("--output", help="a .png, .pdf or .svg path (default RUN/learning_curve.png for one run, "
                      "./learning_curve.png for several)")
    plot.set_defaults(handler=_plot, command_parser=plot)
    sweep = commands.add_parser("sweep", help="search hyperparameters with Optuna (pip install \"puffercore[sweep]\")",
                                description=(
        "Search the [sweep] table of a config file (TOML or JSON: env, fields, and the search space, e.g. "
        "\"train.learning_rate\" = {low = 1e-4, high = 1e-2, log = true} or \"policy.hidden_size\" = [32, 64]) with "
        "Optuna's TPE sampler, trials in parallel processes, the median pruner on each trial's learning curve, the "
        "study in DIR/study.db (the same command resumes it) and the best config written to DIR/best_config.json."))
    sweep.add_argument("config", help="the config file with a [sweep] table")
    sweep.add_argument("--trials", type=int, default=20, help="finished trials the study should have (default 20; "
                       "earlier runs' count)")
    sweep.add_argument("--jobs", type=int, default=1, help="trials at once, each in its own process (default 1)")
    sweep.add_argument("--dir", help="where the study and the trials' runs go (default sweeps/<config file name>)")
    sweep.add_argument("--pruner", choices=("median", "none"), default="median", help=(
        "median: stop a trial whose recent return is below the median of earlier trials at the same step, after "
        "5 trials and a quarter of the run (default); none: never"))
    sweep.add_argument("--seed", type=int, default=0, help="seed of the sampler (default 0)")
    sweep.set_defaults(handler=_sweep, command_parser=sweep)
    alphazero_cli.add_commands(commands, _named(argv or [], "alphazero"))
    judges_cli.add_commands(commands)
    info = commands.add_parser("info", help="versions, CPU and native paths, for a bug report", description=(
        "Print the versions, the CPU (model, ISA features, cores), which native paths run (MLP kernel lanes, "
        "bf16, the CUDA GAE kernel) and what the presets choose on this machine. PUFFERCORE_ISA=avx2 in the "
        "environment runs any command in AVX2 mode (puffercore.info)."))
    info.add_argument("--json", action="store_true", help="as JSON, for machines")
    info.set_defaults(handler=_info, command_parser=info)
    return parser


def _refuse_unknown(parser: argparse.ArgumentParser, unknown: list[str]) -> None:
    """One line for arguments the subcommand does not take: a flag with the closest one
    it has, pointing at the subcommand's --help (its parser's error)."""
    first = next((text for text in unknown if text.startswith("--")), unknown[0])
    if not first.startswith("--"):
        parser.error(f"unexpected argument {first!r}")
    flag = first.partition("=")[0]
    known = [option for action in parser._actions if action.help != argparse.SUPPRESS
             for option in action.option_strings if option.startswith("--") and "_" not in option]
    parser.error(f"unknown flag {flag}{suggestion(flag, known, key=lambda text: text.lstrip('-').replace('_', '-'))}")


def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"puffercore: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    _import_from_working_directory()
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    with warnings.catch_warnings():  # an old spelling: one line, not a warning's two
        shown = warnings.showwarning
        warnings.showwarning = lambda message, category, *rest: (
            _warning_line if issubclass(category, DeprecatedName) else shown)(message, category, *rest)
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            _refuse_unknown(args.command_parser, unknown)
        try:  # every command sets its handler(args, its parser)
            forced_isa()  # a PUFFERCORE_ISA this machine cannot apply stops every command
            args.handler(args, args.command_parser)
        except (ValueError, FileNotFoundError, FileExistsError, ImportError) as error:
            args.command_parser.error(str(error))
        except KeyboardInterrupt:  # training saves and says so itself; elsewhere there is nothing to keep
            args.command_parser.exit(130, f"\n{args.command_parser.prog}: interrupted\n")


if __name__ == "__main__":
    main()
