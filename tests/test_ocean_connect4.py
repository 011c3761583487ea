"""Connect4 as an RL env against a built-in opponent. Every transition of many random
games is checked against a NumPy reference of the rules written here (four in a row by
slicing, pieces stacking from the bottom) and, for the heuristic opponent, against a
reference of its move preferences."""

import os
import sys

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import puffercore
from puffercore.env import GymnasiumView
from puffercore.ocean import Connect4Env

sys.path.insert(0, os.path.dirname(__file__))  # pytest's importlib mode leaves tests/ off the path
from masked_envs import assert_same_frames, masks_of, random_legal_actions, rollout  # noqa: E402

ROWS, COLS = 6, 7
DIRECTIONS = ("horizontal", "vertical", "rising diagonal", "falling diagonal")


def fours(planes):
    """[n, 6, 7] bool pieces of one player (row 0 at the bottom) -> [n, 4] bool: whether
    they hold four in a row in each of DIRECTIONS."""
    p = planes
    return np.stack([
        (p[:, :, :-3] & p[:, :, 1:-2] & p[:, :, 2:-1] & p[:, :, 3:]).any((1, 2)),
        (p[:, :-3] & p[:, 1:-2] & p[:, 2:-1] & p[:, 3:]).any((1, 2)),
        (p[:, :-3, :-3] & p[:, 1:-2, 1:-2] & p[:, 2:-1, 2:-1] & p[:, 3:, 3:]).any((1, 2)),
        (p[:, 3:, :-3] & p[:, 2:-1, 1:-2] & p[:, 1:-2, 2:-1] & p[:, :-3, 3:]).any((1, 2)),
    ], axis=1)


def heights(boards):
    """[n, 2, 6, 7] -> [n, 7] pieces per column."""
    return boards.any(1).sum(1)


def is_full(boards):
    return boards.any(1).all((1, 2))


def with_piece(planes, rows, cols):
    """A copy of [n, 6, 7] planes with one more piece per board; rows past the top are
    left out (that board gets no piece)."""
    planes = planes.copy()
    inside = rows < ROWS
    planes[np.flatnonzero(inside), rows[inside], cols[inside]] = True
    return planes


def boards_of(env, observations):
    return env.observation_tree.unflatten(observations)["board"] > 0.5


def heuristic_choices(boards):
    """The columns connect4.h's heuristic opponent (plane 1 of `boards`, to move) may
    play, [n, 7] bool: winning ones, else blocking ones, else those not letting the
    agent win on top, else any open one. Also whether it could win, and whether it had
    to block instead ([n] bool each)."""
    n, tall = len(boards), heights(boards)
    open_ = tall < ROWS
    win, block, safe = (np.zeros((n, COLS), bool) for _ in range(3))
    for col in range(COLS):
        cols = np.full(n, col)
        win[:, col] = open_[:, col] & fours(with_piece(boards[:, 1], tall[:, col], cols)).any(1)
        block[:, col] = open_[:, col] & fours(with_piece(boards[:, 0], tall[:, col], cols)).any(1)
        above = with_piece(boards[:, 0], tall[:, col] + 1, cols)
        safe[:, col] = open_[:, col] & ~(fours(above).any(1) & (tall[:, col] + 1 < ROWS))
    choice = open_
    for preferred in (safe, block, win):
        choice = np.where(preferred.any(1, keepdims=True), preferred, choice)
    return choice, win.any(1), block.any(1) & ~win.any(1)


def play_and_check(env, steps, seed, opponent_check=None):
    """Random legal agent moves for `steps` steps; asserts every transition against the
    reference rules and returns tallies of how the games ended."""
    n = env.num_envs
    rng = np.random.default_rng(seed)
    observations, _ = env.reset(seed=seed)
    lengths = np.zeros(n)
    tally = {"agent_fours": np.zeros(4, int), "opponent_fours": np.zeros(4, int), "draws": 0, "episodes": 0}
    for _ in range(steps):
        before, masks = boards_of(env, observations), masks_of(env, observations)
        np.testing.assert_array_equal(masks, heights(before) < ROWS)
        actions = random_legal_actions(masks, rng)
        observations, rewards, terminals, truncations, info = env.step(actions)
        lengths += 1

        after_agent = before.copy()
        after_agent[:, 0] = with_piece(before[:, 0], heights(before)[np.arange(n), actions], actions)
        agent_won = fours(after_agent[:, 0]).any(1)
        opponent_moved = ~agent_won & ~is_full(after_agent)
        end = boards_of(env, np.where(terminals[:, None], env.final_observations, observations))
        np.testing.assert_array_equal(end[:, 0], after_agent[:, 0])  # the agent's move, nothing else
        assert (end[:, 1] >= after_agent[:, 1]).all()
        added = end[:, 1] & ~after_agent[:, 1]
        np.testing.assert_array_equal(added.sum((1, 2)), opponent_moved)
        moved = np.flatnonzero(opponent_moved)
        columns, rows = added[moved].any(1).argmax(1), added[moved].any(2).argmax(1)
        np.testing.assert_array_equal(rows, heights(after_agent)[moved, columns])  # it stacked
        if opponent_check is not None:
            opponent_check(after_agent[moved], columns)

        opponent_fours = fours(end[:, 1])
        opponent_won = opponent_fours.any(1)
        done = agent_won | opponent_won | is_full(end)
        np.testing.assert_array_equal(terminals, done)
        assert not truncations.any()
        np.testing.assert_array_equal(rewards, agent_won.astype(np.float32) - opponent_won)
        assert (masks_of(env, env.final_observations)[done] == 0).all()
        fresh = boards_of(env, observations)[done]  # empty, or the opponent's opening move
        assert not fresh[:, 0].any() and fresh[:, 1].sum((1, 2)).max(initial=0) <= 1 and not fresh[:, 1, 1:].any()

        if done.any():
            drawn = done & ~agent_won & ~opponent_won
            assert info["episodes"] == done.sum()
            expected = {"episode_return": rewards[done].mean(), "episode_length": lengths[done].mean(),
                        "win_rate": agent_won[done].mean(), "loss_rate": opponent_won[done].mean(),
                        "draw_rate": drawn[done].mean(), "illegal_move_rate": 0.0}
            for key, value in expected.items():
                np.testing.assert_allclose(info[key], value, rtol=1e-6, err_msg=key)
            tally["agent_fours"] += fours(after_agent[agent_won, 0]).sum(0)
            tally["opponent_fours"] += opponent_fours[opponent_won].sum(0)
            tally["draws"] += drawn.sum()
            tally["episodes"] += done.sum()
        else:
            assert info == {}
        lengths[done] = 0
    return tally


def test_random_games_follow_the_rules_with_wins_in_every_direction_and_draws():
    env = Connect4Env(num_envs=512, seed=0, opponent="random")
    tally = play_and_check(env, steps=200, seed=1)
    assert tally["episodes"] > 5000
    for who in ("agent_fours", "opponent_fours"):
        for direction, count in zip(DIRECTIONS, tally[who]):
            assert count > 0, f"no {direction} four for the {who.split('_')[0]}"
    assert tally["draws"] > 0, "no game filled the board"


def test_heuristic_opponent_wins_then_blocks_then_plays_safe():
    seen = {"wins": 0, "blocks": 0, "moves": 0}

    def check(boards, columns):
        choice, can_win, must_block = heuristic_choices(boards)
        assert choice[np.arange(len(columns)), columns].all(), "the heuristic ignored its preferences"
        seen["wins"] += can_win.sum()
        seen["blocks"] += must_block.sum()
        seen["moves"] += len(columns)

    tally = play_and_check(Connect4Env(num_envs=256, seed=0, opponent="heuristic"), steps=100, seed=2, opponent_check=check)
    assert seen["wins"] > 100 and seen["blocks"] > 100 and seen["moves"] > 2 * (seen["wins"] + seen["blocks"])
    assert tally["opponent_fours"].all()


def test_heuristic_opponent_beats_random_play_and_random_opponent_does_not():
    def loss_rate(opponent):
        env = Connect4Env(num_envs=256, seed=0, opponent=opponent)
        observations, _ = env.reset()
        rng = np.random.default_rng(0)
        losses = episodes = 0.0
        for _ in range(100):
            observations, _, _, _, info = env.step(random_legal_actions(masks_of(env, observations), rng))
            if info:
                losses += info["loss_rate"] * info["episodes"]
                episodes += info["episodes"]
        return losses / episodes

    assert loss_rate("heuristic") > 0.9
    assert 0.4 < loss_rate("random") < 0.6


@pytest.mark.parametrize("opponent", ["random", "heuristic"])
def test_opening_moves_are_uniform_and_coin_flip_splits_seats(opponent):
    observations, _ = Connect4Env(num_envs=7000, seed=3, opponent=opponent, agent_first=False).reset()
    boards = observations[:, 7:].reshape(-1, 2, ROWS, COLS)
    assert (boards[:, 0] == 0).all() and (boards[:, 1].sum((1, 2)) == 1).all() and (boards[:, 1, 0].sum(1) == 1).all()
    counts = boards[:, 1, 0].sum(0)
    assert np.all(np.abs(counts - 1000) < 5 * np.sqrt(1000 * 6 / 7)), counts  # empty board: every column is safe

    first, _ = Connect4Env(num_envs=2000, seed=3, opponent=opponent, agent_first=True).reset()
    np.testing.assert_array_equal(first[:, :7], 1)
    assert not first[:, 7:].any()
    coin, _ = Connect4Env(num_envs=2000, seed=3, opponent=opponent).reset()
    agent_first = ~coin[:, 7:].any(1)
    assert abs(agent_first.mean() - 0.5) < 5 * np.sqrt(0.25 / 2000)


def fill_column_zero(env):
    """Play column 0 (starting new games as needed) until it is full in a live game."""
    observations, _ = env.reset(seed=4)
    while masks_of(env, observations)[0, 0]:
        observations = env.step(np.zeros(1, np.int32))[0]
    return observations


def test_illegal_move_is_rejected_before_any_env_moves():
    env = Connect4Env(num_envs=1, seed=0, agent_first=True)
    observations = fill_column_zero(env).copy()
    with pytest.raises(ValueError, match=r"column 0 of env 0 is full.*action_mask.*illegal_move='lose'"):
        env.step(np.zeros(1, np.int32))
    np.testing.assert_array_equal(env.observations, observations)
    legal = np.flatnonzero(masks_of(env, observations)[0])[:1].astype(np.int32)
    env.step(legal)  # the game goes on

    batch = Connect4Env(num_envs=3, seed=0, opponent="random", agent_first=True)
    batch.reset()
    for _ in range(3):
        batch.step(np.array([1, 0, 1], np.int32))  # env 1: the opponent may add to column 0 too
    while masks_of(batch, batch.observations)[1, 0]:
        batch.step(np.array([2, 0, 2], np.int32))
    before = batch.observations.copy()
    with pytest.raises(ValueError, match="column 0 of env 1 is full"):
        batch.step(np.array([3, 0, 3], np.int32))
    np.testing.assert_array_equal(batch.observations, before)


def test_illegal_move_loses_when_asked():
    env = Connect4Env(num_envs=1, seed=0, agent_first=True, illegal_move="lose")
    board = fill_column_zero(env)[0, 7:].copy()
    observations, rewards, terminals, truncations, info = env.step(np.zeros(1, np.int32))
    assert (rewards[0], terminals[0], truncations[0]) == (-1.0, True, False)
    assert (info["loss_rate"], info["illegal_move_rate"], info["win_rate"], info["draw_rate"]) == (1.0, 1.0, 0.0, 0.0)
    np.testing.assert_array_equal(env.final_observations[0, 7:], board)  # the illegal piece went nowhere
    np.testing.assert_array_equal(observations[0], np.r_[np.ones(7), np.zeros(84)])  # a new game


def test_check_env_through_gymnasium_view():
    for kwargs in ({}, {"opponent": "random", "agent_first": False}):
        env = Connect4Env(num_envs=1, seed=0, render_mode="ansi", **kwargs)
        check_env(GymnasiumView(env), skip_render_check=False)
        env.close()


def test_same_seed_same_games_and_env_indices_differ():
    kwargs = {"num_envs": 4, "opponent": "random", "agent_first": True}
    a, b = rollout(Connect4Env(**kwargs), 60, seed=5), rollout(Connect4Env(**kwargs), 60, seed=5)
    assert_same_frames(a, b)
    boards = np.stack([frame for frame in a[1::5]])  # [steps, envs, 91]
    assert not np.array_equal(boards[:, 0], boards[:, 1]), "env 0 and env 1 played the same games"
    other = rollout(Connect4Env(**kwargs), 60, seed=6)
    assert not np.array_equal(np.stack(a[1::5]), np.stack(other[1::5]))


def test_serial_and_threads_backends_give_identical_games():
    frames = {}
    for backend, workers in (("serial", None), ("threads", 2)):
        vector = puffercore.vector.make(Connect4Env, 8, backend=backend, num_workers=workers, seed=0, opponent="heuristic")
        assert vector.observation_tree is not None
        frames[backend] = rollout(vector, 80, seed=7)
        vector.close()
    assert_same_frames(frames["serial"], frames["threads"])
    assert sum(frame.get("episodes", 0) for frame in frames["serial"][5::5]) > 20


def test_threads_backend_rejects_illegal_moves_too():
    vector = puffercore.vector.make(Connect4Env, 2, backend="threads", num_workers=2, seed=0, agent_first=True)
    observations, _ = vector.reset()
    while masks_of(vector, observations)[1, 4]:
        first_legal = int(masks_of(vector, observations)[0].argmax())
        observations = vector.step(np.array([first_legal, 4], np.int32))[0]
    with pytest.raises(ValueError, match="column 4 of env 1 is full"):
        vector.step(np.array([masks_of(vector, observations)[0].argmax(), 4], np.int32))
    vector.close()


def test_serial_vector_names_the_vector_env_of_an_illegal_move():
    vector = puffercore.vector.make(Connect4Env, 3, backend="serial", seed=0, agent_first=True)
    observations, _ = vector.reset()
    while masks_of(vector, observations)[2, 5]:
        first_legal = masks_of(vector, observations).argmax(1).astype(np.int32)
        observations = vector.step(np.r_[first_legal[:2], 5].astype(np.int32))[0]
    with pytest.raises(ValueError, match="column 5 of env 2 is full"):
        vector.step(np.r_[masks_of(vector, observations)[:2].argmax(1), 5].astype(np.int32))
    vector.close()


def test_threads_staggered_batches_reject_illegal_moves():
    """A batch of units that are not contiguous writes its actions unit by unit through
    the env too, so it is checked alike and nothing steps when a move is illegal. Which
    batches come out staggered depends on thread timing, so the batch is routed through
    that path by hand (`_batch_is_block`, set by recv)."""
    vector = puffercore.vector.make(Connect4Env, 8, backend="threads", num_workers=2, batch_size=4, seed=0,
                                    opponent="random", agent_first=True)
    vector.async_reset()
    rng = np.random.default_rng(0)
    rejected = 0
    while rejected < 20:
        observations, _, _, _, _, env_ids, _ = vector.recv()
        vector._batch_is_block = False
        masks = masks_of(vector, observations)
        legal = random_legal_actions(masks, rng)
        full = np.flatnonzero(~masks.all(1))
        if len(full):  # play a full column in the last env that has one
            illegal = legal.copy()
            illegal[full[-1]] = np.argmin(masks[full[-1]])
            before = vector.observations[env_ids].copy()  # the other batch is stepping meanwhile
            with pytest.raises(ValueError, match=f"column {illegal[full[-1]]} of env {env_ids[full[-1]]} is full"):
                vector.send(illegal)
            np.testing.assert_array_equal(vector.observations[env_ids], before)
            rejected += 1
        vector.send(legal)
    vector.close()


def test_observation_tree_reads_the_masks_and_boards_as_views():
    env = Connect4Env(num_envs=3, seed=0, agent_first=False)
    observations, _ = env.reset()
    tree = env.observation_tree
    assert tree.flat_space == env.single_observation_space
    assert (tree.leaf("action_mask").start, tree.leaf("action_mask").stop) == (0, 7)
    leaves = tree.unflatten(observations)
    assert leaves["action_mask"].shape == (3, 7) and leaves["board"].shape == (3, 2, ROWS, COLS)
    assert np.shares_memory(leaves["board"], observations)
    assert (leaves["board"][:, 1].sum((1, 2)) == 1).all()  # the opponent's opening piece, its plane


def test_render_shows_the_board_and_the_seats():
    env = Connect4Env(num_envs=1, seed=0, render_mode="ansi", agent_first=True)
    env.reset()
    env.step(np.array([3], np.int32))
    lines = env.render().splitlines()
    assert len(lines) == ROWS + 2
    assert lines[ROWS - 1].split()[3] == "X"  # the agent's first piece, bottom row
    assert lines[ROWS - 1].count("O") == 1
    assert lines[ROWS] == "0 1 2 3 4 5 6"
    assert lines[-1] == "agent X, heuristic opponent O"
    assert Connect4Env(num_envs=1).render() is None


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"opponent": "minimax"}, ValueError, "opponent must be one of"),
        ({"opponent": 1}, ValueError, "opponent"),
        ({"agent_first": "yes"}, TypeError, "agent_first"),
        ({"agent_first": 1}, TypeError, "agent_first"),
        ({"illegal_move": "skip"}, ValueError, "illegal_move"),
        ({"colour": "red"}, TypeError, "colour"),
        ({"num_envs": 0}, ValueError, "num_envs"),
        ({"num_envs": -2}, ValueError, "num_envs"),
        ({"num_envs": 2.0}, TypeError, "num_envs"),
        ({"render_mode": "rgb_array"}, ValueError, "render_mode"),
    ],
)
def test_bad_config_is_rejected(kwargs, error, match):
    with pytest.raises(error, match=match):
        Connect4Env(**kwargs)


@pytest.mark.parametrize(
    "actions, error, match",
    [
        (np.array([7, 0], np.int32), ValueError, "out of range"),
        (np.array([-1, 0], np.int32), ValueError, "out of range"),
        (np.zeros(3, np.int32), ValueError, "shape"),
        (np.zeros(2, np.float32), TypeError, "integers"),
    ],
)
def test_bad_actions_are_rejected(actions, error, match):
    env = Connect4Env(num_envs=2, illegal_move="lose")
    env.reset()
    with pytest.raises(error, match=match):
        env.step(actions)
