"""What a CleanRL or stable-baselines3 user meets around a training run (issue 30's
frictions): runs named after the env they trained, errors that say what to type, the
README's snippets running as written, Ctrl-C without tracebacks, help in Python."""

import os
import pydoc
import re

import numpy as np
import pytest
import torch

import puffercore.vector
from puffercore import ppo
from puffercore.__main__ import main
from puffercore.alphazero.config import AlphaZeroConfig
from puffercore.ocean import CartPole
from puffercore.ppo import PPOConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = dict(num_envs=8, horizon=16, minibatch_size=64, update_epochs=2, hidden_size=16,
             total_timesteps=8 * 16 * 2, quiet=True, tensorboard=False)


def test_a_run_on_a_vector_env_is_named_after_its_env_and_eval_says_how_to_pass_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    vec = puffercore.vector.make(CartPole, 8, backend="threads", seed=0)
    trainer = ppo.train(PPOConfig(**SMALL), vec)
    vec.close()
    assert os.path.basename(trainer.run_dir).startswith("cartpole-"), trainer.run_dir
    for call in (lambda: ppo.evaluate(trainer.run_dir, episodes=1), lambda: ppo.train(None, resume=trainer.run_dir)):
        with pytest.raises(ValueError) as error:
            call()
        for how in ("ppo.evaluate(RUN, env=MyEnv)", "puffercore eval my_module:MyEnv --checkpoint RUN",
                    "ppo.train(resume=RUN, env=MyEnv)", "puffercore train my_module:MyEnv --resume RUN"):
            assert how in str(error.value)
    assert len(ppo.evaluate(trainer.run_dir, episodes=1, env=CartPole)) == 1


def test_python_envs_in_a_vector_name_the_run_by_their_gymnasium_id(tmp_path, monkeypatch):
    import gymnasium

    monkeypatch.chdir(tmp_path)
    vec = puffercore.vector.make(lambda: gymnasium.make("CartPole-v1"), 8, backend="serial", seed=0)
    trainer = ppo.train(PPOConfig(**SMALL), vec)
    vec.close()
    assert os.path.basename(trainer.run_dir).startswith("CartPole-v1-"), trainer.run_dir


def test_eval_render_prints_the_envs_own_text_picture(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    ppo.train(PPOConfig.for_env("cartpole", **SMALL, run_dir=run_dir), "cartpole")
    main(["eval", "--checkpoint", run_dir, "--episodes", "1", "--render", "--render-steps", "3"])
    out = capsys.readouterr().out
    # CartPole's ansi render (its struct: x, x_dot, theta, theta_dot), then the step's reward
    frames = re.findall(r"x=\S+ x_dot=\S+ theta=\S+ theta_dot=\S+\nreward=1$", out, re.MULTILINE)
    assert len(frames) == 3, out
    pictures = []
    returns = ppo.evaluate(run_dir, episodes=1, on_render=pictures.append)
    assert len(pictures) == returns[0] and "theta_dot=" in pictures[0]  # one picture per step
    with pytest.raises(ValueError, match="give one"):
        ppo.evaluate(run_dir, episodes=1, on_render=print, video=str(tmp_path / "v.mp4"))


@pytest.mark.parametrize("name", ["cartpole", "snake", "squared", "memory", "connect4", "azul", "busy"])
def test_native_envs_draw_their_state_not_the_observation_row(name):
    """`eval --render` prints these pictures; a Normalize transform rewrites the
    observation row in place, which must not change them."""
    from puffercore import env_sources, ocean

    make = ocean.Busy if name == "busy" else env_sources.resolve(name).creator
    env = make(num_envs=2, seed=0, render_mode="ansi", **({"max_cost_us": 1.0} if name == "busy" else {}))
    env.reset(seed=3)
    tree = getattr(env, "observation_tree", None)
    for _ in range(2):
        if tree is not None and "action_mask" in getattr(tree.space, "spaces", {}):  # a legal move: the first in the mask
            env.step(tree.unflatten(env.observations)["action_mask"].argmax(axis=1))
        else:
            env.step(np.array([env.single_action_space.sample() for _ in range(env.num_agents)]))
    picture = env.render()
    env.observations[:] = 1 - env.observations  # what a transform could leave there
    assert env.render() == picture
    env.close()


def test_device_without_cuda_is_one_clear_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"device='cuda', but CUDA is not available here .*use --device cpu"):
        PPOConfig(device="cuda").validate()
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "cartpole", "--device", "cuda:0", "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 2 and "device='cuda:0', but CUDA is not available" in err
    monkeypatch.undo()
    if torch.cuda.is_available():  # a GPU machine: an index it does not have
        with pytest.raises(ValueError, match="CUDA device"):
            PPOConfig(device=f"cuda:{torch.cuda.device_count()}").validate()


def test_config_of_another_envs_run_is_refused_naming_both(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    ppo.train(PPOConfig.for_env("cartpole", **SMALL, run_dir=run_dir), "cartpole")
    config = os.path.join(run_dir, "config.json")
    with pytest.raises(SystemExit):
        main(["train", "snake", "--config", config])
    err = capsys.readouterr().err
    assert f"--config {config} is a config for env 'cartpole'" in err and "not 'snake'" in err
    assert not os.path.exists(tmp_path / "runs")
    # the same env, by another name, is no mismatch
    main(["train", "cartpole", "--config", config, "--run-dir", str(tmp_path / "again")])
    assert os.path.isfile(tmp_path / "again" / "checkpoint.pt")


@pytest.mark.parametrize("config_class", [PPOConfig, AlphaZeroConfig])
def test_config_fields_have_their_help_in_python(config_class):
    text = pydoc.plain(pydoc.render_doc(config_class))
    assert "learning_rate: float" in text
    if config_class is PPOConfig:
        assert "clip the value loss around the old values" in text  # clip_vloss's --help text
        assert "one of tanh, relu, gelu" in text


def test_ctrl_c_during_training_with_worker_processes_prints_no_traceback(tmp_path, interrupt_command):
    done = interrupt_command(["train", "CartPole-v1", "--vec.backend", "processes", "--vec.num-workers", "2", "--quiet",
                              "--tensorboard", "false", "--run-dir", "run"], tmp_path,
                             ready=lambda: os.path.isfile(tmp_path / "run" / "metrics.csv"))
    assert done.returncode == 130, done.stderr  # 128 + SIGINT: the shell's convention for a run a signal ended
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
    assert "interrupted by SIGINT:" in done.stdout and "checkpoint saved: puffercore train --resume run" in done.stdout


def test_ctrl_c_before_training_starts_is_one_line(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ppo, "train", interrupted)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "cartpole"])
    assert exit_info.value.code == 130
    assert capsys.readouterr().err.strip() == "puffercore train: interrupted"
