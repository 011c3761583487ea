"""Learning curves for a paper (`puffercore plot`): runs grouped by their config, the
seeds of one config interpolated to one step grid and drawn as their mean with a band of
one standard deviation (clipped to the range the seeds span, so a return never shows
above what any seed reached), labelled by what the metric means, titled by the
algorithm and the env's proper name, steps in engineering notation (100k, 1M) and the
legend below the axes.

    path = plot(["runs/cartpole-a", "runs/cartpole-b"])                  # learning_curve.png
    path = plot(runs, metric="recent_return", x="time", smooth=10, output="fig.pdf")

A run is a directory with metrics.csv (the trainers' logger) and config.json. Runs whose
configs differ only in how they ran (seed, run directory, device, threads, logging) are
one group; a legend names what tells the groups apart. PNG, PDF or SVG by the output's
extension.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Sequence

import numpy as np

from puffercore.checks import check_int
from puffercore.config_files import flatten, read_file
from puffercore.env_sources import ATARI_PREFIX
from puffercore.logger import CSV_NAME, STEP_COLUMN, read_csv
from puffercore.ppo.episodes import RECENT_EPISODES

FORMATS = (".png", ".pdf", ".svg")
X_AXES = ("step", "time")
DEFAULT_NAME = "learning_curve.png"
# Config fields that say how a run ran, not what it learned (PPO's resumable fields but
# its budget, AlphaZero's threads): seeds of one experiment differ in these alone.
HOW_IT_RAN = frozenset({"seed", "run_dir", "device", "torch_threads", "num_workers", "log_interval", "log_steps", "tensorboard",
                        "wandb_project", "quiet", "checkpoint_interval", "eval_interval", "eval_episodes",
                        "capture_video", "self_play_threads"})
METRIC_LABELS = {
    "episode_return": "episode return",
    "recent_return": f"return (mean of the last {RECENT_EPISODES} episodes)",
    "episode_length": "episode length (steps)",
    "sps": "env steps per second",
    "learning_rate": "learning rate",
    "update": "updates",
    "loss/policy": "policy loss",
    "loss/value": "value loss",
    "loss/entropy": "policy entropy",
    "loss/loss": "total loss",
    "loss/approx_kl": "approximate KL divergence to the rollout's policy",
    "loss/clip_fraction": "fraction of clipped probability ratios",
    "loss/explained_variance": "explained variance of the value function",
    "time/minutes": "training time (minutes)",
}
GRID_POINTS = 200
# The ocean envs' names in a paper; the C CartPole plays gymnasium's CartPole-v1 rules.
PROPER_NAMES = {"cartpole": "CartPole-v1", "connect4": "Connect Four", "azul": "Azul", "snake": "Snake",
                "squared": "Squared", "memory": "Memory"}


class Run:
    """One run directory: its metric rows and its config (empty without config.json)."""

    def __init__(self, path: str):
        self.path = os.fspath(path)
        csv_path = os.path.join(self.path, CSV_NAME)
        if not os.path.isfile(csv_path):
            raise FileNotFoundError(f"{self.path} has no {CSV_NAME}; is it a puffercore run directory?")
        self.rows = read_csv(csv_path)
        config_path = os.path.join(self.path, "config.json")
        self.config: dict = {}
        if os.path.isfile(config_path):  # settings by field name, whichever release wrote the file
            from puffercore.alphazero.config import AlphaZeroConfig
            from puffercore.ppo.config import PPOConfig

            values = read_file(config_path)
            self.config = flatten(values, AlphaZeroConfig if "game" in values else PPOConfig)
        self.algorithm = "AlphaZero" if "game" in self.config else "PPO"
        self.env = str(self.config.get("env", self.config.get("game", os.path.basename(os.path.abspath(self.path)))))

    def experiment(self) -> tuple:
        """What identifies the experiment: the config without how it ran."""
        return tuple(sorted((key, json.dumps(value)) for key, value in self.config.items() if key not in HOW_IT_RAN)) \
            or (("run", self.path),)

    def curve(self, metric: str, x: str) -> tuple[np.ndarray, np.ndarray]:
        """(x, metric) of the rows that have the metric: x is env steps, or the run's own
        training clock in seconds (PPO: steps / steps per second, earlier sessions of a
        resumed run included; AlphaZero: its time/minutes)."""
        rows = [row for row in self.rows if metric in row]
        if x == "step":
            return np.array([row[STEP_COLUMN] for row in rows], float), np.array([row[metric] for row in rows])
        timed = [row for row in rows if "time/minutes" in row or row.get("sps", 0) > 0]
        if not timed:
            raise ValueError(f"{self.path}: no row says its time (sps or time/minutes); plot with --x step")
        seconds = [row["time/minutes"] * 60 if "time/minutes" in row else row[STEP_COLUMN] / row["sps"]
                   for row in timed]
        return np.array(seconds), np.array([row[metric] for row in timed])


@dataclasses.dataclass
class Curve:
    """One line of the plot: a group's label, x, the mean over its runs and their spread
    (one standard deviation; zeros for a lone run), how many runs it has, and its band:
    mean +- spread within the lowest and highest of the runs at each x."""
    label: str
    x: np.ndarray
    mean: np.ndarray
    spread: np.ndarray
    runs: int
    low: np.ndarray
    high: np.ndarray


def group_curves(runs: list[Run], metric: str, x: str = "step", smooth: int = 1) -> list[Curve]:
    """The runs grouped by experiment, each group's curves smoothed (a trailing mean over
    `smooth` points) and averaged on a common grid (runs log at their own steps)."""
    _check_metric(runs, metric)
    groups: dict[tuple, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.experiment(), []).append(run)
    curves = []
    for members, label in zip(groups.values(), _group_labels(list(groups.values()))):
        lines = [_smoothed(*run.curve(metric, x), smooth) for run in members]
        if len(lines) == 1:
            curves.append(Curve(label, lines[0][0], lines[0][1], np.zeros_like(lines[0][1]), 1, lines[0][1],
                                lines[0][1]))
            continue
        grid, values = _on_common_grid(lines)
        mean, spread = values.mean(axis=0), values.std(axis=0)
        curves.append(Curve(f"{label}: mean of {len(lines)} seeds ± std", grid, mean, spread, len(lines),
                            np.maximum(mean - spread, values.min(axis=0)), np.minimum(mean + spread, values.max(axis=0))))
    return curves


def plot(runs: Sequence[str], output: str | None = None, metric: str = "episode_return", x: str = "step",
         smooth: int = 1, title: str | None = None) -> str:
    """Draw `metric` of `runs` (run directories) against `x` ("step" or "time"), the seeds
    of one config as their mean and a band of one standard deviation, each curve a
    trailing mean over `smooth` points; returns the written path (default:
    RUN/learning_curve.png for one run, ./learning_curve.png for several). SVG keeps its
    text as text (editable in a figure)."""
    if not runs:
        raise ValueError("give at least one run directory")
    if x not in X_AXES:
        raise ValueError(f"x must be one of {list(X_AXES)}, got {x!r}")
    check_int(smooth, "smooth", 1)  # points per trailing mean; 1: none
    if output is None:
        output = os.path.join(runs[0], DEFAULT_NAME) if len(runs) == 1 else DEFAULT_NAME
    output = os.fspath(output)
    if os.path.splitext(output)[1].lower() not in FORMATS:
        raise ValueError(f"output must end in one of {', '.join(FORMATS)} (the format), got {output!r}")
    loaded = [Run(path) for path in runs]
    curves = group_curves(loaded, metric, x, smooth)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    scale, unit = _time_unit(curves) if x == "time" else (1.0, "")
    style = {"svg.fonttype": "none", "font.size": 10, "axes.spines.top": False, "axes.spines.right": False}
    with matplotlib.rc_context(style):
        figure, axis = plt.subplots(figsize=(6, 4))
        for curve in curves:
            line, = axis.plot(curve.x / scale, curve.mean, label=curve.label, linewidth=1.5)
            if curve.runs > 1:
                axis.fill_between(curve.x / scale, curve.low, curve.high, color=line.get_color(), alpha=0.2,
                                  linewidth=0)
        steps_name = "self-play positions" if all(run.algorithm == "AlphaZero" for run in loaded) else "env steps"
        axis.set_xlabel(steps_name if x == "step" else f"training time ({unit})")
        if x == "step":
            axis.xaxis.set_major_formatter(FuncFormatter(lambda value, _: engineering(value)))
        axis.set_ylabel(METRIC_LABELS.get(metric, metric.replace("/", ": ").replace("_", " ")))
        axis.set_title(title or _title(loaded))
        axis.margins(x=0)
        if len(curves) > 1 or curves[0].runs > 1:  # below the axes: it never covers a curve
            axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1 if len(curves) > 2 else len(curves),
                        frameon=False, fontsize="small")
        axis.grid(alpha=0.3)
        figure.savefig(output, dpi=200, bbox_inches="tight")
        plt.close(figure)
    return output


def engineering(value: float) -> str:
    """A step count as a paper writes it: 0, 500, 100k, 1.5M, 2G."""
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{suffix}"
    return f"{value:.3g}"


def _check_metric(runs: list[Run], metric: str) -> None:
    """ValueError listing the columns when a run has no values for `metric`."""
    missing = [run for run in runs if not any(metric in row for row in run.rows)]
    if not missing:
        return
    columns = sorted({key for run in runs for row in run.rows for key in row} - {STEP_COLUMN})
    where = "no run has" if len(missing) == len(runs) else f"{', '.join(run.path for run in missing)} has no"
    raise ValueError(f"{where} values for metric {metric!r}; the columns: {', '.join(columns)}")


def _smoothed(x: np.ndarray, y: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """The trailing mean of the last `window` points at each point (fewer at the start)."""
    if window == 1 or len(y) == 0:
        return x, y
    sums = np.cumsum(np.insert(y, 0, 0.0))
    counts = np.minimum(np.arange(1, len(y) + 1), window)
    return x, (sums[1:] - sums[np.arange(len(y)) + 1 - counts]) / counts


def _on_common_grid(curves: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The curves interpolated on one grid over the x range they all cover (runs log at
    their own times, so their x values differ)."""
    start, end = max(x[0] for x, _ in curves), min(x[-1] for x, _ in curves)
    if not start < end:
        raise ValueError("the runs of a group share no stretch of x to average over (one ended before another began)")
    grid = np.linspace(start, end, GRID_POINTS)
    return grid, np.stack([np.interp(grid, x, y) for x, y in curves])


def _group_labels(groups: list[list[Run]]) -> list[str]:
    """The config values that tell the groups apart ("learning_rate=0.001", four at most);
    the env for a lone group; the run directory for a run without config.json."""
    if len(groups) == 1:
        return [proper_name(groups[0][0].env)]
    configs = [dict(members[0].experiment()) for members in groups]
    keys = sorted({key for config in configs for key in config} - {"run"})
    differing = [key for key in keys if len({config.get(key) for config in configs}) > 1]
    labels = []
    for config, members in zip(configs, groups):
        if "run" in config:
            labels.append(os.path.basename(os.path.abspath(members[0].path)))
            continue
        values = [f"{key}={_short(json.loads(config[key])) if key in config else '-'}" for key in differing[:4]]
        labels.append(", ".join(values) + (", ..." if len(differing) > 4 else ""))
    return labels


def _short(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _title(runs: list[Run]) -> str:
    algorithms = sorted({run.algorithm for run in runs})
    envs = list(dict.fromkeys(proper_name(run.env) for run in runs))
    return f"{' and '.join(algorithms)} on {', '.join(envs)}"


def proper_name(env: str) -> str:
    """The name a paper gives the env of a run's config: an ocean env's (CartPole-v1 for
    cartpole, whose rules are gymnasium's CartPole-v1), a gymnasium id without its
    prefix, an Atari game's, or the attribute of `module:attribute`."""
    if env in PROPER_NAMES:
        return PROPER_NAMES[env]
    if env.startswith(ATARI_PREFIX):
        return env[len(ATARI_PREFIX):]
    return env.rsplit(":", 1)[-1].removeprefix("ALE/")


def _time_unit(curves: list[Curve]) -> tuple[float, str]:
    longest = max(float(curve.x.max(initial=0.0)) for curve in curves)
    return (3600.0, "hours") if longest > 7200 else (60.0, "minutes") if longest > 120 else (1.0, "seconds")
