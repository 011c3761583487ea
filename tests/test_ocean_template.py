"""A user's env outside the source tree: copy ocean/template, build it against the
installed puffercore with puffercore.build.build_env, and step it."""

import os
import shutil

import numpy as np
import pytest

import puffercore.vector
from puffercore.build import build_env
from puffercore.env import GymnasiumView, PufferEnv

TEMPLATE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ocean", "template")

pytest.importorskip("Cython")
pytest.importorskip("setuptools")


def test_template_builds_outside_the_tree_and_steps(tmp_path):
    source = tmp_path / "my_env"
    shutil.copytree(TEMPLATE, source)
    module = build_env(source / "template.pyx", output_dir=tmp_path / "out")
    assert os.path.dirname(module.__file__) == str(tmp_path / "out")

    env = module.Template(num_envs=8, seed=0, length=4)
    assert isinstance(env, PufferEnv)
    obs, _ = env.reset()
    # start left of the exit: position / (length - 1) in {0, 1/3, 2/3}
    assert set(np.round(obs[:, 0] * 3).astype(int)) <= {0, 1, 2}
    reached = np.zeros(8, bool)
    for _ in range(3):
        obs, rew, term, trunc, info = env.step(np.ones(8, np.int32))
        reached |= term
        assert info.get("episodes", 0.0) == term.sum()
        np.testing.assert_array_equal(rew, term.astype(np.float32))
    assert reached.all(), "walking right reaches the exit within 3 steps from any start"
    with pytest.raises(ValueError, match="out of range"):
        env.step(np.full(8, 2, np.int32))
    with pytest.raises(TypeError):
        module.Template(num_envs=1, width=3)

    vector = puffercore.vector.make(module.Template, 4, backend="serial", seed=0, length=4)
    obs, _ = vector.reset()
    for _ in range(3):
        obs, rew, term, trunc, info = vector.step(np.ones(4, np.int32))
    assert obs.shape == (4, 1) and vector.num_envs == 4
    vector.close()

    from gymnasium.utils.env_checker import check_env

    check_env(GymnasiumView(module.Template(num_envs=1, render_mode="ansi")), skip_render_check=False)


def test_build_env_rejects_a_missing_pyx(tmp_path):
    with pytest.raises(ValueError, match="pyx_path"):
        build_env(tmp_path / "missing.pyx")
