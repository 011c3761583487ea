"""What a run prints: the console view on a terminal, one line per log interval when
piped, and numbers formatted for people."""

import csv
import io
import subprocess
import sys

from puffercore.logger import console_line, console_print, counted, format_number


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_numbers_read_as_what_they_are():
    assert format_number(-0.01) == "-0.0100"
    assert format_number(-0.0) == "0"
    assert format_number(0.0004) == "4.000e-04"
    assert format_number(1234567.0) == "1,234,567"
    assert format_number(21.5) == "21.5000"
    assert (counted(1, "episode"), counted(3, "episode"), counted(0, "seed")) == ("1 episode", "3 episodes", "0 seeds")


def test_piped_output_gets_one_line_a_terminal_the_redrawn_block():
    scalars = {"episode_return": 21.5, "episodes": 1.0, "loss/policy": -0.01}
    piped, terminal = io.StringIO(), Terminal()
    console_print("puffercore PPO | cartpole | step 2,048/10,000", scalars, 0.2048, stream=piped)
    console_print("puffercore PPO | cartpole | step 2,048/10,000", scalars, 0.2048, stream=terminal)
    assert piped.getvalue() == ("puffercore PPO | cartpole | step 2,048/10,000 | 20.5% | "
                                "episode_return=21.5000 episodes=1 loss/policy=-0.0100\n")
    assert piped.getvalue().rstrip("\n") == console_line("puffercore PPO | cartpole | step 2,048/10,000", scalars,
                                                         0.2048)
    block = terminal.getvalue()
    assert block.startswith("\x1b[2J\x1b[H") and block.count("\n") > 2 and "[######" in block


def test_training_through_a_pipe_prints_one_line_per_metrics_row(tmp_path):
    run_dir = tmp_path / "run"
    result = subprocess.run([sys.executable, "-P", "-m", "puffercore", "train", "cartpole", "--total-timesteps", "20000",
                             "--run-dir", str(run_dir)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "[###" not in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith("puffercore PPO | cartpole | step ")]
    with open(run_dir / "metrics.csv", newline="") as file:
        assert len(rows) == len(list(csv.DictReader(file))) >= 1
    assert all(" episode_return=" in row and row.count("\n") == 0 for row in rows[-1:]), result.stdout
