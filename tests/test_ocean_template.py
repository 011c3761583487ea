"""A user's env outside the source tree: copy ocean/template, build it against the
installed puffercore with puffercore.build.build_env, and step it."""

import os
import re
import shutil
import subprocess
import sys

import gymnasium
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
    # the spaces template.h's spec declares
    assert env.single_observation_space == gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32)
    assert env.single_action_space == gymnasium.spaces.Discrete(2)
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

    # The picture comes from the struct, not the observation row, which Normalize rewrites in place.
    env = module.Template(num_envs=1, seed=0, render_mode="ansi", length=8)
    obs, _ = env.reset()
    position = int(round(obs[0, 0] * 7))
    env.observations[0, 0] = 0.0 if position else 1.0
    assert env.render() == "." * position + "A" + "." * (6 - position) + "|\n"


def test_build_env_rejects_a_missing_pyx(tmp_path):
    with pytest.raises(ValueError, match="pyx_path"):
        build_env(tmp_path / "missing.pyx")


def test_new_env_builds_and_trains_from_python_and_the_cli(tmp_path, monkeypatch, capsys):
    """`puffercore new-env maze` writes a folder that builds as it is; the built class
    trains with PPO from Python and, named module:attribute, from the command line, and
    the checkpoint evaluates with no env argument."""
    from puffercore import ppo
    from puffercore.__main__ import main

    main(["new-env", "maze", "--dir", str(tmp_path)])
    assert "puffercore train maze:Maze" in capsys.readouterr().out
    assert sorted(os.listdir(tmp_path / "maze")) == ["maze.h", "maze.pyx"]
    module = build_env(tmp_path / "maze" / "maze.pyx")
    monkeypatch.syspath_prepend(str(tmp_path / "maze"))

    config = ppo.PPOConfig(num_envs=16, horizon=16, minibatch_size=64, total_timesteps=16 * 16 * 20,
                           learning_rate=3e-3, quiet=True, tensorboard=False, run_dir=str(tmp_path / "python"))
    trainer = ppo.train(config, module.Maze)  # native: the threads backend
    assert trainer.env_spec == "maze:Maze" and trainer.vec is not None
    assert ppo.evaluate(str(tmp_path / "python"), episodes=5, env=module.Maze) == [1.0] * 5  # walks right to the exit

    main(["train", "maze:Maze", "--total-timesteps", "512", "--vec.num-envs", "8", "--train.horizon", "16",
          "--train.minibatch-size", "64", "--quiet", "--tensorboard", "false", "--run-dir", str(tmp_path / "cli")])
    main(["eval", "maze:Maze", "--checkpoint", str(tmp_path / "cli"), "--episodes", "2", "--render",
          "--render-steps", "2"])
    out = capsys.readouterr().out
    assert "2 episodes, mean return" in out
    assert re.search(r"^\.*A\.*\|\nreward=", out, re.MULTILINE), out  # the env's own ANSI picture, with the reward
    with pytest.raises(SystemExit):
        main(["new-env", "maze", "--dir", str(tmp_path)])
    assert "already exists" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["new-env", "Bad-Name"])
    assert "name must be a lowercase identifier" in capsys.readouterr().err


def run_printed_commands(folder, new_env_arguments, short_training):
    """Run `puffercore new-env ...` in `folder`, then every command it printed, as
    written, in a shell with this environment's executables first on PATH (the train
    command with `short_training` flags appended). Returns the printed commands."""
    environment = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}

    def shell(command):
        done = subprocess.run(["bash", "-c", command], cwd=folder, env=environment, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    printed = shell(f"puffercore new-env {new_env_arguments}")
    commands = dict(line.split(":  ", 1) for line in printed.splitlines() if ":  " in line)
    if "build" in commands:
        shell(commands["build"])
    assert "done: 512 steps" in shell(f"{commands['train']} {short_training}")
    return commands


SHORT_TRAINING = ("--total-timesteps 512 --vec.num-envs 8 --train.horizon 16 --train.minibatch-size 64 --quiet "
                  "--tensorboard false --run-dir run")


def test_the_commands_new_env_prints_work_as_written(tmp_path):
    """The README's layout: the build command from the parent folder (where the folder
    maze/ is no module the build would shadow), then `cd maze && puffercore train
    maze:Maze` through the console script, which imports from the working directory."""
    commands = run_printed_commands(tmp_path, "maze", SHORT_TRAINING)
    assert commands["train"] == "cd ./maze && puffercore train maze:Maze"
    assert os.path.isfile(tmp_path / "maze" / "run" / "checkpoint.pt")


def test_the_commands_new_env_numba_prints_work_as_written(tmp_path):
    pytest.importorskip("numba")
    commands = run_printed_commands(tmp_path, "corridor --numba", SHORT_TRAINING)
    assert commands["train"] == "cd ./corridor && puffercore train corridor:Corridor"


def test_build_env_refuses_a_folder_of_the_modules_name_that_is_not_its_own(tmp_path, monkeypatch):
    """A namespace package (a folder without __init__.py) elsewhere is still a module the
    build would shadow, and the message says it is a folder."""
    (tmp_path / "walled_garden").mkdir()
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "walled_garden.pyx").write_text("# never compiled\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    folder = re.escape(str(tmp_path / "walled_garden"))
    with pytest.raises(ValueError, match=rf"module name 'walled_garden' .*\(the folder {folder}\); building it would"):
        build_env(other / "walled_garden.pyx")


@pytest.mark.parametrize("name", ["json", "numpy", "sys"])
def test_build_env_refuses_a_name_that_shadows_a_module(tmp_path, name):
    pyx = tmp_path / f"{name}.pyx"
    pyx.write_text("# never compiled\n")
    with pytest.raises(ValueError, match=f"module name '{name}' .* would shadow that module"):
        build_env(pyx)
    import importlib

    assert importlib.import_module(name).__name__ == name  # untouched
