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


PUBLIC_PACKAGES = ["puffercore", "puffercore.alphazero", "puffercore.numba_env", "puffercore.ocean", "puffercore.ppo",
                   "puffercore.vector"]


def test_every_public_name_resolves_and_star_imports_work():
    """Every `__all__` name of puffercore and of its public subpackages is there, and
    `from X import *` works, in a fresh interpreter (lazy names included)."""
    code = ("import importlib, sys\n"
            "for name in sys.argv[1:]:\n"
            "    module = importlib.import_module(name)\n"
            "    missing = [attribute for attribute in module.__all__ if not hasattr(module, attribute)]\n"
            "    assert not missing, (name, missing)\n"
            "    namespace = {}\n"
            "    exec(f'from {name} import *', namespace)\n"
            "    assert set(module.__all__) <= set(namespace), name\n"
            "print('ok')\n")
    packages = [name for name in PUBLIC_PACKAGES if name != "puffercore.numba_env" or _has("numba")]
    done = subprocess.run([sys.executable, "-P", "-c", code, *packages], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr[-3000:]
    assert "env_sources" in puffercore.__all__ and "envs" not in puffercore.__all__
    with pytest.raises(AttributeError, match="has no attribute 'envs'"):
        puffercore.envs


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_renamed_names_warn_once_and_give_the_new_objects():
    """The vector envs are Connect4Env and AzulEnv (the games keep Connect4 and Azul);
    InferenceCopy is FrozenCopy; the old names work for a release, warning once each."""
    code = ("import warnings\n"
            "warnings.simplefilter('always')\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    import puffercore.ocean as ocean, puffercore.inference as inference\n"
            "    from puffercore.frozen_copy import FrozenCopy\n"
            "    from puffercore.precision import PRECISIONS\n"
            "    same = [ocean.Connect4 is ocean.Connect4Env, ocean.Connect4 is ocean.Connect4Env,\n"
            "            ocean.Azul is ocean.AzulEnv, inference.InferenceCopy is FrozenCopy,\n"
            "            inference.PRECISIONS is PRECISIONS]\n"
            "print(same, sorted(str(w.message).split(' is renamed')[0] for w in caught\n"
            "                   if w.category is DeprecationWarning))\n")
    output = subprocess.run([sys.executable, "-P", "-c", code], check=True, capture_output=True, text=True).stdout
    assert output.strip() == ("[True, True, True, True, True] ['puffercore.inference.InferenceCopy', "
                              "'puffercore.inference.PRECISIONS', 'puffercore.ocean.Azul', 'puffercore.ocean.Connect4']")
    from puffercore import games, ocean

    assert games.Connect4.__name__ == "Connect4" and ocean.Connect4Env.__name__ == "Connect4Env"
    with pytest.raises(AttributeError, match="has no attribute 'Chess'"):
        ocean.Chess


def test_one_list_of_precisions():
    from puffercore.alphazero import config as alphazero_config
    from puffercore.ppo import plan
    from puffercore.precision import PRECISIONS

    assert plan.PRECISIONS is PRECISIONS and alphazero_config.PRECISIONS is PRECISIONS
