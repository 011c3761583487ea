"""The C envs under AddressSanitizer and UBSan: a driver steps each header directly."""

import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV_DIRS = ["cartpole", "squared", "snake", "template", "connect4", "azul", "busy"]


def test_envs_step_cleanly_under_address_sanitizer(tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler")
    driver = tmp_path / "asan_envs"
    includes = [f"-I{os.path.join(ROOT, 'native', 'include')}"]
    includes += [f"-I{os.path.join(ROOT, 'ocean', name)}" for name in ENV_DIRS]
    build = subprocess.run(
        [compiler, "-std=c11", "-g", "-O1", "-Wall", "-Werror", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", *includes,
         os.path.join(ROOT, "tests", "asan_envs.c"), "-o", str(driver), "-lm"],
        capture_output=True, text=True,
    )
    if build.returncode != 0 and "sanitize" in build.stderr:
        pytest.skip(f"compiler lacks AddressSanitizer: {build.stderr[-300:]}")
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(driver)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    for name in ["CartPole", "Squared", "Template", "Busy", "Snake", "Connect4", "Azul"]:
        assert f"{name}: " in run.stdout
