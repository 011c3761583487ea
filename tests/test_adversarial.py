"""What an adversarial trial found (issue 48, items 8, 10 and 11): every file puffercore
loads is checked before it is used, and the command line says what is wrong in one line
naming the file: a tampered config, game or network size, NaN weights, a corrupt replay
index, another algorithm's checkpoint, a truncated file, no checkpoint at all. A video
that can't be written stops recording, not training; a seed that fails is reported
while the others finish."""

import errno
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

from puffercore import checkpoint, ppo, run
from puffercore.__main__ import main
from puffercore.alphazero.config import AlphaZeroConfig
from puffercore.alphazero.evaluation import AlphaZeroAgent
from puffercore.alphazero.replay import ReplayBuffer
from puffercore.alphazero.trainer import Trainer as AlphaZeroTrainer
from puffercore.alphazero.trainer import train as train_alphazero
from puffercore.ppo import PPOConfig

SMALL = dict(num_envs=4, horizon=8, minibatch_size=16, update_epochs=1, hidden_size=16, quiet=True,
             tensorboard=False, checkpoint_interval=1, backend="serial")


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("ppo") / "run")
    ppo.train(PPOConfig(**SMALL, total_timesteps=32, run_dir=run_dir), "cartpole")
    return run_dir


@pytest.fixture(scope="module")
def alphazero_run(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("alphazero") / "run")
    config = AlphaZeroConfig.for_game("tictactoe", channels=8, blocks=1, games_per_iteration=4, parallel_games=4,
                                      simulations=8, batch_size=16, train_steps=2, eval_interval=0,
                                      replay_capacity=500, torch_threads=1, self_play_threads=1, iterations=1,
                                      run_dir=run_dir)
    train_alphazero(config, quiet=True)
    return run_dir


def tampered(tmp_path, source: str, change) -> str:
    """A copy of the run `source` whose checkpoint `change(state)` altered, written as a
    save would (or, for what a save refuses, as torch.save does); its run directory."""
    run_dir = str(tmp_path / "tampered")
    os.makedirs(run_dir)
    state = checkpoint.load(run.checkpoint_path(source))
    change(state)
    torch.save(checkpoint._encode(state, "state"), os.path.join(run_dir, run.CHECKPOINT_NAME))
    return run_dir


def one_line_error(capsys, arguments: list[str]) -> str:
    """The error `puffercore ARGUMENTS` ends with: a usage error (exit 2), one line and
    the hint, never a traceback."""
    with pytest.raises(SystemExit) as exited:
        main(arguments)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 2 and "Traceback" not in err and lines[1].startswith("(see `puffercore"), err
    return lines[0]


def write_nan(run_dir: str, key: str) -> None:
    """Put a NaN into the first tensor of `state[key]` of the checkpoint in `run_dir`,
    bypassing the save that would refuse it."""
    path = run.checkpoint_path(run_dir)
    state = checkpoint._encode(checkpoint.load(path), "state")
    name = next(iter(state[key]))
    weights = state[key][name].float().contiguous().clone()
    weights.view(-1)[0] = float("nan")
    state[key][name] = weights
    torch.save(state, path)


# ---- PPO checkpoints: eval and export ------------------------------------------------------------
PPO_TAMPERING = {
    "unknown config field": (lambda state: state["config"].update(bogus=1), "'bogus'"),
    "hidden_size 10**6": (lambda state: state["config"].update(hidden_size=10**6),
                          r"the weights do not fit the network its config describes: 'encoder.0.weight' is "
                          r"\[16, 4\] in the file but \[1000000, 4\] in the network"),
    "a layer of another size": (lambda state: state["model"].update(
        {"actor.weight": torch.zeros(2, 17)}), r"'actor.weight' is \[2, 17\] in the file but \[2, 16\]"),
    "a missing tensor": (lambda state: state["model"].pop("critic.bias"), "'critic.bias' is missing"),
    "a tensor too many": (lambda state: state["model"].update(extra=torch.zeros(1)),
                          "'extra' is not a tensor of the network"),
}
PPO_COMMANDS = {"eval": lambda run_dir: ["eval", "--checkpoint", run_dir, "--episodes", "1"],
                "export": lambda run_dir: ["export", run_dir, "--format", "torchscript"]}


@pytest.mark.parametrize("command", PPO_COMMANDS)
@pytest.mark.parametrize("case", PPO_TAMPERING)
def test_a_tampered_ppo_checkpoint_is_one_line_naming_the_file(tmp_path, ppo_run, capsys, case, command):
    change, message = PPO_TAMPERING[case]
    run_dir = tampered(tmp_path, ppo_run, change)
    line = one_line_error(capsys, PPO_COMMANDS[command](run_dir))
    assert run_dir in line
    assert re.search(message, line), line


@pytest.mark.parametrize("command", PPO_COMMANDS)
def test_nan_weights_are_refused_at_load_naming_the_file_and_the_tensor(tmp_path, ppo_run, capsys, command):
    run_dir = tampered(tmp_path, ppo_run, lambda state: None)
    write_nan(run_dir, "model")
    path = run.checkpoint_path(run_dir)
    with pytest.raises(ValueError, match=f"{path}: state\\['model'\\]\\['encoder.0.weight'\\] holds NaN or inf"):
        ppo.Policy.load(run_dir)
    line = one_line_error(capsys, PPO_COMMANDS[command](run_dir))
    assert path in line and "'encoder.0.weight'" in line


@pytest.mark.parametrize("space", [None, {"type": "bogus"}, {"type": "Box", "low": [0.0], "high": [1.0],
                                                             "shape": [10**6, 10**6], "dtype": "<f4"}])
def test_unreadable_recorded_spaces_are_one_line(tmp_path, ppo_run, capsys, space):
    run_dir = tampered(tmp_path, ppo_run, lambda state: state["policy"].update(observation_space=space))
    line = one_line_error(capsys, PPO_COMMANDS["export"](run_dir))
    assert f"{run_dir}: the spaces it records for its policy are not readable" in line


def test_resuming_a_checkpoint_that_says_hidden_size_a_million_allocates_nothing(tmp_path, ppo_run):
    run_dir = tampered(tmp_path, ppo_run, lambda state: state["config"].update(hidden_size=10**6))
    with pytest.raises(ValueError, match=r"\[1000000, 4\] in the network"):
        ppo.train(resume=run_dir)


# ---- AlphaZero checkpoints: play and resume ---------------------------------------------------------
ALPHAZERO_TAMPERING = {
    "unknown config field": (lambda state: state["alphazero_config"].update(bogus=1), "'bogus'"),
    "unknown game": (lambda state: state["alphazero_config"].update(game="chess"),
                     r"game must be one of \['azul', 'connect4', 'tictactoe'\], got 'chess'"),
    "another game's network": (lambda state: state["alphazero_config"].update(game="connect4"),
                               r"the weights do not fit the network its config describes: 'policy_head.4.weight' "
                               r"is \[9, 18\] in the file but \[7, 84\]"),
    "channels 10**6": (lambda state: state["alphazero_config"].update(channels=10**6),
                       r"'stem.0.weight' is \[8, 2, 3, 3\] in the file but \[1000000, 2, 3, 3\] in the network"),
}


@pytest.mark.parametrize("case", ALPHAZERO_TAMPERING)
def test_a_tampered_alphazero_checkpoint_is_one_line_for_play_and_resume(tmp_path, alphazero_run, capsys, case):
    change, message = ALPHAZERO_TAMPERING[case]
    run_dir = tampered(tmp_path, alphazero_run, change)
    for arguments in (["play", "tictactoe", "--checkpoint", run_dir], ["alphazero", "--resume", run_dir]):
        line = one_line_error(capsys, arguments)
        assert run_dir in line
        assert re.search(message, line), line


def test_alphazero_nan_weights_are_refused_at_load(tmp_path, alphazero_run, capsys):
    run_dir = tampered(tmp_path, alphazero_run, lambda state: None)
    write_nan(run_dir, "network")
    with pytest.raises(ValueError, match="state\\['network'\\]\\['stem.0.weight'\\] holds NaN or inf"):
        AlphaZeroAgent.load(run_dir)
    assert "holds NaN or inf" in one_line_error(capsys, ["play", "tictactoe", "--checkpoint", run_dir])


# ---- the replay buffer at resume ---------------------------------------------------------------------
def corrupt_replay(change):
    return lambda state: change(state["replay"])


REPLAY_CORRUPTION = {
    "write_index past the end": (corrupt_replay(lambda replay: replay.update(write_index=10**9)),
                                 r"write_index must be \d+ for \d+ examples of capacity 500, got 1000000000"),
    "write_index negative": (corrupt_replay(lambda replay: replay.update(write_index=-1)), "got -1"),
    "write_index not an int": (corrupt_replay(lambda replay: replay.update(write_index="3")), "got '3'"),
    "arrays of different lengths": (corrupt_replay(lambda replay: replay.update(values=replay["values"][:-1])),
                                    "different numbers of examples"),
    "another game's observations": (corrupt_replay(lambda replay: replay.update(
        observations=replay["observations"].reshape(len(replay["observations"]), -1))),
        r"observations must be float32 \[examples, 2, 3, 3\], got float32 \[\d+, 18\]"),
    "more examples than capacity": (lambda state: state["alphazero_config"].update(replay_capacity=2),
                                    "more than its capacity 2"),
}


@pytest.mark.parametrize("case", REPLAY_CORRUPTION)
def test_a_corrupt_replay_buffer_is_refused_at_resume_before_any_self_play(tmp_path, alphazero_run, capsys,
                                                                            monkeypatch, case):
    change, message = REPLAY_CORRUPTION[case]
    run_dir = tampered(tmp_path, alphazero_run, change)
    monkeypatch.setattr(AlphaZeroTrainer, "iterate", lambda self: pytest.fail("self-play ran"))
    with pytest.raises(ValueError, match=f"{run_dir}/checkpoint.pt does not resume: the replay buffer.*{message}"):
        AlphaZeroTrainer.resume(run_dir)
    line = one_line_error(capsys, ["alphazero", "--resume", run_dir, "--iterations", "2"])
    assert "replay buffer" in line


def test_a_replay_buffer_state_loads_back_as_it_was():
    buffer = ReplayBuffer(4, (2,), 3, 2)
    rows = [([float(i), 0.0], [True, False, True], [0.5, 0.0, 0.5], [1.0, -1.0]) for i in range(6)]
    buffer.extend(*zip(*rows))
    copy = ReplayBuffer(4, (2,), 3, 2)
    copy.load_state_dict(buffer.state_dict())
    assert (copy.size, copy.write_index) == (4, 2) and (copy.observations == buffer.observations).all()
    partial = ReplayBuffer(4, (2,), 3, 2)
    partial.extend(*zip(*rows[:3]))
    with pytest.raises(ValueError, match="write_index must be 3 for 3 examples of capacity 4, got 0"):
        copy.load_state_dict({**partial.state_dict(), "write_index": 0})


# ---- files of another kind, truncated, missing ----------------------------------------------------------
@pytest.mark.parametrize("command", ["eval", "export", "play"])
def test_another_algorithm_a_truncated_file_or_none_is_one_line(tmp_path, ppo_run, alphazero_run, capsys, command):
    def arguments(run_dir):
        return ["play", "tictactoe", "--checkpoint", run_dir] if command == "play" else PPO_COMMANDS[command](run_dir)

    other = ppo_run if command == "play" else alphazero_run
    line = one_line_error(capsys, arguments(other))
    assert f"{run.checkpoint_path(other)} is not " + ("an AlphaZero" if command == "play" else "a PPO") in line
    assert "it is " + ("a PPO" if command == "play" else "an AlphaZero") + " run's checkpoint" in line
    assert ("`puffercore eval --checkpoint RUN`" if command == "play" else "`puffercore play GAME") in line
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    data = open(run.checkpoint_path(other if command != "play" else alphazero_run), "rb").read()
    (truncated / run.CHECKPOINT_NAME).write_bytes(data[: len(data) // 2])
    assert "is not a readable checkpoint (truncated or corrupt" in one_line_error(capsys, arguments(str(truncated)))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert f"no checkpoint at {empty}/checkpoint.pt" in one_line_error(capsys, arguments(str(empty)))


# ---- video onto a full disk ---------------------------------------------------------------------------
class FailingWriter:
    """imageio's FFMPEG writer on a disk that fills after `frames` frames."""

    def __init__(self, frames: int, error: OSError):
        self.frames, self.error, self.closed = frames, error, False

    def append_data(self, frame):
        if self.frames == 0:
            raise self.error
        self.frames -= 1

    def close(self):
        self.closed = True


FULL_DISK = {
    "ENOSPC": (OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
    # imageio-ffmpeg's error when ffmpeg died (it printed its own reason to stderr)
    "broken pipe, disk full": (OSError("[Errno 32] Broken pipe\n\nFFMPEG COMMAND:\nffmpeg -y ..."),
                               r"No space left on device \(.* has 0 bytes free\)"),
    "broken pipe": (BrokenPipeError(errno.EPIPE, "Broken pipe"), r"the encoder \(ffmpeg\) stopped"),
}


@pytest.mark.parametrize("case", FULL_DISK)
def test_a_video_that_cannot_be_written_stops_recording_not_training(tmp_path, monkeypatch, capsys, case):
    pytest.importorskip("imageio_ffmpeg")
    import imageio.v2

    error, cause = FULL_DISK[case]
    writers = []

    def get_writer(path, **options):
        writers.append(FailingWriter(3, error))
        open(path, "wb").close()  # what ffmpeg had written: a file that won't play
        return writers[-1]

    monkeypatch.setattr(imageio.v2, "get_writer", get_writer)
    if case == "broken pipe, disk full":
        monkeypatch.setattr(os, "statvfs", lambda path: os.statvfs_result((4096, 4096, 10, 0, 0, 5, 0, 0, 0, 255)))
    results = []

    class Results(ppo.Callback):
        def on_eval(self, trainer, result, metrics):
            results.append(result)

    config = PPOConfig(**{**SMALL, "quiet": False}, total_timesteps=4 * 8 * 4, eval_interval=2, eval_episodes=1,
                       capture_video=True, run_dir=str(tmp_path / "run"))
    trainer = ppo.train(config, "cartpole", callbacks=[Results()])
    assert trainer.update == 4 and [result.update for result in results] == [2, 4]  # training went on
    video = os.path.join(trainer.run_dir, "videos", "update-000002.mp4")
    err = [line for line in capsys.readouterr().err.splitlines() if "capture_video" in line]
    assert len(err) == 1 and video in err[0], err
    assert re.search(f"could not write the video {video}: {cause}", err[0]), err[0]
    assert err[0].endswith("recording stops, training goes on")
    assert len(writers) == 1 and writers[0].closed and not os.path.exists(video)  # no later evaluation records
    assert [result.video for result in results] == [None, None]


def test_eval_video_onto_a_full_disk_is_one_line(tmp_path, ppo_run, monkeypatch, capsys):
    pytest.importorskip("imageio_ffmpeg")
    import imageio.v2

    monkeypatch.setattr(imageio.v2, "get_writer",
                        lambda path, **options: FailingWriter(2, OSError(errno.ENOSPC, "No space left on device")))
    path = str(tmp_path / "out.mp4")
    line = one_line_error(capsys, ["eval", "--checkpoint", ppo_run, "--episodes", "1", "--video", path])
    assert f"could not write the video {path}: No space left on device" in line


# ---- many seeds, one failing ----------------------------------------------------------------------------
FLAKY_ENV = '''
import gymnasium
import numpy as np
import torch

from puffercore.ppo.trainer import SEED_NAMES
from puffercore.seeding import named_seeds

FAILING_RUN = named_seeds(2, SEED_NAMES)["torch"]  # the torch seed of the run with seed 2


class Flaky(gymnasium.Env):
    """Episodes of 5 steps; it breaks in the run seeded 2."""
    observation_space = gymnasium.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        if torch.initial_seed() == FAILING_RUN:
            raise RuntimeError("the env broke")
        self.steps += 1
        return np.zeros(2, np.float32), 1.0, self.steps == 5, False, {}
'''


def test_a_failing_seed_is_reported_and_the_others_finish(tmp_path):
    (tmp_path / "flaky.py").write_text(textwrap.dedent(FLAKY_ENV))
    run_dir = str(tmp_path / "runs" / "flaky")
    result = subprocess.run(
        [sys.executable, "-m", "puffercore", "train", "flaky:Flaky", "--seeds", "1", "2", "3", "--jobs", "2",
         "--total-timesteps", "128", "--vec.num-envs", "2", "--vec.backend", "serial", "--train.horizon", "16",
         "--train.minibatch-size", "16", "--policy.hidden-size", "8", "--torch-threads", "1", "--compile", "false",
         "--tensorboard", "false", "--run-dir", run_dir],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    failed = [line for line in result.stderr.splitlines() if line.startswith("seed 2 failed")]
    assert failed == ["seed 2 failed: RuntimeError: the env broke (flaky.py:24, in step)"], result.stderr[-3000:]
    for seed in (1, 3):  # the seed running beside it and the one waiting finished
        assert any(line.startswith(f"seed {seed}: ") for line in result.stdout.splitlines()), result.stdout
        assert os.path.exists(os.path.join(f"{run_dir}-seed{seed}", run.CHECKPOINT_NAME))
    summary = result.stdout.strip().splitlines()[-1]
    assert summary.startswith("seeds 1 2 3: final return") and "(std over 2 seeds)" in summary, summary
    assert "by seed 1: 5.00, 2: FAILED, 3: 5.00" in summary and "1 failed (seed 2)" in summary, summary
