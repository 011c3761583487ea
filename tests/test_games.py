"""Rules of the C games behind puffercore.games, checked against hand-played positions
and a plain-Python reference."""

import numpy as np
import pytest

from puffercore.games import Azul, Connect4, Game, GameState, Pig, TicTacToe

# A full Connect4 board without four in a row (found by random search, checked below).
DRAWN_CONNECT4 = [3, 6, 1, 3, 1, 3, 6, 4, 5, 5, 3, 4, 3, 1, 1, 0, 4, 3, 0, 4, 6, 6, 2, 6, 1, 0, 5,
                  5, 2, 4, 5, 1, 5, 6, 0, 0, 2, 2, 4, 2, 2, 0]


def play(game, actions):
    state = game.new_state()
    for action in actions:
        state.apply(action)
    return state


def reference_connect4_winner(board):
    """Seat with four in a row on board[row][col] (0 empty, 1 + seat), else None."""
    for row in range(6):
        for col in range(7):
            owner = board[row][col]
            if owner == 0:
                continue
            for drow, dcol in ((0, 1), (1, 0), (1, 1), (1, -1)):
                cells = [(row + k * drow, col + k * dcol) for k in range(4)]
                if all(0 <= r < 6 and 0 <= c < 7 and board[r][c] == owner for r, c in cells):
                    return owner - 1
    return None


@pytest.mark.parametrize("moves, direction", [
    ([0, 0, 1, 1, 2, 2, 3], "horizontal"),
    ([0, 0, 1, 1, 3, 3, 2], "horizontal, completed in the middle"),
    ([0, 1, 0, 1, 0, 1, 0], "vertical"),
    ([0, 1, 1, 2, 2, 3, 2, 3, 3, 5, 3], "diagonal up-right"),
    ([6, 5, 5, 4, 4, 3, 4, 3, 3, 1, 3], "diagonal up-left"),
])
def test_connect4_first_player_wins_in_every_direction(moves, direction):
    before = play(Connect4(), moves[:-1])
    assert not before.is_terminal(), direction
    assert before.returns().tolist() == [0.0, 0.0]
    state = play(Connect4(), moves)
    assert state.is_terminal(), direction
    assert state.returns().tolist() == [1.0, -1.0]
    assert not state.legal_mask().any()
    assert state.legal_actions() == []


def test_connect4_second_player_wins():
    state = play(Connect4(), [6, 0, 6, 1, 5, 2, 4, 3])
    assert state.is_terminal()
    assert state.returns().tolist() == [-1.0, 1.0]


def test_connect4_full_board_is_a_draw():
    state = play(Connect4(), DRAWN_CONNECT4[:-1])
    assert not state.is_terminal()
    assert state.legal_actions() == [DRAWN_CONNECT4[-1]]
    state.apply(DRAWN_CONNECT4[-1])
    assert state.is_terminal()
    assert state.returns().tolist() == [0.0, 0.0]
    assert "." not in str(state).splitlines()[0]


def test_connect4_full_column_is_illegal():
    state = play(Connect4(), [0] * 6)
    assert not state.is_terminal()
    assert state.legal_mask().tolist() == [False] + [True] * 6
    with pytest.raises(ValueError, match="illegal"):
        state.apply(0)
    with pytest.raises(ValueError, match="game is over"):
        play(Connect4(), [0, 1, 0, 1, 0, 1, 0]).apply(3)


def test_connect4_matches_reference_over_random_games():
    rng = np.random.default_rng(0)
    game = Connect4()
    for _ in range(200):
        state = game.new_state()
        board = [[0] * 7 for _ in range(6)]
        heights = [0] * 7
        while True:
            winner = reference_connect4_winner(board)
            full = all(h == 6 for h in heights)
            assert state.is_terminal() == (winner is not None or full)
            if state.is_terminal():
                expected = [0.0, 0.0] if winner is None else [1.0 if s == winner else -1.0 for s in (0, 1)]
                assert state.returns().tolist() == expected
                break
            assert state.legal_mask().tolist() == [h < 6 for h in heights]
            col = int(rng.choice(state.legal_actions()))
            board[heights[col]][col] = 1 + state.current_player()
            heights[col] += 1
            state.apply(col)


def test_connect4_observation_is_from_the_players_perspective():
    state = play(Connect4(), [3, 4, 3])  # X at (0,3), (1,3); O at (0,4); O to move
    assert state.current_player() == 1
    mine, theirs = state.observation(0)
    assert mine.shape == (6, 7)
    assert mine[0, 3] == mine[1, 3] == 1 and mine.sum() == 2
    assert theirs[0, 4] == 1 and theirs.sum() == 1
    assert np.array_equal(state.observation(1), state.observation(0)[::-1])
    assert np.array_equal(state.observation(), state.observation(1))
    assert state.observation().dtype == np.float32


def test_connect4_render():
    text = str(play(Connect4(), [3, 4]))
    assert text.splitlines()[-2] == ". . . X O . ."
    assert text.splitlines()[-1] == "0 1 2 3 4 5 6"
    assert len(text.splitlines()) == 7


@pytest.mark.parametrize("moves, winner", [
    ([0, 3, 1, 4, 2], 0),          # top row
    ([0, 1, 3, 2, 6], 0),          # left column
    ([0, 1, 4, 2, 8], 0),          # main diagonal
    ([0, 2, 1, 4, 3, 6], 1),       # anti-diagonal for O
    ([0, 1, 3, 4, 8, 7], 1),       # middle column for O
])
def test_tictactoe_wins(moves, winner):
    state = play(TicTacToe(), moves)
    assert state.is_terminal()
    expected = [1.0, -1.0] if winner == 0 else [-1.0, 1.0]
    assert state.returns().tolist() == expected
    assert not play(TicTacToe(), moves[:-1]).is_terminal()


def test_tictactoe_draw_and_rules():
    state = play(TicTacToe(), [0, 1, 2, 4, 3, 5, 7, 6, 8])
    assert state.is_terminal() and state.returns().tolist() == [0.0, 0.0]
    assert str(state) == "X O X\nX O O\nO X X\n"
    state = play(TicTacToe(), [4])
    assert state.legal_actions() == [0, 1, 2, 3, 5, 6, 7, 8]
    with pytest.raises(ValueError, match="illegal"):
        state.apply(4)
    mine, theirs = state.observation(1)
    assert mine.sum() == 0 and theirs[1, 1] == 1


ROLL, HOLD = 0, 1


def pig_turn_total(state):
    return round(float(state.observation()[4]) * 20)


def test_pig_rolls_are_fair_dice_from_the_state_rng():
    outcomes = []
    for seed in range(1200):
        state = Pig().new_state(seed=seed, num_players=3)
        state.apply(ROLL)
        if state.current_player() == 1:  # rolled a 1: turn total lost, turn passed
            assert pig_turn_total(state) == 0
            outcomes.append(1)
        else:
            outcomes.append(pig_turn_total(state))
    counts = np.bincount(outcomes, minlength=7)[1:]
    assert counts.sum() == 1200 and (np.abs(counts - 200) < 50).all()
    a, b = Pig().new_state(seed=5), Pig().new_state(seed=5)
    copy = a.clone()
    for _ in range(10):
        for state in (a, b, copy):
            state.apply(ROLL)
    assert a == b == copy


def test_pig_hold_banks_and_passes_the_turn_in_order():
    state = Pig().new_state(seed=0, num_players=4)
    seen = []
    for _ in range(12):
        player = state.current_player()
        seen.append(player)
        while state.current_player() == player and pig_turn_total(state) == 0:
            state.apply(ROLL)  # until something is at stake or the turn is lost
        if state.current_player() == player:
            total = pig_turn_total(state)
            before = state.observation(player)[0] * 20
            state.apply(HOLD)
            assert round(float(state.observation(player)[0]) * 20) == round(before) + total
        assert state.current_player() == (player + 1) % 4
    assert seen == [0, 1, 2, 3] * 3


def pig_rolled_to_target(num_players):
    """A Pig position where player 0 has a turn total >= 20 (and so wins by holding)."""
    for seed in range(10_000):
        state = Pig().new_state(seed=seed, num_players=num_players)
        while state.current_player() == 0 and pig_turn_total(state) < 20:
            state.apply(ROLL)
        if state.current_player() == 0:
            return state
    raise AssertionError("no seed rolled to the target")


def test_pig_first_to_target_wins_and_returns_are_zero_sum():
    state = pig_rolled_to_target(3)
    assert not state.is_terminal() and state.returns().tolist() == [0.0, 0.0, 0.0]
    total = pig_turn_total(state)
    state.apply(HOLD)
    assert state.is_terminal()
    assert state.returns().tolist() == [1.0, -0.5, -0.5]
    assert not state.legal_mask().any()
    assert str(state).startswith(f"scores {total} 0 0 |")


def test_pig_hold_needs_a_turn_total():
    state = Pig().new_state(seed=0)
    assert state.legal_actions() == [ROLL]
    with pytest.raises(ValueError, match="illegal"):
        state.apply(HOLD)
    while pig_turn_total(state) == 0:
        state.apply(ROLL)
    assert state.legal_actions() == [ROLL, HOLD]


def test_pig_ends_at_the_move_cap():
    state = Pig().new_state(num_players=2)
    for _ in range(Pig().max_moves):  # never holding, nobody scores
        state.apply(ROLL)
    assert state.is_terminal() and state.returns().tolist() == [0.0, 0.0]


def test_pig_observation_and_metadata():
    game = Pig()
    assert (game.num_actions, game.observation_shape, game.min_players, game.max_players) == (2, (9,), 2, 4)
    state = game.new_state(num_players=3)
    assert state.num_players == 3 and len(state.returns()) == 3
    assert state.observation(0)[5:].tolist() == [1, 0, 0, 0]   # the mover is the observer
    assert state.observation(1)[5:].tolist() == [0, 0, 1, 0]   # two seats after player 1
    assert str(state) == "scores 0 0 0 | player 0 to move, turn total 0\n"
    for bad in (1, 5):
        with pytest.raises(ValueError, match="num_players"):
            game.new_state(num_players=bad)


def test_clone_is_independent():
    original = play(Connect4(), [3, 3])
    copy = original.clone()
    assert copy == original
    copy.apply(2)
    assert copy != original
    assert original.legal_actions() == list(range(7)) and original.current_player() == 0
    assert str(original).count("X") == 1


def test_game_metadata():
    game = Connect4()
    assert (game.name, game.num_actions, game.observation_shape) == ("connect4", 7, (2, 6, 7))
    assert (game.observation_size, game.min_players, game.max_players, game.max_moves) == (84, 2, 2, 42)
    assert TicTacToe().observation_shape == (2, 3, 3)
    assert Connect4() == game and Connect4() != TicTacToe()
    assert game.new_state().num_players == 2


def test_bad_inputs_raise_clear_errors():
    state = Connect4().new_state()
    with pytest.raises(TypeError, match="action must be an int"):
        state.apply("3")
    with pytest.raises(TypeError, match="action must be an int"):
        state.apply(True)
    with pytest.raises(TypeError, match="action must be an int"):
        state.apply(2.0)
    for action in (-1, 7):
        with pytest.raises(ValueError, match=r"action must be an int in \[0, 6\]"):
            state.apply(action)
    with pytest.raises(ValueError, match="player"):
        state.observation(2)
    with pytest.raises(ValueError, match="seed"):
        Connect4().new_state(seed=-1)
    with pytest.raises(ValueError, match="num_players"):
        Connect4().new_state(num_players=3)
    with pytest.raises(TypeError, match="new_state"):
        GameState()
    with pytest.raises(TypeError, match="PyCapsule"):
        Game(object())
    assert state == Connect4().new_state()  # nothing above changed it


@pytest.mark.parametrize("game", [Connect4(), TicTacToe()], ids=lambda game: game.name)
def test_symmetries_map_positions_to_positions(game):
    """Playing the mapped moves gives the mapped observations and legal masks: the
    position seen through a symmetry is the position reached by the mirrored game."""
    assert game.symmetries
    rng = np.random.default_rng(0)
    for observation_map, action_map in game.symmetries:
        assert sorted(observation_map) == list(range(game.observation_size))
        assert sorted(action_map) == list(range(game.num_actions))
        moved_to = np.argsort(action_map)  # the mapped game's move for each original move
        for _ in range(10):
            state, mapped = game.new_state(), game.new_state()
            while not state.is_terminal():
                np.testing.assert_array_equal(mapped.observation().ravel(), state.observation().ravel()[observation_map])
                np.testing.assert_array_equal(mapped.legal_mask(), state.legal_mask()[action_map])
                action = rng.choice(state.legal_actions())
                state.apply(action)
                mapped.apply(moved_to[action])
            np.testing.assert_array_equal(mapped.returns(), state.returns())


def test_games_without_symmetries_say_so():
    assert Pig().symmetries == () and Azul().symmetries == ()
