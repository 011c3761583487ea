"""AlphaZero's device setting (`device`, puffercore.alphazero.device): the plumbing on the
CPU, and on a CUDA device (`gpu`-marked) one Connect4 iteration and the evaluations
against the CPU's."""

import os
import shutil
import threading

import numpy as np
import pytest
import torch

from puffercore import checkpoint, info
from puffercore.__main__ import main
from puffercore.alphazero import self_play
from puffercore.alphazero.config import GAMES, PRESETS, AlphaZeroConfig, cuda_settings
from puffercore.alphazero.device import DeviceEvaluator
from puffercore.alphazero.evaluation import AlphaZeroAgent
from puffercore.alphazero.network import PriorsAndValues, build_network, make_evaluator
from puffercore.alphazero.trainer import Trainer, train
from puffercore.frozen_copy import FrozenCopy
from puffercore.precision import resolve_precision

NO_CUDA = not torch.cuda.is_available()


def tiny_config(game="tictactoe", **overrides) -> AlphaZeroConfig:
    settings = dict(channels=8, blocks=1, games_per_iteration=6, parallel_games=4, simulations=8, batch_size=16,
                    train_steps=3, eval_interval=0, replay_capacity=500, torch_threads=1, iterations=1)
    return AlphaZeroConfig.for_game(game, **{**settings, **overrides})


def positions(game_name: str, count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Observations and legal masks of `count` positions from random play."""
    game = GAMES[game_name]()
    rng = np.random.default_rng(seed)
    observations, masks = [], []
    while len(observations) < count:
        state = game.new_state(seed=int(rng.integers(2**31)))
        while not state.is_terminal() and len(observations) < count:
            observations.append(state.observation())
            masks.append(state.legal_mask())
            legal = state.legal_actions()
            state.apply(legal[int(rng.integers(len(legal)))])
    return np.stack(observations).astype(np.float32), np.stack(masks)


def trained_network(config: AlphaZeroConfig):
    """A network whose batch norms hold statistics of their own (folding them matters)."""
    torch.manual_seed(0)
    network = build_network(config)
    with torch.no_grad():
        for module in network.modules():
            if isinstance(module, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.uniform_(0.5, 1.5)
    return network.eval()


# --- settings -----------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "CUDA", "cuda:", "mps", ""])
def test_an_unknown_device_is_refused_in_one_line(device):
    with pytest.raises(ValueError, match=r"device must be 'cpu', 'cuda' or 'cuda:N', got"):
        tiny_config(device=device)


def test_cuda_settings_scale_the_preset_and_flags_override_them():
    cpu = AlphaZeroConfig.for_game("connect4")
    assert AlphaZeroConfig.for_game("connect4", device="cpu") == cpu  # the CPU default is the preset
    assert all(getattr(cpu, name) == value for name, value in PRESETS["connect4"].items())
    cuda = AlphaZeroConfig.for_game("connect4", device="cuda:1")  # valid anywhere: the trainer checks the machine
    settings = cuda_settings("connect4")
    assert settings and all(getattr(cuda, name) == value for name, value in settings.items())
    assert cuda.games_per_iteration // cpu.games_per_iteration == cuda.train_steps // cpu.train_steps > 1
    assert cuda.parallel_games // cuda.self_play_threads == cpu.parallel_games // cpu.self_play_threads
    assert AlphaZeroConfig.for_game("connect4", device="cuda", self_play_threads=3).self_play_threads == 3
    assert cuda_settings("azul") == {}


def test_auto_precision_on_cuda_is_bfloat16_and_info_says_so():
    for convolutional in (True, False):
        assert resolve_precision("auto", "cuda", convolutional=convolutional) == torch.bfloat16
    assert resolve_precision("float32", "cuda", convolutional=True) == torch.float32
    on_cuda = info.preset_choices()["alphazero"]["connect4"]["cuda"]
    assert on_cuda == {"inference_precision": "bfloat16", "train_precision": "bfloat16",
                       "self_play_threads": cuda_settings("connect4")["self_play_threads"]}


@pytest.mark.skipif(not NO_CUDA, reason="checks the machine without CUDA")
def test_cuda_without_a_device_is_one_line_from_the_trainer_and_the_cli(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"^device='cuda', but CUDA is not available here .*use --device cpu$"):
        Trainer(tiny_config(device="cuda"))
    with pytest.raises(SystemExit):
        main(["alphazero", "tictactoe", "--device", "cuda", "--run-dir", str(tmp_path / "run")])
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("puffercore alphazero: error: device='cuda', but CUDA is not "
                                                     "available here")
    assert not os.path.exists(tmp_path / "run")


# --- the device evaluator, run on the CPU -------------------------------------------------


def test_device_evaluator_on_cpu_gives_the_cpu_evaluators_answers_in_every_bucket():
    config = tiny_config("connect4", channels=16, blocks=2)
    network = trained_network(config)
    observations, masks = positions("connect4", 40)
    expected = make_evaluator(network, "float32", trace=False)(observations, masks)
    model = FrozenCopy(PriorsAndValues(network), "float32", trace=False)
    evaluator = DeviceEvaluator(model, network.observation_shape, network.num_actions, lanes=1, max_rows=16)
    assert evaluator.mode == "eager"  # no graphs on the CPU
    for start, rows in ((0, 16), (16, 1), (17, 5), (22, 16), (0, 40)):  # buckets 16, 2, 8, 16; 40 > max_rows: 64
        priors, values = evaluator(observations[start:start + rows], masks[start:start + rows])
        assert priors.shape == (rows, network.num_actions) and values.shape == (rows, 2)
        np.testing.assert_allclose(priors, expected[0][start:start + rows], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(values, expected[1][start:start + rows], rtol=1e-5, atol=1e-6)
    lane = evaluator._local.lane
    assert sorted(lane.buckets) == [2, 4, 8, 16, 64]
    first, _ = evaluator(observations[:3], masks[:3])
    again, _ = evaluator(observations[3:6], masks[3:6])
    assert not np.shares_memory(first, again)  # answers outlive the next call (a cache keeps them)


def test_each_thread_takes_a_lane_of_its_own():
    config = tiny_config()
    network = trained_network(config)
    observations, masks = positions("tictactoe", 8)
    model = FrozenCopy(PriorsAndValues(network), "float32", trace=False)
    evaluator = DeviceEvaluator(model, network.observation_shape, network.num_actions, lanes=3, max_rows=8)
    prepared = list(evaluator._free)
    taken, answers = [], []
    barrier = threading.Barrier(3)

    def evaluate():
        barrier.wait()  # all three at once
        answers.append(evaluator(observations, masks))
        taken.append(evaluator._local.lane)

    threads = [threading.Thread(target=evaluate) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(map(id, taken)) == sorted(map(id, prepared)) and not evaluator._free
    for priors, values in answers[1:]:
        np.testing.assert_array_equal(priors, answers[0][0])
        np.testing.assert_array_equal(values, answers[0][1])


def test_threaded_self_play_through_the_device_path_on_cpu(monkeypatch):
    """play_iteration's device path (one lane per thread, batches of its slots) run with
    the CPU: legal games, every prepared lane taken, searches like the CPU evaluator's."""
    config = tiny_config(self_play_threads=2, games_per_iteration=6, parallel_games=4, inference_precision="float32",
                         evaluation_cache=0)
    made = []

    def device_evaluator(network, precision, trace, lanes, max_rows):
        model = FrozenCopy(PriorsAndValues(network), precision, trace=False)
        made.append(DeviceEvaluator(model, network.observation_shape, network.num_actions, lanes, max_rows))
        return made[-1]

    reference = Trainer(config)
    reference.self_play()
    monkeypatch.setattr(self_play, "make_evaluator", device_evaluator)
    trainer = Trainer(config)
    stats = trainer.self_play()
    assert stats["self_play/games"] == 6 and len(made) == 1 and not made[0]._free
    assert len(trainer.replay) == len(reference.replay)
    count = len(trainer.replay)
    np.testing.assert_array_equal(trainer.replay.observations[:count], reference.replay.observations[:count])
    np.testing.assert_allclose(trainer.replay.policies[:count], reference.replay.policies[:count], atol=1e-6)


# --- checkpoints of device runs ------------------------------------------------------------


def test_a_checkpoint_of_a_cuda_run_loads_and_resumes_on_a_cpu_only_machine(tmp_path, monkeypatch, capsys):
    """A cuda run's checkpoint holds CUDA tensors and device 'cuda': an agent loads it on
    the CPU, and the run resumes there with --device cpu (without it: one line)."""
    run_dir = str(tmp_path / "run")
    trainer = Trainer(tiny_config(run_dir=run_dir), run_dir)
    trainer.iterate()
    trainer.config.device = "cuda"  # as a cuda run's config says
    real_tag = torch.serialization.location_tag
    monkeypatch.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")  # its tensors' storage
    trainer.save()
    monkeypatch.setattr(torch.serialization, "location_tag", real_tag)
    path = trainer.checkpoint_path
    if NO_CUDA:
        with pytest.raises(RuntimeError, match="CUDA"):
            torch.load(path, weights_only=True)  # what loading without map_location would meet
    state = checkpoint.load(path)
    assert state["network"] and all(tensor.device.type == "cpu" for tensor in state["network"].values())
    agent = AlphaZeroAgent.load(run_dir)
    assert next(agent.network.parameters()).device.type == "cpu"
    assert agent.act(agent.game.new_state(), simulations=4) in range(agent.game.num_actions)
    if NO_CUDA:
        with pytest.raises(ValueError, match="CUDA is not available"):
            Trainer.resume(run_dir)
    copy = str(tmp_path / "copy")
    shutil.copytree(run_dir, copy)
    resumed = train(resume=run_dir, quiet=True, budget={"device": "cpu", "iterations": 2})
    assert resumed.counters["iteration"] == 2 and resumed.config.device == "cpu"
    main(["alphazero", "--resume", copy, "--device", "cpu", "--iterations", "2"])
    assert "checkpoint:" in capsys.readouterr().out


# --- on a CUDA device ----------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(NO_CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("precision, tolerance", [("float32", 5e-3), ("auto", 5e-2)])  # auto: bfloat16
def test_cuda_evaluations_match_the_cpus(precision, tolerance):
    config = AlphaZeroConfig.for_game("connect4")
    network = trained_network(config)
    observations, masks = positions("connect4", 300, seed=1)
    expected = make_evaluator(network, "float32", trace=False)(observations, masks)
    evaluator = make_evaluator(network.to("cuda"), precision, lanes=1, max_rows=128)
    assert isinstance(evaluator, DeviceEvaluator) and evaluator.model.dtype == resolve_precision(
        precision, "cuda", convolutional=True)
    for start, rows in ((0, 128), (128, 37), (165, 1), (166, 128)):
        priors, values = evaluator(observations[start:start + rows], masks[start:start + rows])
        np.testing.assert_allclose(priors, expected[0][start:start + rows], atol=tolerance)
        np.testing.assert_allclose(values, expected[1][start:start + rows], atol=tolerance)
        assert (priors[~masks[start:start + rows]] == 0).all()
    assert evaluator.mode == "graphed"
    assert all(bucket.graph is not None for bucket in evaluator._local.lane.buckets.values())


@pytest.mark.gpu
@pytest.mark.skipif(NO_CUDA, reason="needs a CUDA device")
def test_one_connect4_iteration_on_cuda_trains_evaluates_and_saves_for_the_cpu(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    config = AlphaZeroConfig.for_game("connect4", device="cuda", games_per_iteration=32, parallel_games=32,
                                      self_play_threads=2, simulations=16, train_steps=20, batch_size=64,
                                      iterations=1, minutes=0, eval_interval=1, eval_games=2, eval_simulations=8,
                                      baseline_simulations=20, run_dir=run_dir)
    trainer = train(config)
    out, err = capsys.readouterr()
    assert "device cuda" in out and "connect4's cuda settings" in out
    assert "capture" not in err  # no eager fallback
    assert next(trainer.network.parameters()).device.type == "cuda"
    assert trainer.counters["games"] == 32 and len(trainer.replay) == trainer.counters["positions"] > 0
    state = checkpoint.load(trainer.checkpoint_path)  # map_location cpu: a CPU-only machine reads it
    assert all(tensor.device.type == "cpu" for tensor in state["network"].values())
    agent = AlphaZeroAgent.load(run_dir)
    assert next(agent.network.parameters()).device.type == "cpu"
    agent.act(agent.game.new_state(), simulations=8)
    resumed = train(resume=run_dir, quiet=True, budget={"iterations": 2})
    assert resumed.counters["iteration"] == 2 and next(resumed.network.parameters()).device.type == "cuda"
