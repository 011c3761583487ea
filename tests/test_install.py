"""The native build reuses its build directory across installs: no compile or Cython
step names a path inside a Python environment (pip's isolated build env is a new one at
each install, and a step whose command changes runs again)."""

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_files() -> list[str]:
    return sorted(glob.glob(os.path.join(ROOT, "build", "*", "build.ninja")))


@pytest.mark.skipif(not build_files(), reason="no CMake build directory under build/ (not a source install)")
def test_no_build_step_names_a_python_environments_packages():
    with open(build_files()[0]) as file:
        text = file.read()
    edges = re.split(r"\n(?=build )", text)
    cython = [edge for edge in edges if "-m cython" in edge]
    compiles = [edge for edge in edges if re.match(r"build \S+\.o: C(XX)?_COMPILER", edge)]
    assert len(cython) >= 10 and len(compiles) >= 10
    for edge in cython + compiles:
        steps = "\n".join(line for line in edge.splitlines() if line.strip().startswith(("COMMAND", "INCLUDES")))
        assert "site-packages" not in steps and "cmake_transform_depfile" not in steps, edge[:300]
    assert re.search(r"^  INCLUDES = .*numpy-include", text, re.MULTILINE)
