"""Data-parallel PPO under torchrun on this machine's CPU (gloo): 2 ranks train one model
(identical parameters and normalization statistics after every update), rank 0 alone
writes and evaluates, resume needs the same world size, and a rank that raises ends the job."""

import os
import subprocess
import sys
import time

import pytest

from puffercore import checkpoint, logger, ppo, run
from puffercore.ppo.evaluation import BEST_NAME

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts", "distributed_ppo.py")


def torchrun(*args, ranks=2, timeout=120):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}", SCRIPT,
               *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def digests(out, rank):
    with open(out / f"rank{rank}.txt") as file:
        return [line.split() for line in file]


def test_two_ranks_train_one_model_and_resume(tmp_path):
    out, run_dir = tmp_path / "out", tmp_path / "run"
    out.mkdir()
    result = torchrun(out, run_dir, "--eval-interval", 2)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "rank 0 world 2 update 4 step 1024" in result.stdout  # total_timesteps counts both ranks
    first = digests(out, 0)
    assert [update for update, _ in first] == ["1", "2", "3", "4"]
    assert first == digests(out, 1)  # same parameters and statistics after every update
    rows = logger.read_csv(run_dir / "metrics.csv")
    steps = [row["step"] for row in rows]
    assert steps == sorted(set(steps)) and steps[-1] == 1024  # one writer
    assert [row["update"] for row in rows if "eval/mean_return" in row] == [2, 4]  # rank 0's evaluations
    assert os.path.isfile(run_dir / BEST_NAME)
    saved = checkpoint.load(run_dir / run.CHECKPOINT_NAME)
    assert saved["world_size"] == 2 and saved["counters"]["update"] == 4

    result = torchrun(out, run_dir, "--resume", "--updates", 6)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "rank 1 world 2 update 6 step 1536" in result.stdout
    assert digests(out, 0)[4:] == digests(out, 1)[4:] and len(digests(out, 0)) == 6

    with pytest.raises(ValueError, match="trained on 2 rank\\(s\\); resume it with the same number"):
        ppo.train({"total_timesteps": 4096}, resume=str(run_dir))


def test_two_ranks_train_a_policy_of_ones_own_and_resume(tmp_path):
    out, run_dir = tmp_path / "out", tmp_path / "run"
    out.mkdir()
    result = torchrun(out, run_dir, "--custom-policy", "--updates", 2)
    assert result.returncode == 0, result.stderr[-3000:]
    assert digests(out, 0) == digests(out, 1) and len(digests(out, 0)) == 2
    saved = checkpoint.load(run_dir / run.CHECKPOINT_NAME)
    assert any(name.startswith("body.") for name in saved["model"])
    assert saved["policy"]["name"] is None  # a class of a __main__ script: passed again to resume
    result = torchrun(out, run_dir, "--custom-policy", "--resume", "--updates", 3)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "rank 1 world 2 update 3" in result.stdout and digests(out, 0) == digests(out, 1)
    result = torchrun(out, run_dir, "--resume", "--updates", 4)  # without it: refused, on every rank
    assert result.returncode != 0 and "has no importable name (a lambda or a partial); pass it again" in result.stderr


def test_a_rank_that_raises_ends_the_job(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    start = time.perf_counter()
    result = torchrun(out, tmp_path / "run", "--fail-at", 2, "--updates", 50)
    assert result.returncode != 0
    assert "rank 1 fails on purpose" in result.stderr
    assert time.perf_counter() - start < 60  # torchrun stops rank 0 instead of leaving it waiting
    assert len(digests(out, 0)) < 50


def test_alphazero_self_plays_on_every_rank_and_trains_one_network(tmp_path):
    out, run_dir = tmp_path / "out", tmp_path / "run"
    out.mkdir()
    script = os.path.join(os.path.dirname(SCRIPT), "distributed_alphazero.py")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", script,
               str(out), str(run_dir)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [(out / f"rank{rank}.txt").read_text().split() for rank in (0, 1)]
    assert ranks[0] == ranks[1]  # one network
    assert ranks[0][0] == "16"  # 2 iterations x 4 games x 2 ranks
    saved = checkpoint.load(run_dir / run.CHECKPOINT_NAME)
    assert saved["counters"]["games"] == 16 and "eval/random_win" in logger.read_csv(run_dir / "metrics.csv")[-1]
