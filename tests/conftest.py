"""Fixtures shared by the test files."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest


@pytest.fixture
def run_python():
    """`run_python(code, timeout=120)`: run a script in a fresh interpreter and return the
    CompletedProcess, so that a crash or hang fails the test rather than the suite (a
    hang past `timeout` seconds raises subprocess.TimeoutExpired)."""

    def run(code: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-P", "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout, **kwargs)

    return run


@pytest.fixture
def interrupt_command():
    """`interrupt_command(arguments, cwd, ready)`: start `puffercore ARGUMENTS` in a
    process group of its own, as a terminal does, wait until `ready()` (at most 240 s),
    then signal SIGINT to the whole group as Ctrl-C does (the command and its workers),
    or `number` to the command alone with `whole_group=False` (a scheduler's SIGTERM);
    returns the CompletedProcess once it ends (within 120 s, else it is killed)."""

    def interrupt(arguments: list[str], cwd, ready, number=signal.SIGINT,
                  whole_group=True) -> subprocess.CompletedProcess:
        process = subprocess.Popen([sys.executable, "-P", "-m", "puffercore", *arguments], cwd=cwd,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                   start_new_session=True)
        try:
            deadline = time.monotonic() + 240
            while not ready():
                assert time.monotonic() < deadline and process.poll() is None, process.communicate()
                time.sleep(0.2)
            time.sleep(1.0)  # into the loop
            (os.killpg if whole_group else os.kill)(process.pid, number)
            out, err = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)

    return interrupt
