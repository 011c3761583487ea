"""The package as installed: headers, lazy parts, seeds."""

import os
import subprocess
import sys

import pytest

import puffercore


def test_headers_ship_with_the_package():
    include = puffercore.get_include()
    assert os.path.isfile(os.path.join(include, "puffercore", "env.h"))


def test_named_seeds_refuse_duplicate_names():
    from puffercore.seeding import named_seeds

    with pytest.raises(ValueError, match=r"seed names must be distinct, got \['envs'\]"):
        named_seeds(0, ("envs", "torch", "envs"))


@pytest.mark.parametrize("module", ["puffercore.games", "puffercore.advantage", "puffercore.seeding"])
def test_importing_one_part_does_not_import_the_rest(module):
    """`import puffercore.games` (or the advantage kernels) loads neither gymnasium nor
    the vector backends nor torch: a fresh interpreter lists what got imported."""
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] in " \
           f"('gymnasium', 'torch') or m.startswith('puffercore.vector')))"
    output = subprocess.run([sys.executable, "-P", "-c", code], check=True, capture_output=True, text=True).stdout
    assert output.strip() == "[]", output


def test_numba_loads_only_with_numba_env():
    """numba (slow to import, an optional extra) stays out of `import puffercore` and the
    parts every run uses; puffercore.numba_env brings it in."""
    code = "import sys, puffercore, puffercore.ocean, puffercore.vector, puffercore.env_sources; print('numba' in sys.modules)"
    output = subprocess.run([sys.executable, "-P", "-c", code], check=True, capture_output=True, text=True).stdout
    assert output.strip() == "False"


def test_the_bench_suites_run_as_pytest_runs_them(tmp_path):
    """`pytest bench/` with the checkout off sys.path (a non-editable install, as CI's):
    every suite collects (bench_numba imports its sibling compare_throughput), and the
    processes case's workers can unpickle its creator (they cannot import `bench`, the
    name pytest gives the folder)."""
    pytest.importorskip("pytest_benchmark")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import os, sys; sys.path[:] = [p for p in sys.path if os.path.abspath(p or '.') != sys.argv[1]]; "
            "import pytest; sys.exit(pytest.main([os.path.join(sys.argv[1], 'bench'), '-q', '--benchmark-disable', "
            "'-k', 'test_gymnasium_cartpole_128 and processes']))")
    done = subprocess.run([sys.executable, "-P", "-c", code, repo], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-3000:]
