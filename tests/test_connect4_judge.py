"""The judges (puffercore.judges): the perfect-solver Connect4 judge (bitbully) and the
strength command's bots, OpenSpiel's MCTSBot among them, on a tiny checkpoint (the
30-minute runs they measure are not run here); records from --record; the commands'
help and their one-line answer without the bench extra."""

import json
import subprocess
import sys

import pytest

from puffercore.__main__ import main
from puffercore.alphazero.config import AlphaZeroConfig
from puffercore.alphazero.evaluation import AlphaZeroAgent, play_against
from puffercore.alphazero.trainer import train
from puffercore.judges import connect4 as judge
from puffercore.judges import strength
from puffercore.results import read_records


def test_help_works_and_a_missing_solver_is_one_line(tmp_path):
    """Without bitbully and OpenSpiel (their imports blocked): --help works, and using them
    names the extra to install in one line."""
    block = "import sys; sys.modules['bitbully'] = sys.modules['pyspiel'] = None; from puffercore.__main__ import main; "
    for command in (["judge", "--help"], ["judge", "connect4", "--help"], ["strength", "--help"]):
        done = subprocess.run([sys.executable, "-P", "-c", block + f"main({command!r})"], capture_output=True, text=True)
        assert done.returncode == 0 and "usage: puffercore" in done.stdout, done.stderr
    done = subprocess.run([sys.executable, "-P", "-c", block + "main(['judge', 'connect4', 'solver', '--cache', ''])"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        'puffercore judge connect4: the Connect4 judge needs the solver bitbully: pip install "puffercore[bench]"']


def test_openspiel_opponent_without_openspiel_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspiel", None)  # import pyspiel now raises ImportError
    with pytest.raises(ImportError, match=r'needs OpenSpiel: pip install "puffercore\[bench\]"'):
        strength.OpenSpielMCTS(10, seed=0)


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
    pytest.importorskip("bitbully")
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


def test_judge_runs_on_a_checkpoint_at_every_simulation_count(solver, tiny_connect4_run, tmp_path, capsys):
    arguments = ([tiny_connect4_run], [1, 8], ["random", "strong"], 10)
    results = judge.judge(*arguments, threads=1, cache=str(tmp_path))
    assert judge.judge(*arguments, threads=1, cache=str(tmp_path)) == results  # the second time from the cache
    for simulations in (1, 8):
        for source in ("random", "strong", "all"):
            result = results[(tiny_connect4_run, simulations, source)]
            assert 0.0 <= result["optimal"] <= result["keeps_result"] <= 1.0
    assert results[(tiny_connect4_run, 8, "all")]["positions"] == 20
    assert "8 sims" in capsys.readouterr().out
    cached = tmp_path / "random-10-seed0.json"
    cached.write_text(json.dumps([[[3, 3, 3, 3, 3, 3, 3], {"0": 1}]] * 10))  # a full column played again
    with pytest.raises(ValueError, match="random-10-seed0.json: not a cached position set"):
        judge.judge(*arguments, threads=1, cache=str(tmp_path))
    with pytest.raises(ValueError, match="sources must be among"):
        judge.judge([tiny_connect4_run], [1], ["randm"], 10, cache="")


def test_the_commands_record_their_results(solver, tiny_connect4_run, tmp_path, capsys):
    """`puffercore judge connect4 ... --record PATH` and `puffercore strength ... --record
    PATH` append checked records that name the command that reproduces them."""
    records = str(tmp_path / "results.jsonl")
    main(["judge", "connect4", tiny_connect4_run, "solver", "--simulations", "1", "--positions", "5", "--sources",
          "random", "--threads", "1", "--cache", "", "--record", records])
    main(["strength", tiny_connect4_run, "--opponents", "random", "--games", "2", "--simulations", "2",
          "--threads", "1", "--record", records])
    main(["strength", "greedy", "--opponents", "random", "--games", "2", "--record", records])
    written = read_records(records)
    assert [entry["measure"] for entry in written] == [
        "connect4_judge_1_simulations", "alphazero_connect4_vs_random_2_simulations", "azul_greedy_vs_random_2p"]
    assert written[0]["command"] == (f"puffercore judge connect4 {tiny_connect4_run} solver --simulations 1 "
                                     "--sources random --positions 5 --seed 0")
    assert 0 <= written[1]["value"] <= 100 and written[1]["unit"] == "% won"
    output = capsys.readouterr().out
    assert "agent 2 simulations vs random: win" in output and "greedy vs random, 2 players, 2 games:" in output


def test_openspiel_mctsbot_follows_the_game_and_plays_both_seats(tiny_connect4_run):
    pytest.importorskip("pyspiel")
    agent = AlphaZeroAgent.load(tiny_connect4_run)
    rates = play_against(agent, lambda seed: strength.OpenSpielMCTS(50, seed), games=4, seed=0, simulations=4)
    assert rates["win"] + rates["draw"] + rates["loss"] == pytest.approx(1.0)
    # 50 solving rollout simulations beat a 4-simulation search with an untrained network.
    assert rates["loss"] >= 0.5
    game, results = strength.strength(tiny_connect4_run, opponents=["openspiel", "random"], games=2,
                                      uct_simulations=20, simulations=[4], threads=1)
    assert game == "connect4" and set(results) == {(4, "openspiel"), (4, "random")}
    with pytest.raises(ValueError, match=r"opponents must be among .*, got \['greedy'\]"):
        strength.strength(tiny_connect4_run, opponents=["greedy"], games=2)
    bot = strength.OpenSpielMCTS(10, seed=0)
    state = agent.game.new_state()
    state.apply(3)  # a move the bot was not told about
    with pytest.raises(RuntimeError, match="every move observed"):
        bot.act(state)
