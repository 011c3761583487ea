"""AlphaZero training (puffercore.alphazero.trainer, network, cli) on TicTacToe and Azul."""

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch

from puffercore import checkpoint, seeding
from puffercore.__main__ import main
from puffercore.alphazero.agents import GreedyAzulAgent, RandomAgent
from puffercore.alphazero.network import ILLEGAL_LOGIT, PolicyValueNet, build_network
from puffercore.alphazero.config import AlphaZeroConfig
from puffercore.alphazero.evaluation import AlphaZeroAgent, play_against
from puffercore.alphazero.network import CachedEvaluator, make_evaluator
from puffercore.alphazero.replay import ReplayBuffer, value_targets
from puffercore.alphazero.self_play import play_games
from puffercore.alphazero.trainer import SEED_NAMES, Trainer, train
from puffercore.env import derive_seed
from puffercore.precision import native_bf16
from puffercore.games import Azul, Connect4, TicTacToe


def tiny_config(**overrides) -> AlphaZeroConfig:
    settings = dict(channels=8, blocks=1, games_per_iteration=6, parallel_games=4, simulations=8, batch_size=16,
                    train_steps=3, eval_interval=0, replay_capacity=500, torch_threads=1, iterations=3)
    return AlphaZeroConfig.for_game("tictactoe", **{**settings, **overrides})


def parameters(network) -> list[torch.Tensor]:
    return [tensor.detach().clone() for tensor in network.state_dict().values()]


def assert_same_parameters(first, second):
    for a, b in zip(parameters(first), parameters(second), strict=True):
        assert torch.equal(a, b)


def play(actions):
    state = TicTacToe().new_state()
    for action in actions:
        state.apply(action)
    return state


# --- replay buffer and targets ------------------------------------------------------


def push(buffer, values):
    count = len(values)
    buffer.extend(np.zeros((count, 2)), np.ones((count, 3), dtype=bool), np.full((count, 3), 1 / 3),
                  [[value] for value in values])


def test_replay_ring_overwrites_oldest_first():
    buffer = ReplayBuffer(3, (2,), 3, 1)
    push(buffer, [0.0, 1.0])
    assert len(buffer) == 2 and buffer.write_index == 2
    push(buffer, [2.0])
    assert len(buffer) == 3 and buffer.write_index == 0
    push(buffer, [3.0, 4.0])  # 0 and 1 are the oldest: they go, in that order
    assert len(buffer) == 3 and buffer.write_index == 2
    assert buffer.values[:, 0].tolist() == [3.0, 4.0, 2.0]


def test_replay_sampling_stays_within_stored_examples():
    buffer = ReplayBuffer(10, (2,), 3, 1)
    with pytest.raises(ValueError, match="empty"):
        buffer.sample(np.random.default_rng(0), 4)
    push(buffer, [5.0, 6.0, 7.0])
    drawn = buffer.sample(np.random.default_rng(0), 1000)["values"][:, 0]
    assert set(drawn.tolist()) == {5.0, 6.0, 7.0}  # all three drawn, never an empty slot


def test_replay_sampling_sees_examples_through_the_game_symmetries():
    """Connect4's mirror: about half the drawn examples come back mirrored (board,
    legal mask and policy alike), the rest as stored; values never change."""
    game = Connect4()
    buffer = ReplayBuffer(10, game.observation_shape, game.num_actions, 2)
    state = game.new_state()
    for action in (0, 1, 0, 6):  # then column 6 fills: an asymmetric position, one illegal move
        state.apply(action)
    for _ in range(5):
        state.apply(6)
    policy = np.arange(1, 8, dtype=np.float32) / 28
    buffer.extend([state.observation()], [state.legal_mask()], [policy], [[0.5, -0.5]])
    batch = buffer.sample(np.random.default_rng(0), 400, game.symmetries)
    observation_map, action_map = game.symmetries[0]
    mirrored = np.all(batch["observations"].numpy().reshape(400, -1) == state.observation().ravel()[observation_map], axis=1)
    as_stored = np.all(batch["observations"].numpy() == state.observation(), axis=(1, 2, 3))
    assert (mirrored ^ as_stored).all() and 150 < mirrored.sum() < 250
    np.testing.assert_array_equal(batch["policies"][mirrored], np.tile(policy[action_map], (mirrored.sum(), 1)))
    np.testing.assert_array_equal(batch["legal_masks"][mirrored], np.tile(state.legal_mask()[action_map], (mirrored.sum(), 1)))
    np.testing.assert_array_equal(batch["policies"][as_stored], np.tile(policy, (as_stored.sum(), 1)))
    assert (batch["values"].numpy() == [0.5, -0.5]).all()
    assert (buffer.observations[0] == state.observation()).all()  # the stored example is untouched


def test_replay_capacity_must_be_positive():
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(0, (2,), 3, 1)


def test_batch_shapes():
    trainer = Trainer(tiny_config())
    trainer.self_play()
    batch = trainer.replay.sample(trainer.replay_rng, 16)
    assert batch["observations"].shape == (16, 2, 3, 3) and batch["observations"].dtype == torch.float32
    assert batch["legal_masks"].shape == (16, 9) and batch["legal_masks"].dtype == torch.bool
    assert batch["policies"].shape == (16, 9)
    assert batch["values"].shape == (16, 2)


def test_value_targets_are_in_observation_order():
    assert value_targets(np.array([1.0, -1.0]), 0).tolist() == [1.0, -1.0]
    assert value_targets(np.array([1.0, -1.0]), 1).tolist() == [-1.0, 1.0]
    # three players: the mover first, then the next in turn order, wrapping around
    assert value_targets(np.array([0.1, 0.2, 0.3]), 1).tolist() == pytest.approx([0.2, 0.3, 0.1])
    assert value_targets(np.array([0.1, 0.2, 0.3]), 2).tolist() == pytest.approx([0.3, 0.1, 0.2])


# --- self-play -----------------------------------------------------------------------


def test_self_play_examples_are_legal_and_targets_match_each_mover():
    trainer = Trainer(tiny_config(games_per_iteration=1, parallel_games=1))
    stats = trainer.self_play()
    replay = trainer.replay
    count = len(replay)
    assert count == trainer.counters["positions"] == stats["self_play/game_length"] >= 5
    policies, masks = replay.policies[:count], replay.legal_masks[:count]
    assert np.allclose(policies.sum(axis=1), 1.0)
    assert (policies[~masks] == 0).all()
    observations = replay.observations[:count]
    # TicTacToe observations are [own, opponent]: X (seat 0) moves when both counts match
    movers = (observations[:, 0].sum(axis=(1, 2)) != observations[:, 1].sum(axis=(1, 2))).astype(int)
    assert movers.tolist() == [move % 2 for move in range(count)]
    for index in range(count):
        assert masks[index].tolist() == (observations[index].sum(axis=0).ravel() == 0).tolist()
    seat_returns = value_targets(replay.values[0], 0)  # seat 0 moved first
    for index in range(count):
        assert replay.values[index].tolist() == value_targets(seat_returns, movers[index]).tolist()
    assert seat_returns.sum() == 0 and set(np.abs(seat_returns)) <= {0.0, 1.0}


def test_self_play_threads_store_the_games_a_sequential_run_plays_in_game_order():
    """Two threads search at once; what they store is what their shares give when played
    one after the other (no interference), ordered by game number."""
    settings = dict(self_play_threads=2, games_per_iteration=7, parallel_games=4, inference_precision="float32",
                    evaluation_cache=0)
    threaded = Trainer(tiny_config(**settings))
    threaded.self_play()
    sequential = Trainer(tiny_config(**settings))
    seed = derive_seed(sequential.seeds["self_play"], 0)
    evaluate = make_evaluator(sequential.network.eval())
    games = [game for k in range(2) for game in play_games(sequential.game, sequential.config, range(k, 7, 2),
                                                            sequential.new_game, 2, derive_seed(seed, k), evaluate)[0]]
    assert sorted(number for number, _, _, _ in games) == list(range(7))
    for number, history, returns, moves in sorted(games, key=lambda game: game[0]):
        sequential.replay.add_game(history, returns, moves)
    count = len(threaded.replay)
    assert count == len(sequential.replay) == threaded.counters["positions"]
    for name in ("observations", "legal_masks", "policies", "values"):
        np.testing.assert_array_equal(getattr(threaded.replay, name)[:count], getattr(sequential.replay, name)[:count])


def test_training_takes_its_torch_threads_back_from_self_play_threads():
    """Self-play's pool threads set torch's process-wide thread count to one; training
    must run on torch_threads again, not on what self-play left."""
    trainer = Trainer(tiny_config(self_play_threads=2, torch_threads=2))
    trainer.self_play()
    torch.set_num_threads(1)  # what a self-play thread's setting leaves (whether it does depends on OpenMP's state)
    seen = []
    step = trainer.train_step
    trainer.train_step = lambda batch: (seen.append(torch.get_num_threads()), step(batch))[1]
    trainer.train()
    assert seen == [2] * trainer.config.train_steps


def test_carried_games_keep_the_slots_full_and_finish_later():
    """With carry_games every slot plays until the iteration's quota has ended; the games
    still under way go on in the next iteration, and no game is lost or played twice."""
    trainer = Trainer(tiny_config(carry_games=True, self_play_threads=1, games_per_iteration=3, parallel_games=8))
    config, evaluate = trainer.config, make_evaluator(trainer.network.eval())
    finished, under_way = play_games(trainer.game, config, itertools.count(0), trainer.new_game, 8, 0, evaluate,
                                     quota=3)
    started = len(finished) + len(under_way)
    assert len(finished) >= 3 and len(under_way) == 8  # every slot still holds a game
    assert sorted([number for number, *_ in finished] + [playing.number for playing in under_way]) == \
        list(range(started))
    moves_then = {playing.number: playing.moves for playing in under_way}
    finished_next, _ = play_games(trainer.game, config, itertools.count(started), trainer.new_game, 8, 1, evaluate, under_way,
                                  quota=20)
    for number, history, _, moves in finished_next:
        if number in moves_then:  # carried: it went on where it stopped, its history kept
            assert moves > moves_then[number] and [position[-1] for position in history] == list(range(moves))
    assert moves_then.keys() <= {number for number, *_ in finished_next}  # 20 finished: the carried first

    trainer.self_play()
    trainer.self_play()
    assert len(trainer.under_way) == 8
    assert trainer.counters["games_started"] == trainer.counters["games"] + len(trainer.under_way)
    assert len(trainer.replay) == trainer.counters["positions"]


def test_max_moves_caps_every_game():
    trainer = Trainer(tiny_config(max_moves=3))
    trainer.self_play()
    assert trainer.counters["games"] == 6
    assert len(trainer.replay) == trainer.counters["positions"] == 18
    # a game cut short is scored by its returns so far: zero in TicTacToe
    assert (trainer.replay.values[:18] == 0).all()


# --- training ------------------------------------------------------------------------


def test_training_step_changes_parameters_with_finite_loss():
    trainer = Trainer(tiny_config())
    trainer.self_play()
    before = parameters(trainer.network)
    losses = trainer.train_step(trainer.replay.sample(trainer.replay_rng, 16))
    assert all(torch.isfinite(value) for value in losses.values())
    assert losses["loss/policy"] > 0 and losses["loss/value"] >= 0
    after = parameters(trainer.network)
    assert any(not torch.equal(a, b) for a, b in zip(before, after))


def test_network_masks_illegal_actions_and_bounds_values():
    for shape in [(2, 3, 3), (10,)]:
        network = PolicyValueNet(shape, num_actions=9, num_players=3, channels=8, blocks=1).eval()
        masks = torch.zeros(4, 9, dtype=torch.bool)
        masks[:, ::2] = True
        logits, values = network(torch.randn(4, *shape), masks)
        assert logits.shape == (4, 9) and values.shape == (4, 3)
        assert (logits[~masks] == ILLEGAL_LOGIT).all() and (logits[masks] > ILLEGAL_LOGIT).all()
        assert (values.abs() <= 1).all()
    with pytest.raises(ValueError, match="num_players"):
        PolicyValueNet((2, 3, 3), num_actions=9, num_players=0)


def test_the_evaluator_gives_the_networks_softmax_priors_and_values():
    network = PolicyValueNet((10,), num_actions=9, num_players=3, channels=8, blocks=1).eval()
    generator = torch.Generator().manual_seed(1)
    observations = torch.randn(6, 10, generator=generator)
    masks = torch.rand(6, 9, generator=generator) < 0.5
    masks[:, 0] = True
    with torch.no_grad():
        logits, values = network(observations, masks)
    for trace in (False, True):
        priors, evaluated = make_evaluator(network, "float32", trace)(observations.numpy(), masks.numpy())
        assert priors.dtype == evaluated.dtype == np.float32 and (priors[~masks.numpy()] == 0).all()
        np.testing.assert_allclose(priors, torch.softmax(logits, 1).numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(priors.sum(1), 1.0, rtol=1e-5)
        np.testing.assert_allclose(evaluated, values.numpy(), rtol=1e-5, atol=1e-6)


def test_same_seed_same_run():
    first, second = Trainer(tiny_config(seed=5)), Trainer(tiny_config(seed=5))
    for _ in range(2):
        first_scalars, second_scalars = first.iterate(), second.iterate()
        for key in ("loss/total", "loss/policy", "loss/value", "self_play/game_length"):
            assert first_scalars[key] == second_scalars[key]
    assert_same_parameters(first.network, second.network)
    assert np.array_equal(first.replay.observations, second.replay.observations)
    other = Trainer(tiny_config(seed=6))
    other.iterate()
    assert not np.array_equal(first.replay.policies, other.replay.policies)


def test_named_seeds_differ():
    seeds = seeding.named_seeds(0, SEED_NAMES)
    assert len(set(seeds.values())) == len(seeds)
    assert seeding.named_seeds(0, SEED_NAMES) == seeds and seeding.named_seeds(1, SEED_NAMES) != seeds


@pytest.mark.parametrize("overrides", [{}, dict(carry_games=True, self_play_threads=1, parallel_games=8)], ids=["", "carry_games"])
def test_resume_continues_exactly(tmp_path, overrides):
    uninterrupted = Trainer(tiny_config(**overrides))
    for _ in range(3):
        uninterrupted.iterate()

    interrupted = Trainer(tiny_config(**overrides), str(tmp_path))
    for _ in range(2):
        interrupted.iterate()
    interrupted.save()
    del interrupted
    resumed = Trainer.resume(str(tmp_path))
    assert resumed.counters["iteration"] == 2
    resumed.iterate()
    assert_same_parameters(uninterrupted.network, resumed.network)
    assert resumed.counters == {**uninterrupted.counters, "seconds": resumed.counters["seconds"]}
    assert np.array_equal(uninterrupted.replay.values, resumed.replay.values)
    assert uninterrupted.optimizer.state_dict()["state"][0]["step"] == resumed.optimizer.state_dict()["state"][0]["step"]


@pytest.mark.parametrize("overrides, message", [
    (dict(batch_size=1), "batch_size"), (dict(eval_games=3), "eval_games"), (dict(optimizer="rmsprop"), "optimizer"),
    (dict(simulations=0), "simulations"), (dict(num_players=3), "num_players"), (dict(seed=-1), "seed"),
    (dict(minutes=-1.0), "minutes"), (dict(inference_precision="fp16"), "inference_precision"),
    (dict(evaluation_cache=-1), "evaluation_cache"), (dict(carry_games=True, self_play_threads=2), "self_play_threads"),
])
def test_bad_config_is_rejected(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**overrides)
    with pytest.raises(ValueError, match="game"):
        AlphaZeroConfig.for_game("chess")


@pytest.mark.parametrize("overrides, message", [
    (dict(blocks="3"), "blocks must be an int, got '3'"),
    (dict(channels=True), "channels must be an int, got True"),
    (dict(solve=1), r"solve must be a bool \(True or False\), got 1"),
    (dict(c_init="1.25"), "c_init must be a number, got '1.25'"),
    (dict(learning_rate=float("nan")), "learning_rate must be a finite number, got nan"),
    (dict(optimizer=None), "optimizer must be a str, got None"),
])
def test_config_fields_are_type_checked_as_ppo_configs_are(overrides, message):
    # blocks="3" used to pass validate() and fail deep inside the network's construction.
    with pytest.raises(ValueError, match=message):
        AlphaZeroConfig.for_game("connect4", **overrides)
    config = AlphaZeroConfig.for_game("connect4", minutes=np.int64(5), blocks=np.int64(2))
    assert type(config.minutes) is float and type(config.blocks) is int  # JSON-ready in run files


# --- end to end: CLI training, agent, play command --------------------------------------


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A tiny TicTacToe run trained through the CLI, with an evaluation at the end."""
    run_dir = str(tmp_path_factory.mktemp("alphazero") / "run")
    main(["alphazero", "tictactoe", "--run-dir", run_dir, "--iterations", "2", "--channels", "8",
          "--blocks", "1", "--games-per-iteration", "8", "--parallel-games", "8", "--simulations", "8",
          "--train-steps", "3", "--batch-size", "16", "--eval-interval", "2", "--eval-games", "2",
          "--eval-simulations", "8", "--baseline-simulations", "20", "--torch-threads", "1"])
    return run_dir


def test_cli_training_writes_checkpoint_and_metrics(trained_run):
    state = checkpoint.load(os.path.join(trained_run, "checkpoint.pt"))
    assert state["counters"]["iteration"] == 2 and state["counters"]["games"] == 16
    with open(os.path.join(trained_run, "metrics.csv")) as file:
        header = file.readline().strip().split(",")
    for column in ("loss/policy", "loss/value", "eval/random_win", "eval/mcts_loss", "self_play/games_per_minute"):
        assert column in header
    with open(os.path.join(trained_run, "seeds.json")) as file:  # as every trainer writes them
        assert json.load(file) == {"run": state["alphazero_config"]["seed"], **seeding.named_seeds(0, SEED_NAMES)}
    with open(os.path.join(trained_run, "config.json")) as file:
        assert json.load(file)["game"] == "tictactoe"


def test_agent_load_and_act(trained_run):
    agent = AlphaZeroAgent.load(trained_run)
    assert agent.config.game == "tictactoe" and agent.config.channels == 8
    win_in_one = play([0, 3, 1, 4])  # X holds 0 and 1: 2 wins
    assert agent.act(win_in_one, simulations=200) == 2
    block = play([0, 4, 8, 2])  # O threatens 2-4-6: X must take 6
    assert agent.act(block, simulations=400) == 6
    with pytest.raises(ValueError, match="terminal"):
        agent.act(play([0, 3, 1, 4, 2]))


def test_agent_load_rejects_other_checkpoints(tmp_path):
    path = tmp_path / "other.pt"
    checkpoint.save(path, {"model": {}})
    with pytest.raises(ValueError, match="not an AlphaZero checkpoint"):
        AlphaZeroAgent.load(path)


def test_play_against_reports_rates(trained_run):
    rates = play_against(AlphaZeroAgent.load(trained_run), RandomAgent, games=4, seed=0)
    assert set(rates) == {"win", "draw", "loss", "margin", "win_seat0", "win_seat1"}
    assert rates["win"] + rates["draw"] + rates["loss"] == pytest.approx(1.0)
    # half the games in each seat
    assert rates["win"] == pytest.approx((rates["win_seat0"] + rates["win_seat1"]) / 2)


def test_play_against_takes_every_seat_with_more_players():
    config = AlphaZeroConfig.for_game("azul", num_players=3, channels=8, blocks=1, torch_threads=1, eval_games=3)
    agent = AlphaZeroAgent(build_network(config), config)
    rates = play_against(agent, lambda seed: GreedyAzulAgent(), games=3, seed=0, simulations=2)
    assert set(rates) == {"win", "draw", "loss", "margin", "win_seat0", "win_seat1", "win_seat2"}
    assert rates["win"] == pytest.approx(np.mean([rates[f"win_seat{seat}"] for seat in range(3)]))
    assert rates["margin"] < 0  # an untrained network with 2 simulations against greedy bots
    with pytest.raises(ValueError, match="multiple of num_players=3"):
        play_against(agent, RandomAgent, games=4, seed=0)
    with pytest.raises(ValueError, match="eval_games must be a multiple of num_players=3"):
        AlphaZeroConfig.for_game("azul", num_players=3, eval_games=20)


def run_play(*args, stdin: str):
    # -P: not the working directory first on sys.path, where a source checkout's
    # puffercore/ (no compiled extensions) would shadow the installed package.
    return subprocess.run([sys.executable, "-P", "-m", "puffercore", "play", *args], input=stdin,
                          capture_output=True, text=True, timeout=120)


def test_play_command_with_piped_moves(trained_run):
    # every cell in turn, twice: illegal ones are refused, and the game reaches its end
    moves = "x\n" + "\n".join(str(cell) for cell in list(range(9)) * 2) + "\n"
    result = run_play("tictactoe", "--checkpoint", trained_run, "--simulations", "50", stdin=moves)
    assert result.returncode == 0, result.stderr
    assert "'x' is not a move" in result.stdout and "is not a legal move" in result.stdout
    assert "agent plays" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1] in ("you win", "draw", "the agent wins")

    second_seat = run_play("tictactoe", "--checkpoint", trained_run, "--seat", "1", stdin="")
    assert second_seat.returncode == 0, second_seat.stderr
    assert "agent plays" in second_seat.stdout and "game abandoned" in second_seat.stdout


def test_ctrl_c_in_play_abandons_the_game_without_a_traceback(trained_run):
    process = subprocess.Popen([sys.executable, "-P", "-m", "puffercore", "play", "tictactoe", "--checkpoint",
                                trained_run, "--seed", "7"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        prompt = ""
        while "your move" not in prompt:  # the game waits for a move
            prompt += process.stdout.read(1) or pytest.fail(f"play ended early: {process.stderr.read()}")
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0 and "Traceback" not in err, err
    assert "game abandoned; replay it with --seed 7" in out


def test_play_command_rejects_the_wrong_game(trained_run):
    result = run_play("connect4", "--checkpoint", trained_run, stdin="")
    assert result.returncode == 2 and "plays tictactoe, not connect4" in result.stderr


def test_resume_with_a_new_budget_goes_on_from_the_checkpoint(trained_run, tmp_path):
    run_dir = str(tmp_path / "run")
    shutil.copytree(trained_run, run_dir)
    trainer = train(resume=run_dir, quiet=True, budget={"iterations": 3})
    assert trainer.counters["iteration"] == 3 and trainer.counters["games"] == 24
    with pytest.raises(ValueError, match="budget may set only"):
        train(resume=run_dir, quiet=True, budget={"simulations": 4})
    with pytest.raises(SystemExit):
        main(["alphazero", "--resume", run_dir, "--simulations", "4"])


# --- Azul ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def azul_run(tmp_path_factory):
    """A tiny 2-player Azul run, evaluated against random, UCT and the greedy bot."""
    run_dir = str(tmp_path_factory.mktemp("azul") / "run")
    config = AlphaZeroConfig.for_game("azul", channels=16, blocks=1, games_per_iteration=2, parallel_games=2,
                                      simulations=4, batch_size=16, train_steps=2, iterations=1, minutes=0,
                                      eval_interval=1, eval_games=2, eval_simulations=4, baseline_simulations=10,
                                      torch_threads=1, run_dir=run_dir)
    return train(config, quiet=True)


def test_azul_preset_trains_and_evaluates_against_the_greedy_bot(azul_run):
    assert azul_run.config.normalize_values and azul_run.counters["games"] == 2
    with open(os.path.join(azul_run.run_dir, "metrics.csv")) as file:
        header = file.readline().strip().split(",")
    assert {"eval/greedy_win", "eval/random_win", "eval/mcts_win"} <= set(header)
    state = Azul().new_state(seed=3, num_players=2)
    assert AlphaZeroAgent.load(azul_run.run_dir).act(state, simulations=8) in state.legal_actions()


def test_play_azul_reads_moves_in_board_notation(azul_run):
    state = Azul().new_state(seed=5, num_players=2)
    legal = state.legal_actions()
    illegal = next(action for action in range(Azul().num_actions) if action not in legal)
    stdin = "\n".join(["?", "zz", Azul.move_text(illegal), Azul.move_text(legal[0])]) + "\n"
    result = run_play("azul", "--checkpoint", azul_run.run_dir, "--seed", "5", "--simulations", "4", stdin=stdin)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "game seed 5" in out and "factories:" in out and "'?' lists them" in out
    assert "legal moves: " + ", ".join(Azul.move_text(action) for action in legal) in out
    assert "'zz' is not a move" in out and f"'{Azul.move_text(illegal)}' is not a legal move" in out
    assert "agent plays" in out and "game abandoned" in out


@pytest.mark.slow
def test_tictactoe_agent_never_loses_to_random(tmp_path):
    trainer = Trainer(AlphaZeroConfig.for_game("tictactoe", iterations=10, torch_threads=1), str(tmp_path))
    while not trainer.done():
        trainer.iterate()
    # 200 simulations: deep enough for the search (and its solver) to see a double threat coming.
    rates = play_against(AlphaZeroAgent(trainer.network, trainer.config), RandomAgent, games=100, seed=1,
                         simulations=200)
    assert rates["loss"] == 0 and rates["win"] >= 0.8


def test_cached_evaluator_answers_repeats_without_evaluating_them_again():
    calls = []

    def evaluate(observations, legal_masks):
        calls.append(len(observations))
        return legal_masks / legal_masks.sum(axis=1, keepdims=True), observations.reshape(len(observations), -1)[:, :2]

    cached = CachedEvaluator(evaluate, capacity=3)
    observations = np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0]], dtype=np.float32)
    masks = np.array([[True, False], [True, True], [True, False]])
    priors, values = cached(observations, masks)
    np.testing.assert_array_equal(values, observations)
    np.testing.assert_array_equal(priors, [[1, 0], [0.5, 0.5], [1, 0]])
    assert calls == [2]  # the repeat inside the batch was evaluated once
    other_mask = np.array([[True, True]])
    again_priors, _ = cached(observations[:1], other_mask)  # same observation, another mask: a new position
    np.testing.assert_array_equal(again_priors, [[0.5, 0.5]])
    cached(observations[1:2], masks[1:2])
    assert calls == [2, 1] and cached.hits == 2 and cached.lookups == 5
    cached(np.array([[9.0, 9.0]], dtype=np.float32), masks[:1])  # a fourth position: the full table starts over
    assert len(cached.table) == 1
    with pytest.raises(ValueError, match="capacity must be an int >= 1"):
        CachedEvaluator(evaluate, capacity=0)


def test_self_play_is_the_same_with_and_without_the_evaluation_cache():
    with_cache = Trainer(tiny_config(inference_precision="float32"))
    without = Trainer(tiny_config(inference_precision="float32", evaluation_cache=0))
    with_cache.self_play()
    without.self_play()
    state, other = with_cache.replay.state_dict(), without.replay.state_dict()
    for name in ("observations", "policies", "values"):
        np.testing.assert_array_equal(state[name], other[name])


def test_value_targets_mix_the_game_result_with_the_search_value():
    buffer = ReplayBuffer(8, (1,), 2, 2)
    history = [(np.zeros(1), np.ones(2, bool), np.full(2, 0.5), 0, np.array([0.2, -0.2]), False, 0),
               (np.zeros(1), np.ones(2, bool), np.full(2, 0.5), 1, np.array([0.6, -0.6]), False, 1),
               (np.zeros(1), np.ones(2, bool), np.full(2, 0.5), 0, np.array([-1.0, 1.0]), True, 2)]
    buffer.add_game(history, np.array([1.0, -1.0]), 3, search_value_weight=0.25)
    np.testing.assert_allclose(buffer.values[:3], [[0.8, -0.8],                 # 0.75 * 1 + 0.25 * 0.2
                                                   [-0.9, 0.9],                 # player 1's view of (0.9, -0.9)
                                                   [-1.0, 1.0]], rtol=1e-6)     # proven: exact, whatever the game gave
    buffer.add_game([], np.array([1.0, -1.0]), 0)  # a game without a recorded position adds nothing
    assert len(buffer) == 3
    buffer.add_game(history, np.array([1.0, -1.0]), 3, search_value_weight=0.25, value_discount=0.5)
    np.testing.assert_allclose(buffer.values[3:6], [[0.75 * 0.125 + 0.05, -0.75 * 0.125 - 0.05],  # 3 moves left
                                                    [-0.75 * 0.25 - 0.15, 0.75 * 0.25 + 0.15],    # 2 moves left
                                                    [-0.5, 0.5]], rtol=1e-6)                      # proven, 1 left


def test_self_play_records_the_moves_played_before_each_position():
    """The last field of a recorded position counts the game's moves before it: 0 for
    the first, one less than the game's moves for the last (every move searched fully)."""
    trainer = Trainer(tiny_config(games_per_iteration=3, parallel_games=3))
    games, _ = play_games(trainer.game, trainer.config, range(3), trainer.new_game, 3, 0,
                          make_evaluator(trainer.network.eval()))
    for _, history, _, moves in games:
        assert [position[-1] for position in history] == list(range(moves))


def test_a_value_discount_scales_each_target_by_its_moves_left():
    """The same games (the first iteration's play does not depend on the targets) learn
    their results times 0.9 per move left: between 0.9 (the last move) and 0.9^9."""
    plain = Trainer(tiny_config(search_value_weight=0.0, inference_precision="float32"))
    discounted = Trainer(tiny_config(search_value_weight=0.0, inference_precision="float32", value_discount=0.9))
    plain.self_play()
    discounted.self_play()
    count = len(plain.replay)
    np.testing.assert_array_equal(plain.replay.observations[:count], discounted.replay.observations[:count])
    before, after = plain.replay.values[:count], discounted.replay.values[:count]
    decided = before != 0
    assert decided.any(), "no game of the iteration was decided"
    moves_left = np.log(after[decided] / before[decided]) / np.log(0.9)
    np.testing.assert_allclose(moves_left, np.round(moves_left), atol=1e-3)
    assert moves_left.min() > 0.5 and moves_left.max() < 9.5
    np.testing.assert_array_equal(after[~decided], 0.0)
    with pytest.raises(ValueError, match="value_discount"):
        tiny_config(value_discount=0.0)


def test_azul_value_targets_learn_who_won_with_outcome_weight_1():
    config = AlphaZeroConfig.for_game("azul", channels=8, blocks=1, games_per_iteration=2, parallel_games=2,
                                      simulations=2, torch_threads=1, outcome_weight=1.0)
    trainer = Trainer(config)
    trainer.self_play()
    values = trainer.replay.values[: len(trainer.replay)]
    # the game result alone (search_value_weight 0): every target is +-1, or 0 for a tie
    assert len(values) and set(np.unique(np.abs(values))) <= {0.0, 1.0}
    assert (values.sum(axis=1) == 0).all()


def test_three_player_value_targets_are_leads_with_lead_returns():
    config = AlphaZeroConfig.for_game("azul", num_players=3, channels=8, blocks=1, games_per_iteration=3,
                                      parallel_games=3, simulations=2, torch_threads=1, eval_games=3,
                                      lead_returns=True)
    trainer = Trainer(config)
    trainer.self_play()
    values = np.sort(trainer.replay.values[: len(trainer.replay)], axis=1)
    # the leader's lead over the runner-up is the runner-up's gap to the leader
    assert len(values) and np.allclose(values[:, -1], -values[:, -2]) and (values[:, -1] >= 0).all()


def test_playout_cap_randomization_records_only_full_searches():
    full = Trainer(tiny_config(games_per_iteration=8, parallel_games=8))
    capped = Trainer(tiny_config(games_per_iteration=8, parallel_games=8, full_search_fraction=0.3,
                                 fast_simulations=2))
    full_stats, capped_stats = full.self_play(), capped.self_play()
    assert full_stats["self_play/recorded_positions"] == 8 * full_stats["self_play/game_length"]
    share = capped_stats["self_play/recorded_positions"] / (8 * capped_stats["self_play/game_length"])
    assert 0.05 < share < 0.6 and len(capped.replay) == capped_stats["self_play/recorded_positions"]
    with pytest.raises(ValueError, match="full_search_fraction"):
        tiny_config(full_search_fraction=0.0)


def test_cosine_learning_rate_decays_to_a_tenth_over_the_run():
    trainer = Trainer(tiny_config(lr_decay="cosine", iterations=4, learning_rate=0.01))
    rates = []
    while not trainer.done():
        rates.append(trainer.iterate()["train/learning_rate"])
    assert rates[0] == pytest.approx(0.01) and all(a > b for a, b in zip(rates, rates[1:]))
    assert trainer.learning_rate() == pytest.approx(0.001)
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(rates[-1])
    constant = Trainer(tiny_config(iterations=2))
    assert [constant.iterate()["train/learning_rate"] for _ in range(2)] == [constant.config.learning_rate] * 2
    with pytest.raises(ValueError, match="lr_decay"):
        tiny_config(lr_decay="linear")


def test_gumbel_self_play_trains_on_the_improved_policy():
    trainer = Trainer(tiny_config(gumbel=True, gumbel_considered=4, simulations=8))
    trainer.iterate()
    count = len(trainer.replay)
    policies, masks = trainer.replay.policies[:count], trainer.replay.legal_masks[:count]
    assert np.allclose(policies.sum(axis=1), 1.0) and (policies[~masks] == 0).all()
    # The improved policy is a softmax: every legal move the root did not prove lost keeps some mass,
    # where visit counts would leave unvisited moves at zero.
    assert (policies[masks] > 0).mean() > 0.9
    agent = AlphaZeroAgent(trainer.network, trainer.config)
    assert agent.act(play([0, 4]), simulations=8) in play([0, 4]).legal_actions()


def test_auto_training_precision_is_bf16_where_native_for_every_network():
    board = Trainer(tiny_config())  # tictactoe: a convolutional tower
    assert board.network.convolutional
    assert board.train_dtype == (torch.bfloat16 if native_bf16() else torch.float32)
    azul = Trainer(AlphaZeroConfig.for_game("azul", channels=8, blocks=1, torch_threads=1))
    assert not azul.network.convolutional  # an MLP: trains in bf16 all the same
    assert azul.train_dtype == (torch.bfloat16 if native_bf16() else torch.float32)
    forced = Trainer(AlphaZeroConfig.for_game("azul", channels=8, blocks=1, torch_threads=1, train_precision="float32"))
    assert forced.train_dtype == torch.float32
