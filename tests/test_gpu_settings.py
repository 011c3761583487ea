"""Settings made for a GPU (config.GPU_PRESETS, ppo.gpu_settings): `--device cuda` trains an
ocean env's GPU preset under the user's own settings, --print-config shows it, the start
of a run says what was chosen, and a run too small for a GPU says the CPU is likely
faster. The device is faked on this CPU; the `gpu` test trains on cuda."""

import json
import os
import subprocess
import sys

import pytest
import torch

from puffercore.__main__ import main
from puffercore.ppo import PPOConfig
from puffercore.ppo.config import GPU_PRESETS
from puffercore.ppo.gpu_settings import GPU_MIN_WORK, settings_note

CARTPOLE_PARAMETERS = 2434  # the default MLP, 32 wide, on CartPole: actor and critic


@pytest.mark.parametrize("env", sorted(GPU_PRESETS))
def test_cuda_takes_the_gpu_preset_and_the_cpu_keeps_its_own(env):
    cpu = PPOConfig.for_env(env)
    for device in ("cuda", "cuda:1"):
        config = PPOConfig.for_env(env, device=device)
        assert {name: getattr(config, name) for name in GPU_PRESETS[env]} == GPU_PRESETS[env]
        assert config.num_envs >= 8 * cpu.num_envs and config.minibatch_size >= 4 * cpu.minibatch_size
        assert config.backend == "threads" and config.learning_rate == cpu.learning_rate
    assert PPOConfig.for_env(env, device="cpu") == PPOConfig.for_env(env) == cpu
    assert cpu.num_envs <= 512


def test_the_users_settings_win_over_the_gpu_preset():
    config = PPOConfig.for_env("cartpole", device="cuda", num_envs=256, total_timesteps=1000)
    assert (config.num_envs, config.total_timesteps, config.minibatch_size) == (256, 1000, 32768)
    assert PPOConfig.for_env("connect4", device="cuda") == PPOConfig.for_env("connect4", device="cuda", seed=1)
    assert PPOConfig.for_env("connect4", device="cuda").num_envs == PPOConfig.for_env("connect4").num_envs
    assert PPOConfig.for_env("cartpole", device="not a device").num_envs == 128  # validate() reports it


def test_the_start_of_a_cuda_run_says_what_was_chosen():
    config = PPOConfig.for_env("cartpole", device="cuda")
    lines = settings_note("cartpole", config, CARTPOLE_PARAMETERS, workers=16)
    assert len(lines) == 1, lines  # 4096 envs: enough work, no CPU note
    assert lines[0].startswith("settings for cuda: cartpole's GPU preset: total_timesteps 5,000,000 (CPU preset "
                               "500,000), vec.backend threads (CPU preset serial), vec.num_envs 4,096 (CPU preset 128)")
    assert lines[0].endswith("; 4096 envs, threads backend, 16 worker(s)")
    assert settings_note("cartpole", PPOConfig.for_env("cartpole"), CARTPOLE_PARAMETERS, None) == []  # the CPU: none


def test_a_run_too_small_for_a_gpu_says_the_cpu_is_faster():
    config = PPOConfig.for_env("cartpole", device="cuda", num_envs=128)
    first, note = settings_note("cartpole", config, CARTPOLE_PARAMETERS, workers=2)
    assert "; yours: vec.num_envs;" in first and "vec.num_envs 4,096" not in first
    assert note.startswith("note: the CPU is likely faster for this run: each step runs a 2,434-parameter net on "
                           "128 envs") and "--device cpu" in note and "12x slower" in note
    gym = PPOConfig.for_env("gymnasium:CartPole-v1", device="cuda")
    lines = settings_note("gymnasium:CartPole-v1", gym, 9000, workers=None)
    assert lines[0] == "settings for cuda: gymnasium:CartPole-v1 has no GPU preset; its settings are the CPU's"
    assert lines[1].startswith("note: the CPU is likely faster")
    big = settings_note("connect4", PPOConfig.for_env("connect4", device="cuda"), GPU_MIN_WORK // 256, workers=2)
    assert len(big) == 1 and "has no GPU preset" in big[0]  # 256 envs of a big net: worth the GPU


def test_print_config_shows_the_gpu_preset(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # validate() checks the device
    main(["train", "cartpole", "--device", "cuda", "--vec.num-workers", "2", "--print-config"])
    printed = json.loads(capsys.readouterr().out)
    assert printed["device"] == "cuda" and printed["vec"]["num_envs"] == 4096 and printed["vec"]["num_workers"] == 2
    assert printed["train"]["minibatch_size"] == 32768 and printed["total_timesteps"] == 5_000_000


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_train_cartpole_on_cuda_prints_its_gpu_settings_and_graphed_update(tmp_path):
    done = subprocess.run(
        [sys.executable, "-P", "-m", "puffercore", "train", "cartpole", "--device", "cuda",
         "--total-timesteps", str(4096 * 32 * 3), "--tensorboard", "false", "--run-dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "settings for cuda: cartpole's GPU preset: vec.backend threads (CPU preset serial), vec.num_envs 4,096" \
        in done.stdout, done.stdout[:3000]
    assert "; yours: total_timesteps;" in done.stdout and "the CPU is likely faster" not in done.stdout
    assert "gradients   graphed  (on cuda" in done.stdout, done.stdout[:3000]
    assert "capture of the PPO update failed" not in done.stderr, done.stderr[-2000:]
    with open(os.path.join(tmp_path, "run", "config.json")) as file:
        saved = json.load(file)
    assert saved["plan"]["gradients"]["name"] == "graphed" and saved["vec"]["num_envs"] == 4096
