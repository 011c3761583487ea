"""Evaluation, video and callbacks during PPO training (puffercore.ppo.evaluation,
puffercore.ppo.callbacks): eval/* metrics at the updates due, best.pt, training untouched
by evaluation, MP4s in videos/ (and TensorBoard, W&B), callbacks' order and early stops,
and the values refused."""

import dataclasses
import glob
import json
import os
import re
import subprocess
import sys
import types

import numpy as np
import pytest
import torch

import puffercore.vector
from puffercore import checkpoint, logger, ppo, run
from puffercore.__main__ import main
from puffercore.ocean import CartPole
from puffercore.ppo import PPOConfig
from puffercore.ppo.evaluation import BEST_NAME, VIDEO_FOLDER

# Training columns that depend on the clock, not on what was learned.
CLOCK_COLUMNS = ("sps",)


def small_config(tmp_path, name: str = "run", **overrides) -> PPOConfig:
    values = dict(num_envs=8, horizon=16, minibatch_size=64, update_epochs=2, hidden_size=16, backend="serial",
                  total_timesteps=8 * 16 * 5, quiet=True, tensorboard=False, checkpoint_interval=2,
                  log_interval=0.0, run_dir=str(tmp_path / name))
    return PPOConfig(**{**values, **overrides})


def training_rows(run_dir: str) -> list[dict]:
    """The metrics rows without evaluation's columns and the clock's."""
    return [{key: value for key, value in row.items() if not key.startswith(("eval/", "time_fraction/"))
             and key not in CLOCK_COLUMNS} for row in logger.read_csv(os.path.join(run_dir, "metrics.csv"))]


class Snapshots(ppo.Callback):
    """Every evaluation's result and the policy it evaluated."""

    def __init__(self):
        self.results, self.models = [], {}

    def on_eval(self, trainer, result, metrics):
        self.results.append(result)
        self.models[result.update] = {name: tensor.clone() for name, tensor in trainer.policy.state_dict().items()}


# ---- evaluation --------------------------------------------------------------------------------
@pytest.mark.parametrize("env", ["cartpole", "connect4"])
def test_eval_metrics_at_the_updates_due_and_best_pt_holds_the_best(tmp_path, env):
    snapshots = Snapshots()
    config = small_config(tmp_path, total_timesteps=8 * 16 * 5, eval_interval=2, eval_episodes=4)
    trainer = ppo.train(config, env, callbacks=[snapshots])
    rows = logger.read_csv(os.path.join(trainer.run_dir, "metrics.csv"))
    evaluated = [row for row in rows if "eval/mean_return" in row]
    assert [row["update"] for row in evaluated] == [2, 4, 5]  # every 2 updates, and after the last
    assert all(row["step"] == row["update"] * 8 * 16 for row in evaluated)
    for row, result in zip(evaluated, snapshots.results):
        returns = np.array(result.episodes.returns)
        assert len(returns) == 4 and len(result.episodes.lengths) == 4
        assert row["eval/mean_return"] == pytest.approx(returns.mean())
        assert row["eval/std_return"] == pytest.approx(returns.std())
        assert row["eval/mean_length"] == pytest.approx(np.mean(result.episodes.lengths)) and row["eval/mean_length"] >= 1
    if env == "connect4":  # a masked game against the built-in opponent: a loss, a draw or a win each
        assert all(-1 <= value <= 1 for result in snapshots.results for value in result.episodes.returns)

    means = [row["eval/mean_return"] for row in evaluated]
    best_update = evaluated[means.index(max(means))]["update"]  # the first of the best: a tie does not replace it
    best = checkpoint.load(os.path.join(trainer.run_dir, BEST_NAME))
    assert best["evaluation"]["mean_return"] == pytest.approx(max(means))
    assert best["evaluation"]["update"] == best_update == best["counters"]["update"]
    assert [result.best for result in snapshots.results] == [means[i] > max(means[:i], default=-np.inf)
                                                            for i in range(len(means))]
    for name, tensor in best["model"].items():  # the policy that evaluation played
        assert torch.equal(tensor, snapshots.models[best_update][name]), name
    returns = ppo.evaluate(os.path.join(trainer.run_dir, BEST_NAME), episodes=2)  # a checkpoint eval plays
    assert len(returns) == 2
    with open(os.path.join(trainer.run_dir, "seeds.json")) as file:
        seeds = json.load(file)
    assert seeds["eval"] not in (seeds["envs"], seeds["torch"], seeds["sampling"])  # the eval env is seeded apart


@pytest.mark.parametrize("env, overrides", [
    ("cartpole", {"capture_video": True}),  # rendering the eval env changes nothing either
    ("memory", {"lstm": True}),
    ("gymnasium:Pendulum-v1", {"norm_obs": True, "norm_reward": True}),
], ids=["native-video", "lstm", "gymnasium-normalized"])
def test_training_is_the_same_with_and_without_evaluation(tmp_path, env, overrides):
    if overrides.get("capture_video"):
        pytest.importorskip("imageio_ffmpeg")
    runs = {}
    for interval in (0, 1):
        config = small_config(tmp_path, f"eval{interval}", eval_interval=interval, eval_episodes=2,
                              **(overrides if interval else {key: value for key, value in overrides.items()
                                                             if key != "capture_video"}))
        runs[interval] = ppo.train(config, env)
    without, with_eval = (checkpoint.load(os.path.join(runs[i].run_dir, run.CHECKPOINT_NAME)) for i in (0, 1))
    for name, tensor in without["model"].items():
        assert torch.equal(tensor, with_eval["model"][name]), name
    for name in ("action", "sampling", "torch"):
        assert torch.equal(without["rng"][name], with_eval["rng"][name]), name
    if overrides.get("norm_obs"):  # the training statistics were read, never updated by evaluation
        for key in ("mean", "var", "count"):
            assert np.array_equal(without["normalize"]["observations"][key], with_eval["normalize"]["observations"][key])
    assert training_rows(runs[0].run_dir) == training_rows(runs[1].run_dir)
    assert any("eval/mean_return" in row for row in logger.read_csv(os.path.join(runs[1].run_dir, "metrics.csv")))


def test_resume_keeps_the_best_score_and_a_new_run_starts_over(tmp_path):
    config = small_config(tmp_path, total_timesteps=8 * 16 * 6, eval_interval=1, eval_episodes=2)
    trainer = ppo.train(config, "cartpole", stop_after=2)
    best_path = os.path.join(trainer.run_dir, BEST_NAME)
    best = checkpoint.load(best_path)
    best["evaluation"]["mean_return"] = 1e9  # a score no evaluation of the resumed run reaches
    checkpoint.save(best_path, best)
    resumed = ppo.train(None, resume=trainer.run_dir)
    assert resumed.update == 6
    kept = checkpoint.load(best_path)["evaluation"]
    assert kept["mean_return"] == 1e9 and kept["update"] <= 2

    fresh = ppo.train(config, "cartpole")  # the same directory, a new run: the old best is not its best
    assert fresh.update == 6
    assert checkpoint.load(best_path)["evaluation"]["mean_return"] < 1e9


def test_eval_interval_may_change_on_resume(tmp_path):
    trainer = ppo.train(small_config(tmp_path, total_timesteps=8 * 16 * 4), "cartpole", stop_after=2)
    resumed = ppo.train({"eval_interval": 1, "eval_episodes": 2}, resume=trainer.run_dir)
    rows = [row for row in logger.read_csv(os.path.join(resumed.run_dir, "metrics.csv")) if "eval/mean_return" in row]
    assert [row["update"] for row in rows] == [3, 4]


# ---- video ------------------------------------------------------------------------------------------
def test_capture_video_writes_the_first_episode_of_each_evaluation(tmp_path, monkeypatch):
    pytest.importorskip("imageio_ffmpeg")
    pytest.importorskip("tensorboard")
    import imageio.v2 as imageio
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logged = []

    class FakeRun:  # W&B's run object: what the logger hands it
        def log(self, values, step):
            logged.append((step, values))

        def finish(self):
            pass

    class FakeVideo:
        def __init__(self, path, format):
            self.path, self.format = path, format

    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=lambda **kwargs: FakeRun(), Video=FakeVideo))
    snapshots = Snapshots()
    config = small_config(tmp_path, total_timesteps=8 * 16 * 4, eval_interval=2, eval_episodes=3, capture_video=True,
                          tensorboard=True, wandb_project="demo")
    trainer = ppo.train(config, "cartpole", callbacks=[snapshots])
    folder = os.path.join(trainer.run_dir, VIDEO_FOLDER)
    assert sorted(os.listdir(folder)) == ["update-000002.mp4", "update-000004.mp4"]
    for result in snapshots.results:
        assert result.video == os.path.join(folder, f"update-{result.update:06d}.mp4")
        with imageio.get_reader(result.video, format="FFMPEG") as reader:
            frames = sum(1 for _ in reader)
        assert frames == result.episodes.lengths[0]  # a frame per step of the first episode, not of the others

    events = EventAccumulator(glob.glob(os.path.join(trainer.run_dir, "events.out.tfevents.*"))[0],
                              size_guidance={"images": 0})
    events.Reload()
    images = events.Images("eval/video")
    assert [image.step for image in images] == [2 * 8 * 16, 4 * 8 * 16]
    assert images[0].encoded_image_string[:6] == b"GIF89a" and images[0].width <= 320

    videos = [(step, values["eval/video"]) for step, values in logged if "eval/video" in values]
    assert [(step, video.path, video.format) for step, video in videos] == \
        [(result.global_step, result.video, "mp4") for result in snapshots.results]


def test_an_env_without_an_rgb_array_render_is_refused_before_training(tmp_path):
    updates = []

    class Count(ppo.Callback):
        def on_update_end(self, trainer, metrics):
            updates.append(trainer.update)

    with pytest.raises(ValueError, match="capture_video: memory has no rgb_array render"):
        ppo.train(small_config(tmp_path, eval_interval=1, capture_video=True), "memory", callbacks=[Count()])
    assert updates == []


def test_eval_needs_an_env_it_can_make_again(tmp_path):
    vec = puffercore.vector.make(CartPole, 8, backend="serial", seed=0)
    try:
        with pytest.raises(ValueError, match="eval_interval needs an env it can make apart from the training envs"):
            ppo.train(small_config(tmp_path, eval_interval=1), vec)
    finally:
        vec.close()


# ---- callbacks --------------------------------------------------------------------------------------
class Recorder(ppo.Callback):
    def __init__(self):
        self.calls = []

    def on_rollout_end(self, trainer):
        self.calls.append(("rollout_end", trainer.update))

    def on_eval(self, trainer, result, metrics):
        self.calls.append(("eval", trainer.update))
        metrics["custom/eval_twice"] = 2 * metrics["eval/mean_return"]

    def on_update_end(self, trainer, metrics):
        self.calls.append(("update_end", trainer.update))
        metrics["custom/update"] = trainer.update


def test_callbacks_are_called_in_order_and_their_metrics_logged(tmp_path):
    recorder = Recorder()
    trainer = ppo.train(small_config(tmp_path, eval_interval=2, eval_episodes=2), "cartpole", callbacks=[recorder])
    expected = []
    for update in range(1, 6):
        expected.append(("rollout_end", update - 1))  # before the update learns: trainer.update not yet counted
        if update in (2, 4, 5):
            expected.append(("eval", update))
        expected.append(("update_end", update))
    assert recorder.calls == expected and trainer.stopped_by is None
    rows = logger.read_csv(os.path.join(trainer.run_dir, "metrics.csv"))
    assert [row["custom/update"] for row in rows] == [1, 2, 3, 4, 5]  # log_interval 0: a row per update
    assert [row["custom/eval_twice"] for row in rows if "eval/mean_return" in row] == \
        [2 * row["eval/mean_return"] for row in rows if "eval/mean_return" in row]


def test_a_callback_that_returns_false_stops_with_a_resumable_checkpoint(tmp_path):
    class StopAtThree(ppo.Callback):
        def on_update_end(self, trainer, metrics):
            return False if trainer.update == 3 else None  # None goes on

    recorder = Recorder()
    trainer = ppo.train(small_config(tmp_path, checkpoint_interval=0), "cartpole", callbacks=[StopAtThree(), recorder])
    assert trainer.update == 3 and trainer.stopped_by == "StopAtThree" and trainer.interrupted is None
    assert recorder.calls[-1] == ("update_end", 3)  # every callback still saw the last update
    saved = checkpoint.load(os.path.join(trainer.run_dir, run.CHECKPOINT_NAME))
    assert saved["counters"]["update"] == 3
    summary = ppo.summary(trainer)
    assert summary.startswith("stopped by the callback StopAtThree: 384 steps")
    assert f"(checkpoint saved: puffercore train --resume {trainer.run_dir})" in summary
    resumed = ppo.train(None, resume=trainer.run_dir)
    assert resumed.update == 5 and resumed.stopped_by is None


def test_a_stop_from_on_rollout_end_or_on_eval_ends_the_update_first(tmp_path):
    class StopAtFirstEval(ppo.Callback):
        def on_eval(self, trainer, result, metrics):
            return False

    class StopAtFirstRollout(ppo.Callback):
        def on_rollout_end(self, trainer):
            return False

    trainer = ppo.train(small_config(tmp_path, "a", eval_interval=2, eval_episodes=1), "cartpole",
                        callbacks=[StopAtFirstEval()])
    assert trainer.update == 2 and trainer.stopped_by == "StopAtFirstEval"
    trainer = ppo.train(small_config(tmp_path, "b"), "cartpole", callbacks=[StopAtFirstRollout()])
    assert trainer.update == 1 and trainer.stopped_by == "StopAtFirstRollout"
    assert checkpoint.load(os.path.join(trainer.run_dir, run.CHECKPOINT_NAME))["counters"]["update"] == 1


def test_callbacks_must_be_instances_with_hooks(tmp_path):
    with pytest.raises(TypeError, match=r"got the class Recorder: pass Recorder\(\)"):
        ppo.train(small_config(tmp_path), "cartpole", callbacks=[Recorder])
    with pytest.raises(TypeError, match="a callback needs at least one of the hooks on_rollout_end"):
        ppo.train(small_config(tmp_path), "cartpole", callbacks=[object()])


# ---- bad values -------------------------------------------------------------------------------------
@pytest.mark.parametrize("overrides, message", [
    ({"eval_interval": -1}, "eval_interval must be a non-negative int, got -1"),
    ({"eval_interval": 2.5}, "eval_interval must be an int, got 2.5"),
    ({"eval_episodes": 0}, "eval_episodes must be a positive int, got 0"),
    ({"eval_episodes": -3}, "eval_episodes must be a positive int, got -3"),
    ({"capture_video": 1}, r"capture_video must be a bool \(True or False\), got 1"),
    ({"capture_video": True}, "capture_video must be False when eval_interval is 0"),
])
def test_bad_eval_values_are_refused_by_name(overrides, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(PPOConfig(), **overrides).validate()


@pytest.mark.parametrize("flags, message", [
    (["--eval-interval", "-2"], "eval_interval must be a non-negative int, got -2"),
    (["--eval-episodes", "0"], "eval_episodes must be a positive int, got 0"),
    (["--capture-video"], "capture_video must be False when eval_interval is 0"),
])
def test_cli_refuses_bad_eval_flags_in_one_line(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as stopped:
        main(["train", "cartpole", "--run-dir", str(tmp_path / "run"), "--quiet", *flags])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error


def test_readme_callback_snippet_runs_as_written(tmp_path):
    """The README's callbacks example, as a script: it stops the CartPole preset at the
    first evaluation that scores 500, before the budget, with a resumable checkpoint."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "README.md")) as file:
        readme = file.read()
    section = readme[readme.index("### Evaluation, video and callbacks during training"):]
    snippet = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    (tmp_path / "snippet.py").write_text(snippet)
    done = subprocess.run([sys.executable, "-P", "snippet.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("stopped by the callback StopWhenSolved: "), done.stdout
    run_dir = re.search(r"run directory (\S+) \(checkpoint saved", done.stdout).group(1)
    rows = logger.read_csv(tmp_path / run_dir / "metrics.csv")
    assert rows[-1]["eval/mean_return"] == 500 and "custom/approx_kl_x1000" in rows[-1]
    assert checkpoint.load(tmp_path / run_dir / BEST_NAME)["evaluation"]["mean_return"] == 500
