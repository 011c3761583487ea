"""The Connect4 judges in bench/: the perfect-solver judge (bitbully) and the strength
script's OpenSpiel MCTSBot side, on a tiny checkpoint (the 30-minute runs they measure
are not run here)."""

import importlib.util
import os
import sys

import pytest

from puffercore.alphazero.config import AlphaZeroConfig
from puffercore.alphazero.evaluation import AlphaZeroAgent, play_against
from puffercore.alphazero.trainer import train

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")

pytest.importorskip("bitbully")


def bench_module(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", os.path.join(BENCH, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


judge = bench_module("connect4_judge")


@pytest.fixture(scope="module")
def tiny_connect4_run(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("c4") / "run")
    config = AlphaZeroConfig.for_game("connect4", channels=8, blocks=1, games_per_iteration=4, parallel_games=4,
                                      simulations=4, batch_size=16, train_steps=2, eval_interval=0, iterations=1,
                                      minutes=0, torch_threads=1, run_dir=run_dir)
    train(config, quiet=True)
    return run_dir


@pytest.fixture(scope="module")
def solver():
    return judge.Judge()


def test_solver_scores_agree_with_the_rules(solver):
    # Empty board: only the centre column wins for the first player.
    scores = solver.scores([])
    assert max(scores, key=scores.get) == 3 and scores[3] > 0 and sum(s > 0 for s in scores.values()) == 1
    # X holds columns 2 and 3 of the bottom row, O to move: only blocking an end (1 or 4) avoids
    # losing at once (X's 4th stone, the 7th ply: score (43 - 6) // 2 = 18 against O).
    scores = solver.scores([3, 3, 2])
    assert {column for column, score in scores.items() if score > -18} == {1, 4}
    assert all(score == -18 for column, score in scores.items() if column not in (1, 4))


def test_positions_are_seeded_legal_and_in_their_category(solver):
    for source in ("random", "strong", "begin-hard", "end-easy"):
        first = judge.build_positions(solver, source, 4, seed=3)
        again = judge.build_positions(solver, source, 4, seed=3)
        assert [p.moves for p in first] == [p.moves for p in again]
        for position, state in zip(first, judge.states_of(first)):
            assert not state.is_terminal()
            assert sorted(position.scores) == state.legal_actions()
            if source == "random":
                assert len(position.moves) <= 30
            elif source != "strong":
                assert judge._pons_category(position) == source
    with pytest.raises(ValueError, match="source must be"):
        judge.build_positions(solver, "nonsense", 1, seed=0)


def test_the_solver_side_is_perfect_and_random_play_is_not(solver):
    positions = judge.build_positions(solver, "random", 40, seed=1) + judge.build_positions(solver, "strong", 40, 1)
    perfect = judge.score_moves(positions, judge.choose_moves("solver", positions, 0, seed=0))
    assert perfect["keeps_result"] == perfect["optimal"] == perfect["decisive_keeps_result"] == 1.0
    random = judge.score_moves(positions, judge.choose_moves("random", positions, 0, seed=0))
    assert random["decisive_positions"] > 0
    assert random["decisive_keeps_result"] < 1.0 and random["optimal"] < 1.0


def test_judge_runs_on_a_checkpoint_at_every_simulation_count(tiny_connect4_run, tmp_path, capsys):
    arguments = [tiny_connect4_run, "--simulations", "1", "8", "--positions", "10", "--sources", "random", "strong",
                 "--threads", "1", "--cache", str(tmp_path)]
    results = judge.main(arguments)
    assert judge.main(arguments) == results  # the second time from the cache
    for simulations in (1, 8):
        for source in ("random", "strong", "all"):
            result = results[(tiny_connect4_run, simulations, source)]
            assert 0.0 <= result["optimal"] <= result["keeps_result"] <= 1.0
    assert results[(tiny_connect4_run, 8, "all")]["positions"] == 20
    assert "8 sims" in capsys.readouterr().out


def test_openspiel_mctsbot_follows_the_game_and_plays_both_seats(tiny_connect4_run):
    pytest.importorskip("pyspiel")
    strength = bench_module("alphazero_strength")
    agent = AlphaZeroAgent.load(tiny_connect4_run)
    rates = play_against(agent, lambda seed: strength.OpenSpielMCTS(50, seed), games=4, seed=0, simulations=4)
    assert rates["win"] + rates["draw"] + rates["loss"] == pytest.approx(1.0)
    # 50 solving rollout simulations beat a 4-simulation search with an untrained network.
    assert rates["loss"] >= 0.5
    results = strength.main([tiny_connect4_run, "--opponents", "openspiel", "random", "--games", "2",
                             "--uct-simulations", "20", "--simulations", "4", "--threads", "1"])
    assert set(results) == {(4, "openspiel"), (4, "random")}
    bot = strength.OpenSpielMCTS(10, seed=0)
    state = agent.game.new_state()
    state.apply(3)  # a move the bot was not told about
    with pytest.raises(RuntimeError, match="every move observed"):
        bot.act(state)
