"""`puffercore plot` (puffercore.plots): runs grouped by config, seeds as a mean and a
band, smoothing, step or time axes, labels from the metric's meaning, the formats."""

import csv
import json
import os

import numpy as np
import pytest

from puffercore import plots
from puffercore.__main__ import main

pytest.importorskip("matplotlib")


def write_run(folder, config, steps, values, sps=1000.0, metric="recent_return"):
    """A run directory as the trainers leave it: metrics.csv and config.json."""
    os.makedirs(folder)
    with open(os.path.join(folder, "metrics.csv"), "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["step", "sps", metric])
        writer.writerows([step, sps, value] for step, value in zip(steps, values))
    with open(os.path.join(folder, "config.json"), "w") as file:
        json.dump({"env": "cartpole", "learning_rate": 0.001, "run_dir": str(folder), **config}, file)
    return str(folder)


@pytest.fixture
def runs(tmp_path):
    """Three seeds of learning_rate 0.001 (logged at different steps), two of 0.01."""
    slow = [write_run(tmp_path / f"slow-{seed}", {"seed": seed}, steps, [step / 100 + seed for step in steps])
            for seed, steps in ((1, [100, 300, 500, 700, 900]), (2, [120, 320, 520, 720, 920]),
                                (3, [90, 290, 490, 690, 890]))]
    fast = [write_run(tmp_path / f"fast-{seed}", {"seed": seed, "learning_rate": 0.01}, [100, 500, 900],
                      [10.0 * seed, 20.0 * seed, 30.0 * seed]) for seed in (1, 2)]
    return slow, fast


def test_seeds_of_one_config_are_one_mean_line_with_a_band(runs):
    slow, fast = runs
    curves = plots.group_curves([plots.Run(path) for path in slow + fast], "recent_return")
    assert [curve.runs for curve in curves] == [3, 2]
    assert curves[0].label == "learning_rate=0.001: mean of 3 seeds ± std"
    assert curves[1].label == "learning_rate=0.01: mean of 2 seeds ± std"
    # on the x range every seed covers, the mean and spread of the interpolated seeds
    assert curves[0].x[0] == 120 and curves[0].x[-1] == 890
    at = curves[0].x[50]
    seeds = np.array([at / 100 + seed for seed in (1, 2, 3)])  # each run is linear in step
    assert curves[0].mean[50] == pytest.approx(seeds.mean()) and curves[0].spread[50] == pytest.approx(seeds.std())
    np.testing.assert_allclose(curves[1].mean[[0, -1]], [15.0, 45.0])


def test_smoothing_is_a_trailing_mean_and_time_comes_from_steps_per_second(runs):
    slow, _ = runs
    run = plots.Run(slow[0])
    curve, = plots.group_curves([run], "recent_return", x="time", smooth=2)
    np.testing.assert_allclose(curve.x, [0.1, 0.3, 0.5, 0.7, 0.9])  # step / 1000 steps per second
    np.testing.assert_allclose(curve.mean, [2.0, 3.0, 5.0, 7.0, 9.0])  # (1 + 3) / 2 = 2 ... the first alone: 2
    assert curve.label == "CartPole-v1" and curve.runs == 1


def test_the_figure_says_what_it_shows(runs, tmp_path):
    slow, fast = runs
    svg = plots.plot(slow + fast, str(tmp_path / "figure.svg"), metric="recent_return", x="time")
    with open(svg) as file:
        text = file.read()
    for words in ("PPO on CartPole-v1", "return (mean of the last 20 episodes)", "training time (seconds)",
                  "learning_rate=0.01: mean of 2 seeds"):
        assert words in text, words
    assert "recent_return" not in text  # the meaning, not the column
    for extension in ("png", "pdf"):
        path = plots.plot(slow, str(tmp_path / f"figure.{extension}"), metric="recent_return")
        with open(path, "rb") as file:
            assert file.read(8).startswith(b"\x89PNG" if extension == "png" else b"%PDF")
    assert plots.plot(slow[:1], metric="recent_return") == os.path.join(slow[0], "learning_curve.png")


def test_cli_plots_many_runs_and_names_the_columns_of_a_wrong_metric(runs, tmp_path, capsys):
    slow, fast = runs
    output = str(tmp_path / "curves.pdf")
    main(["plot", *slow, *fast, "--metric", "recent_return", "--smooth", "2", "--x", "step", "--output", output])
    assert capsys.readouterr().out.strip() == output and os.path.getsize(output) > 1000
    with pytest.raises(SystemExit):
        main(["plot", *slow, "--metric", "episode_retrun"])
    assert "no run has values for metric 'episode_retrun'; the columns: recent_return, sps" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["plot", *slow, "--output", str(tmp_path / "curves.jpg"), "--metric", "recent_return"])
    assert "output must end in one of .png, .pdf, .svg" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["plot", *slow, "--smooth", "0"])
    assert "smooth must be an int >= 1" in capsys.readouterr().err


def test_bands_stay_within_the_seeds_and_steps_read_as_a_paper_writes_them(tmp_path):
    # Two seeds at CartPole's 500 and one at 300: the mean + std (527) would pass the ceiling.
    seeds = [write_run(tmp_path / f"seed-{seed}", {"seed": seed}, [0, 1000, 2000], [10.0, 200.0, last])
             for seed, last in ((1, 500.0), (2, 500.0), (3, 300.0))]
    curve, = plots.group_curves([plots.Run(path) for path in seeds], "recent_return")
    assert curve.mean[-1] + curve.spread[-1] > 500 and curve.high[-1] == 500 and curve.high.max() <= 500
    assert curve.low[-1] == pytest.approx(curve.mean[-1] - curve.spread[-1])
    assert [plots.engineering(value) for value in (0, 500, 100_000, 1_500_000, 2e9)] == \
        ["0", "500", "100k", "1.5M", "2G"]
    assert [plots.proper_name(env) for env in ("cartpole", "gymnasium:Acrobot-v1", "atari:Breakout", "ALE/Pong-v5",
                                               "my_envs:Guess")] == \
        ["CartPole-v1", "Acrobot-v1", "Breakout", "Pong-v5", "Guess"]
    svg = plots.plot(seeds, str(tmp_path / "figure.svg"), metric="recent_return")
    with open(svg) as file:
        text = file.read()
    assert "PPO on CartPole-v1" in text and ">2k<" in text.replace(" ", "")


def test_log_steps_puts_every_seeds_rows_at_the_same_steps(tmp_path):
    from puffercore import ppo

    steps = []
    for seed in (1, 2):
        run_dir = tmp_path / f"seed-{seed}"
        ppo.train(ppo.PPOConfig.for_env("cartpole", seed=seed, num_envs=8, horizon=16, minibatch_size=64,
                                        total_timesteps=8 * 16 * 6, log_interval=1e9, log_steps=256, quiet=True,
                                        tensorboard=False, run_dir=str(run_dir)), "cartpole")
        steps.append([row["step"] for row in plots.Run(str(run_dir)).rows])
    assert steps[0] == steps[1] == [256, 512, 768]
