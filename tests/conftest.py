"""Fixtures shared by the test files."""

import subprocess
import sys
import textwrap

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
