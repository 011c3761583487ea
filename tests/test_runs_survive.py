"""Nothing is lost (issue 31, items 2-6): a NaN never reaches a checkpoint and is named;
SIGTERM and SIGINT end a run with a checkpoint and a resume line, for PPO and AlphaZero,
under torchrun with every rank together; runs started side by side get their own
directories; a torn metrics.csv and a killed checkpoint write leave nothing that blocks
the next run; a checkpoint never makes eval or --resume import the code it names.

The signal tests start real training processes and signal them."""

import dataclasses
import glob
import itertools
import os
import signal
import subprocess
import sys
import threading
import time

import gymnasium
import numpy as np
import pytest
import torch

from puffercore import checkpoint, logger, ppo, run
from puffercore.alphazero.config import AlphaZeroConfig
from puffercore.alphazero.trainer import Trainer as AlphaZeroTrainer
from puffercore.alphazero.trainer import train as train_alphazero
from puffercore.finite import NonFiniteError, StepScalars

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")
SMALL = dict(num_envs=4, horizon=8, minibatch_size=16, update_epochs=2, hidden_size=16, quiet=True,
             tensorboard=False, checkpoint_interval=1, backend="serial")
# Training processes in these tests learn for ever unless a signal stops them (eagerly:
# such a budget makes compile "auto" compile, seconds in which a signal waits).
PPO_FOREVER = ["--total-timesteps", "100000000", "--quiet", "--tensorboard", "false", "--log-interval", "0",
               "--checkpoint-interval", "0", "--vec.num-envs", "4", "--train.horizon", "16",
               "--train.minibatch-size", "32", "--policy.hidden-size", "16", "--torch-threads", "1",
               "--compile", "false"]
ALPHAZERO_TINY = ["--channels", "8", "--blocks", "1", "--games-per-iteration", "4", "--parallel-games", "4",
                  "--simulations", "8", "--train-steps", "2", "--batch-size", "16", "--eval-interval", "0",
                  "--torch-threads", "1", "--self-play-threads", "1"]


def tiny_alphazero(**overrides) -> AlphaZeroConfig:
    settings = dict(channels=8, blocks=1, games_per_iteration=6, parallel_games=4, simulations=8, batch_size=16,
                    train_steps=3, eval_interval=0, replay_capacity=500, torch_threads=1, iterations=3)
    return AlphaZeroConfig.for_game("tictactoe", **{**settings, **overrides})


def assert_finite(state) -> None:
    for name, tensor in state.items():
        assert torch.isfinite(tensor).all(), name


# ---- NaN and inf --------------------------------------------------------------------------
def test_step_scalars_name_the_earliest_non_finite_value_and_average_the_rest():
    scalars = StepScalars()
    scalars.record({"a": torch.tensor(1.0), "b": torch.tensor(2.0)})
    assert scalars.first_non_finite() is None and scalars.means() == {"a": 1.0, "b": 2.0}
    scalars.record({"a": torch.tensor(3.0), "b": torch.tensor(float("inf"))})
    scalars.record({"a": torch.tensor(float("nan")), "b": torch.tensor(float("nan"))})
    assert scalars.first_non_finite() == (1, "b", float("inf"))


class NanRewardEnv(gymnasium.Env):
    """Reward 1 per step, except that the third env reset (row 2 of a serial vector,
    which resets its envs in row order) returns NaN at its step 27."""

    observation_space = gymnasium.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, numbers):
        self.numbers, self.number, self.steps = numbers, None, 0

    def reset(self, seed=None, options=None):
        if self.number is None:
            self.number = next(self.numbers)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.steps += 1
        reward = float("nan") if self.number == 2 and self.steps == 27 else 1.0
        return np.zeros(2, np.float32), reward, False, self.steps % 10 == 0, {}


def test_a_nan_reward_names_the_update_and_env_rows_and_keeps_the_last_checkpoint(tmp_path):
    numbers = itertools.count()
    config = ppo.PPOConfig(**SMALL, total_timesteps=4 * 8 * 6, run_dir=str(tmp_path))
    # Each env steps 8 times an update: its step 27 comes in update 4, after the checkpoint of update 3.
    with pytest.raises(NonFiniteError, match=r"^update 4: the env returned reward nan at env rows \[2\]; the run "
                                             r"stops here: the last checkpoint, .*checkpoint.pt \(update 3\), is kept"):
        ppo.train(config, lambda: NanRewardEnv(numbers))
    saved = checkpoint.load(tmp_path / run.CHECKPOINT_NAME)
    assert saved["counters"]["update"] == 3
    assert_finite(saved["model"])


def test_a_nan_loss_is_named_and_a_poisoned_model_is_never_checkpointed(tmp_path):
    config = ppo.PPOConfig(**{**SMALL, "num_envs": 8, "minibatch_size": 32}, anneal_lr=False,
                           total_timesteps=8 * 8 * 4, run_dir=str(tmp_path))
    trainer = ppo.Trainer("cartpole", config, run_dir=str(tmp_path))
    try:
        trainer.reset_envs()
        trainer.collect()
        trainer.learn()
        trainer.update += 1
        trainer.save_checkpoint()
        good = checkpoint.load(tmp_path / run.CHECKPOINT_NAME)
        trainer.optimizer.param_groups[0]["lr"] = 1e38  # one step throws every weight near float32's limit
        trainer.collect()
        with pytest.raises(NonFiniteError, match=r"^update 2: loss/\w+ is (nan|inf|-inf) in minibatch \d+; .*"
                                                 r"the last checkpoint, .* \(update 1\), is kept as it was"):
            trainer.learn()
        with pytest.raises(NonFiniteError, match=r"^after update 1: state\['model'\]\['[\w.]+'\] holds NaN or inf, "
                                                 r"so .*checkpoint.pt was not written"):
            trainer.save_checkpoint()
    finally:
        trainer.close()
    kept = checkpoint.load(tmp_path / run.CHECKPOINT_NAME)
    for name, tensor in good["model"].items():
        assert torch.equal(kept["model"][name], tensor), name
    assert os.listdir(tmp_path) == [run.CHECKPOINT_NAME]  # no temporary file either


def test_alphazero_stops_on_a_nan_loss_and_keeps_its_last_checkpoint(tmp_path):
    trainer = AlphaZeroTrainer(tiny_alphazero(), str(tmp_path))
    trainer.iterate()
    trainer.save()
    trainer.config = dataclasses.replace(trainer.config, learning_rate=1e38)  # weights thrown near float32's limit
    with pytest.raises(NonFiniteError, match=r"^iteration 2: loss/\w+ is (nan|inf|-inf) in training step \d+; .*"
                                             r"the last checkpoint, .* \(iteration 1\), is kept as it was"):
        trainer.iterate()
    with pytest.raises(NonFiniteError, match="holds NaN or inf"):
        trainer.save()
    saved = checkpoint.load(tmp_path / run.CHECKPOINT_NAME)
    assert saved["counters"]["iteration"] == 1
    assert_finite(saved["network"])


# ---- SIGTERM and SIGINT -------------------------------------------------------------------
def start(command: list[str], **kwargs) -> subprocess.Popen:
    """A training process in a session of its own (a signal to its group reaches only it
    and its children, as `timeout` or a terminal's Ctrl-C would). -P: the working
    directory is not put first on sys.path, where a source checkout's puffercore/ (no
    compiled extensions) would shadow the installed package."""
    return subprocess.Popen([sys.executable, "-P", *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kwargs)


def wait_for_rows(process: subprocess.Popen, csv_pattern: str, rows: int, timeout: float = 180.0) -> str:
    """The metrics file matching `csv_pattern` once it has `rows` rows (the run is
    training)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"training ended early ({process.returncode}): {process.communicate()[1][-3000:]}")
        for path in glob.glob(csv_pattern):
            if len(logger.read_csv(path)) >= rows:
                return path
        time.sleep(0.2)
    process.kill()
    raise AssertionError("training logged nothing in time")


def finish(process: subprocess.Popen, timeout: float = 120.0) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise AssertionError("the run did not stop after the signal") from None
    return process.returncode, out, err


@pytest.mark.parametrize("env, backend, signal_number, to_group", [
    ("cartpole", "serial", signal.SIGTERM, False),  # docker stop, Kubernetes: the main process
    ("CartPole-v1", "processes", signal.SIGTERM, True),  # timeout, Slurm: the env workers get it too
    ("CartPole-v1", "processes", signal.SIGINT, True),  # Ctrl-C in a terminal
])
def test_a_signal_ends_ppo_with_a_checkpoint_and_a_resume_line(tmp_path, env, backend, signal_number, to_group):
    run_dir = str(tmp_path / "run")
    process = start(["-m", "puffercore", "train", env, *PPO_FOREVER, "--vec.backend", backend,
                     "--vec.num-workers", "2" if backend == "processes" else "0", "--run-dir", run_dir])
    wait_for_rows(process, os.path.join(run_dir, logger.CSV_NAME), 2)
    (os.killpg if to_group else os.kill)(process.pid, signal_number)
    code, out, err = finish(process)
    assert code == 128 + signal_number, err[-3000:]
    assert f"interrupted by {signal_number.name}: " in out and f"puffercore train --resume {run_dir}" in out, out
    saved = checkpoint.load(os.path.join(run_dir, run.CHECKPOINT_NAME))  # written at the signal: the interval is 0
    update = saved["counters"]["update"]
    assert update >= 2 and logger.read_csv(os.path.join(run_dir, logger.CSV_NAME))[-1]["update"] == update

    resumed = ppo.train(None, resume=run_dir, stop_after=1)
    assert resumed.update == update + 1 and not resumed.interrupted


def test_sigterm_ends_alphazero_with_a_checkpoint_and_a_resume_line(tmp_path):
    run_dir = str(tmp_path / "run")
    process = start(["-m", "puffercore", "alphazero", "tictactoe", *ALPHAZERO_TINY, "--iterations", "100000",
                     "--checkpoint-interval", "100000", "--run-dir", run_dir])
    wait_for_rows(process, os.path.join(run_dir, logger.CSV_NAME), 2)
    process.send_signal(signal.SIGTERM)
    code, out, err = finish(process)
    assert code == 128 + signal.SIGTERM, err[-3000:]
    saved = checkpoint.load(os.path.join(run_dir, run.CHECKPOINT_NAME))  # written at the signal only
    iteration = saved["counters"]["iteration"]
    assert f"interrupted by SIGTERM after iteration {iteration}; checkpoint saved: puffercore alphazero " \
           f"--resume {run_dir}" in out, out
    resumed = train_alphazero(resume=run_dir, quiet=True, budget={"iterations": iteration + 1})
    assert resumed.counters["iteration"] == iteration + 1 and not resumed.interrupted


def torchrun(script: str, *args: str) -> list[str]:
    return ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", os.path.join(SCRIPTS, script), *args]


def test_sigterm_to_torchrun_stops_every_ppo_rank_after_the_same_update(tmp_path):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    # RUN_DIR "": rank 0 makes runs/cartpole-SEED-TIME, every rank learns its name.
    process = start(torchrun("distributed_ppo.py", str(out_dir), "", "--updates", "100000"), cwd=tmp_path)
    csv_path = wait_for_rows(process, str(tmp_path / "runs" / "cartpole-1-*" / logger.CSV_NAME), 2)
    run_dir = os.path.relpath(os.path.dirname(csv_path), tmp_path)
    process.send_signal(signal.SIGTERM)  # to the agent, which passes it on to each rank's process group
    _, out, err = finish(process)
    saved = checkpoint.load(os.path.join(tmp_path, run_dir, run.CHECKPOINT_NAME))
    update = saved["counters"]["update"]
    assert saved["world_size"] == 2 and update >= 2, err[-3000:]
    assert os.listdir(tmp_path / "runs") == [os.path.basename(run_dir)]  # one directory for the job
    for rank in (0, 1):  # both ranks stopped after the update rank 0 saved
        assert f"rank {rank} world 2 update {update} step {update * 2 * 8 * 16} interrupted SIGTERM " \
               f"run_dir {run_dir}\n" in out, out + err[-3000:]
        assert len((out_dir / f"rank{rank}.txt").read_text().splitlines()) == update

    result = subprocess.run([sys.executable, *torchrun("distributed_ppo.py", str(out_dir), run_dir, "--resume",
                                                       "--updates", "100000", "--stop-after", "1")],
                            capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert checkpoint.load(os.path.join(tmp_path, run_dir, run.CHECKPOINT_NAME))["counters"]["update"] == update + 1
    assert (out_dir / "rank0.txt").read_text() == (out_dir / "rank1.txt").read_text()  # still one model


def test_sigterm_to_torchrun_stops_every_alphazero_rank_after_the_same_iteration(tmp_path):
    out_dir, run_dir = tmp_path / "out", tmp_path / "run"
    out_dir.mkdir()
    process = start(torchrun("distributed_alphazero.py", str(out_dir), str(run_dir), "100000"))
    wait_for_rows(process, str(run_dir / logger.CSV_NAME), 2)
    process.send_signal(signal.SIGTERM)
    _, out, err = finish(process)
    ranks = [(out_dir / f"rank{rank}.txt").read_text().split() for rank in (0, 1)]
    games, _, ended = ranks[0]
    assert ranks[1] == ranks[0] and ended == "SIGTERM", err[-3000:]  # one network, stopped together
    saved = checkpoint.load(run_dir / run.CHECKPOINT_NAME)
    assert saved["counters"]["games"] == int(games) == saved["counters"]["iteration"] * 4 * 2 >= 2 * 4 * 2


def test_stop_signals_restore_the_previous_handlers_and_a_second_ctrl_c_acts_at_once():
    before = {number: signal.getsignal(number) for number in run.StopSignals.HANDLED}
    with run.StopSignals("update") as signals:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # a Python handler runs between bytecodes of the main thread
        assert signals.signal == signal.SIGTERM
        os.kill(os.getpid(), signal.SIGTERM)  # a second SIGTERM changes nothing
        with pytest.raises(KeyboardInterrupt):  # but a Ctrl-C after the first signal stops at once
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1.0)
    assert {number: signal.getsignal(number) for number in run.StopSignals.HANDLED} == before

    seen = []

    def enter_in_a_thread():
        with run.StopSignals("update"):
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=enter_in_a_thread)
    thread.start()
    thread.join()
    assert seen == [before[signal.SIGTERM]]  # only the main thread installs handlers


# ---- run directories ----------------------------------------------------------------------
def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(time, "strftime", lambda *args: "20260101-120000")  # every run in the same second
    made = []
    threads = [threading.Thread(target=lambda: made.append(run.create_run_dir("cartpole", 7))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    base = os.path.join("runs", "cartpole-7-20260101-120000")
    assert sorted(made) == sorted([base] + [f"{base}-{number}" for number in range(2, 9)])

    config = ppo.PPOConfig(**{**SMALL, "checkpoint_interval": 0}, total_timesteps=4 * 8, seed=5)
    first, second = ppo.train(config, "cartpole"), ppo.train(config, "cartpole")
    assert first.run_dir == os.path.join("runs", "cartpole-5-20260101-120000")
    assert second.run_dir == first.run_dir + "-2"
    for trainer in (first, second):
        assert checkpoint.load(run.checkpoint_path(trainer.run_dir))["counters"]["update"] == 1

    seeds = [train_alphazero(tiny_alphazero(seed=seed, iterations=1), quiet=True).run_dir for seed in (3, 3)]
    assert seeds == [os.path.join("runs", "alphazero-tictactoe-3-20260101-120000"), seeds[0] + "-2"]


# ---- torn files ---------------------------------------------------------------------------
def test_resume_drops_a_half_written_metrics_row(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    ppo.train(ppo.PPOConfig(**SMALL, total_timesteps=4 * 8 * 2, log_interval=0.0, run_dir=run_dir), "cartpole")
    csv_path = os.path.join(run_dir, logger.CSV_NAME)
    rows = logger.read_csv(csv_path)
    with open(csv_path, "a") as file:
        file.write("96,3.5e")  # a kill in the middle of writing the next row
    assert logger.read_csv(csv_path) == rows  # a reader never sees the torn row

    resumed = ppo.train({"total_timesteps": 4 * 8 * 3}, resume=run_dir)
    assert resumed.update == 3
    assert [row["step"] for row in logger.read_csv(csv_path)] == [32, 64, 96]
    with open(csv_path) as file:
        assert [line.split(",")[0] for line in file.read().splitlines()[1:]] == ["32", "64", "96"]

    with open(csv_path, "a") as file:
        file.write("128,1")
    logger.Logger(run_dir, tensorboard=False, resume_step=96).close()
    assert f"{csv_path}: dropping its half-written last row" in capsys.readouterr().err
    with open(csv_path, "rb") as file:
        assert file.read().endswith(b"\n")


KILLED_SAVE = """
import os, signal, sys, torch
from puffercore import checkpoint

def killed_mid_write(state, file):
    file.write(b"partial")
    file.flush()
    os.kill(os.getpid(), signal.SIGKILL)

torch.save = killed_mid_write
checkpoint.save(sys.argv[1], {"step": 2})
"""


def test_the_next_save_removes_what_a_killed_save_left(tmp_path):
    path = tmp_path / run.CHECKPOINT_NAME
    checkpoint.save(path, {"step": 1})
    result = subprocess.run([sys.executable, "-c", KILLED_SAVE, str(path)], capture_output=True, timeout=120)
    assert result.returncode == -signal.SIGKILL
    leftovers = [name for name in os.listdir(tmp_path) if name != run.CHECKPOINT_NAME]
    assert len(leftovers) == 1 and leftovers[0].startswith(".tmp-") and leftovers[0].endswith(".pt")
    assert checkpoint.load(path) == {"step": 1}  # the killed write never touched the checkpoint

    other = tmp_path / "other.pt"
    checkpoint.save(other, {"step": 0})  # another file's save leaves them alone
    assert set(os.listdir(tmp_path)) == {run.CHECKPOINT_NAME, "other.pt", leftovers[0]}
    checkpoint.save(path, {"step": 3})
    assert set(os.listdir(tmp_path)) == {run.CHECKPOINT_NAME, "other.pt"}
    assert checkpoint.load(path) == {"step": 3}


# ---- envs a checkpoint names ---------------------------------------------------------------
@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("cartpole") / "run")
    ppo.train(ppo.PPOConfig(**SMALL, total_timesteps=4 * 8, run_dir=run_dir), "cartpole")
    return run_dir


def crafted(tmp_path, cartpole_run, env) -> str:
    """A copy of a real run whose checkpoint names `env`."""
    run_dir = str(tmp_path / "crafted")
    os.makedirs(run_dir)
    state = checkpoint.load(run.checkpoint_path(cartpole_run))
    checkpoint.save(os.path.join(run_dir, run.CHECKPOINT_NAME), {**state, "env": env})
    return run_dir


@pytest.mark.parametrize("command", [["eval", "--checkpoint"], ["train", "--resume"]])
def test_a_checkpoint_naming_code_is_refused_never_run(tmp_path, cartpole_run, command):
    run_dir = crafted(tmp_path, cartpole_run, "os:abort")
    result = subprocess.run([sys.executable, "-P", "-m", "puffercore", *command, run_dir], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2, result.stderr[-3000:]  # not -SIGABRT
    assert "the checkpoint names the env 'os:abort', which is not one puffercore knows" in result.stderr
    assert "`puffercore eval my_module:MyEnv --checkpoint RUN`" in result.stderr


def test_an_env_the_package_knows_comes_from_the_checkpoint_others_from_the_caller(tmp_path, cartpole_run):
    assert len(ppo.evaluate(cartpole_run, episodes=1)) == 1  # an ocean name
    run_dir = crafted(tmp_path, cartpole_run, "gymnasium.envs.classic_control.cartpole:CartPoleEnv")
    with pytest.raises(ValueError, match="pass it yourself: on the command line, `puffercore eval my_module:MyEnv "
                                         "--checkpoint RUN`.*`ppo.evaluate\\(RUN, env=MyEnv\\)`"):
        ppo.evaluate(run_dir, episodes=1)
    with pytest.raises(ValueError, match="pass it yourself"):
        ppo.train(None, resume=run_dir)
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    assert len(ppo.evaluate(run_dir, episodes=1, env=CartPoleEnv)) == 1  # passed by the caller: trusted
    with pytest.raises(ValueError, match="was trained on 'gymnasium.envs.*CartPoleEnv', not 'cartpole'"):
        ppo.evaluate(run_dir, episodes=1, env="cartpole")
    with pytest.raises(ValueError, match="the checkpoint names the env 3, which is not one"):
        ppo.evaluate(crafted(tmp_path / "int", cartpole_run, 3), episodes=1)
