"""Azul's rules (native/include/puffercore/games/azul.h) on hand-built positions, over
random games, and under the searches and bots."""

import os
import random
import sys

import numpy as np
import pytest

from puffercore.alphazero import BatchedMCTS, GreedyAzulAgent, MCTSBaseline, RandomAgent, uniform_evaluator
from puffercore.azul import BLACK, BLUE, CENTRE, FLOOR, RED, WHITE, YELLOW, Azul, random_games
from puffercore.games import Connect4

sys.path.insert(0, os.path.dirname(__file__))  # pytest's importlib mode leaves tests/ off the path
import azul_reference as reference  # noqa: E402

GAME = Azul()
take = Azul.action


def blank(num_players=2):
    """Fields of an empty table in round 1: no tile anywhere yet (finish() adds the rest)."""
    fields = GAME.new_state(seed=0, num_players=num_players).fields()
    fields["factories"][:] = 0
    fields["bag"][:] = 0
    return fields


def tiles_by_color(fields):
    """Tiles of each colour anywhere in the game, counted in Python from the fields."""
    counts = fields["bag"] + fields["lid"] + fields["centre"] + fields["factories"].sum(0) + fields["floor"].sum(0)
    for seat in range(fields["num_players"]):
        for row in range(5):
            if fields["line_count"][seat, row]:
                counts[fields["line_color"][seat, row]] += fields["line_count"][seat, row]
            for col in np.flatnonzero(fields["wall"][seat, row]):
                counts[(col - row) % 5] += 1
    return counts


def finish(fields, rest="bag"):
    """The state of `fields` with the tiles not placed anywhere put in `rest` (bag or lid)."""
    fields[rest] = fields[rest] + 20 - tiles_by_color(fields)
    return GAME.state_from_fields(fields)


def last_move_of_round(fields, color, destination, count=1, rest="bag"):
    """Player 0 takes `count` tiles of `color`, the only tiles left on the table, to
    `destination`: the round ends. Returns the fields after it."""
    fields["factories"][0, color] = count
    state = finish(fields, rest)
    state.apply(take(0, color, destination))
    return state.fields()


# ---- wall scoring ---------------------------------------------------------------------------

def test_isolated_tile_scores_one():
    after = last_move_of_round(blank(), BLUE, 0)
    assert after["wall"][0, 0].tolist() == [True, False, False, False, False]
    assert after["score"].tolist() == [1, 0]
    assert after["line_count"][0].tolist() == [0] * 5 and after["line_color"][0].tolist() == [-1] * 5


def test_row_run_counts_only_adjacent_tiles():
    fields = blank()
    fields["wall"][0, 2, [0, 1, 3]] = True    # row 2: tiles in columns 0, 1, 3; red goes in column 4
    fields["line_color"][0, 2], fields["line_count"][0, 2] = RED, 2  # one red tile short
    after = last_move_of_round(fields, RED, 2)
    assert after["wall"][0, 2].tolist() == [True, True, False, True, True]
    assert after["score"][0] == 2               # run of columns 3-4 only: column 2 is empty


def test_row_run_through_the_middle():
    fields = blank()
    fields["wall"][0, 1, [0, 1, 3]] = True    # row 1: yellow goes in column 2, joining 0-1 and 3
    fields["line_color"][0, 1], fields["line_count"][0, 1] = YELLOW, 1
    after = last_move_of_round(fields, YELLOW, 1)
    assert after["score"][0] == 4


def test_column_run_scores_its_length():
    fields = blank()
    fields["wall"][0, [0, 1, 3], 3] = True    # column 3, rows 0, 1, 3; row 2's column 3 is yellow
    fields["line_color"][0, 2], fields["line_count"][0, 2] = YELLOW, 2
    after = last_move_of_round(fields, YELLOW, 2)
    assert after["wall"][0, :, 3].tolist() == [True, True, True, True, False]
    assert after["score"][0] == 4


def test_row_and_column_runs_add_up():
    fields = blank()
    fields["wall"][0, 2, [0, 1]] = True       # row 2: columns 0-1; blue goes in column 2
    fields["wall"][0, [0, 1], 2] = True       # column 2: rows 0-1
    fields["wall"][0, 4, 2] = True            # not adjacent: row 3 of column 2 stays empty
    fields["line_color"][0, 2], fields["line_count"][0, 2] = BLUE, 2
    after = last_move_of_round(fields, BLUE, 2)
    assert after["score"][0] == 3 + 3


def test_lines_are_tiled_top_first_and_score_the_tiles_above():
    fields = blank()
    fields["line_color"][0, 0], fields["line_count"][0, 0] = BLUE, 1   # already full: (0, 0)
    fields["line_color"][0, 1], fields["line_count"][0, 1] = WHITE, 1  # completed by the move: (1, 0)
    after = last_move_of_round(fields, WHITE, 1)
    assert after["score"][0] == 1 + 2   # the second tile sees the first above it
    assert after["lid"][WHITE] == 1     # the rest of line 1 goes to the lid


def test_unfinished_lines_stay_for_the_next_round():
    fields = blank()
    fields["line_color"][0, 3], fields["line_count"][0, 3] = BLACK, 2
    after = last_move_of_round(fields, BLACK, 4, count=4, rest="lid")
    assert after["line_count"][0].tolist() == [0, 0, 0, 2, 4]
    assert after["line_color"][0].tolist() == [-1, -1, -1, BLACK, BLACK]
    assert after["score"].tolist() == [0, 0]


# ---- floor -------------------------------------------------------------------------------------

@pytest.mark.parametrize("slots, penalty", [(0, 0), (1, 1), (2, 2), (3, 4), (4, 6), (5, 8), (6, 11), (7, 14)])
def test_floor_penalties(slots, penalty):
    fields = blank()
    fields["score"][0] = 30
    fields["floor"][0, RED] = slots
    after = last_move_of_round(fields, BLUE, 0)
    assert after["score"][0] == 30 + 1 - penalty
    assert after["floor"][0].tolist() == [0] * 5 and after["lid"][RED] == slots


def test_marker_fills_a_floor_slot_and_moves_its_holder_first():
    fields = blank()
    fields["score"][0] = 30
    fields["floor"][0, RED] = 2
    fields["centre"][YELLOW] = 1
    fields["player"] = 0
    state = finish(fields)
    state.apply(take(CENTRE, YELLOW, 0))        # first from the centre: takes the marker
    after = state.fields()
    assert after["score"][0] == 30 + 1 - (1 + 1 + 2)
    assert after["player"] == 0 and after["round_starter"] == 0 and after["marker_holder"] == -1
    assert after["factories"].sum() == 20 and after["round"] == 2


def test_only_the_first_to_take_from_the_centre_gets_the_marker():
    fields = blank()
    fields["centre"][[RED, BLUE]] = 1
    fields["factories"][0, BLACK] = 1   # keeps the round going
    state = finish(fields)
    state.apply(take(CENTRE, RED, FLOOR))
    state.apply(take(CENTRE, BLUE, FLOOR))
    after = state.fields()
    assert after["marker_holder"] == 0
    assert after["floor"].tolist() == [[0, 0, 1, 0, 0], [1, 0, 0, 0, 0]]
    assert "has the first-player marker" in str(state).split("player 1:")[0]


def test_floor_overflow_goes_to_the_lid():
    fields = blank()
    fields["floor"][0, RED] = 5
    fields["factories"][0, BLUE] = 4
    fields["factories"][1, BLACK] = 1   # keeps the round going
    state = finish(fields)
    state.apply(take(0, BLUE, 0))       # 1 on line 0, 3 overflow: 2 fit on the floor, 1 to the lid
    after = state.fields()
    assert after["line_count"][0, 0] == 1
    assert after["floor"][0].tolist() == [2, 0, 5, 0, 0]
    assert after["lid"][BLUE] == 1


def test_marker_on_a_full_floor_costs_nothing_more():
    fields = blank()
    fields["score"][0] = 30
    fields["floor"][0, RED] = 7
    fields["centre"][BLUE] = 2
    fields["factories"][0, BLACK] = 1
    state = finish(fields)
    state.apply(take(CENTRE, BLUE, FLOOR))
    during = state.fields()
    assert during["marker_holder"] == 0 and during["lid"][BLUE] == 2 and during["floor"][0].sum() == 7
    state.apply(take(0, BLACK, FLOOR))  # player 1 ends the round
    after = state.fields()
    assert after["score"][0] == 30 - 14 and after["player"] == 0


def test_score_never_drops_below_zero():
    fields = blank()
    fields["score"][0] = 3
    fields["floor"][0, RED] = 6
    after = last_move_of_round(fields, BLUE, FLOOR)
    assert after["score"][0] == 0


# ---- end of the game ---------------------------------------------------------------------------

def test_end_of_game_bonuses_for_rows_columns_and_colours():
    fields = blank()
    fields["score"][:] = [40, 10]
    wall = fields["wall"][0]
    wall[0, 1:] = True                  # row 0 short of blue in column 0
    wall[1:, 0] = True                  # column 0 short of row 0
    for row in range(1, 5):             # blue everywhere but row 0
        wall[row, row] = True
    after = last_move_of_round(fields, BLUE, 0)
    assert after["game_over"]
    assert after["score"][0] == 40 + (5 + 5) + (2 + 7 + 10)   # runs of 5 and 5, then row, column, blue
    assert after["score"][1] == 10
    state = GAME.state_from_fields(after)
    assert state.is_terminal() and not state.legal_mask().any()
    assert state.winners() == [0] and state.scores() == [69, 10]
    np.testing.assert_allclose(state.returns(), [(69 - 39.5) / 100, (10 - 39.5) / 100], rtol=1e-6)
    assert "game over" in str(state)


def test_no_complete_row_means_another_round():
    fields = blank()
    fields["wall"][0, 0, 1:4] = True     # four in row 0, blue's column 0 still free
    after = last_move_of_round(fields, RED, 1, count=1)
    assert not after["game_over"] and after["round"] == 2


@pytest.mark.parametrize("rows_0, rows_1, winners", [(1, 0, [0]), (0, 2, [1]), (1, 1, [0, 1])])
def test_score_ties_go_to_more_complete_rows_then_are_shared(rows_0, rows_1, winners):
    fields = blank()
    fields["score"][:] = 50
    fields["game_over"] = True
    fields["wall"][0, :rows_0] = True
    fields["wall"][1, :rows_1] = True
    state = finish(fields)
    assert state.is_terminal()
    assert state.winners() == winners
    assert state.returns().tolist() == [0.0, 0.0]  # returns follow scores only


def test_returns_are_score_minus_mean_over_100_and_zero_sum():
    for num_players in (2, 3, 4):
        state = GAME.new_state(seed=num_players, num_players=num_players)
        agent = GreedyAzulAgent()
        while not state.is_terminal():
            state.apply(agent.act(state))
        scores = np.array(state.scores(), dtype=np.float64)
        np.testing.assert_allclose(state.returns(), (scores - scores.mean()) / 100, atol=1e-6)
        assert abs(state.returns().sum()) < 1e-5
        best = state.winners()
        assert all(scores[seat] == scores.max() for seat in best)


@pytest.mark.parametrize("scores, expected", [
    ([10, 20], [-0.05, 0.05]),
    ([10, 10, 10], [0.0, 0.0, 0.0]),
    ([0, 30, 60, 90], [-0.45, -0.15, 0.15, 0.45]),
])
def test_returns_of_hand_set_scores(scores, expected):
    fields = blank(len(scores))
    fields["score"][:] = scores
    fields["game_over"] = True
    np.testing.assert_allclose(finish(fields).returns(), expected, atol=1e-6)


def test_the_move_cap_ends_the_game():
    fields = blank()
    fields["moves"] = GAME.max_moves - 1
    fields["factories"][0, RED] = 1
    fields["factories"][1, BLUE] = 1
    state = finish(fields)
    state.apply(take(0, RED, FLOOR))
    assert state.is_terminal() and not state.fields()["game_over"] and not state.legal_actions()


# ---- the bag, the lid and the factories --------------------------------------------------

def test_bag_is_refilled_from_the_lid():
    fields = blank()
    fields["bag"][[RED, BLUE, WHITE]] = 1
    fields["wall"][0, 0, 0] = fields["wall"][1, 3, 4] = True   # a few tiles off the table
    after = last_move_of_round(fields, YELLOW, FLOOR, rest="lid")
    assert after["factories"].sum(axis=1).tolist() == [4] * 5
    assert after["lid"].sum() == 0                     # all moved into the bag
    assert after["bag"].sum() == 100 - 2 - 20          # the walls' 2 and the factories' 20 are out
    assert tiles_by_color(after).tolist() == [20] * 5


def test_factories_fill_as_far_as_tiles_last():
    fields = blank(4)
    for seat in range(4):
        for row in range(5):              # row r misses colour r (column 2r mod 5): 4 of each colour per seat
            fields["wall"][seat, row] = True
            fields["wall"][seat, row, (2 * row) % 5] = False
    for row in range(1, 5):               # line r holds r tiles of colour r (one short)
        fields["line_color"][0, row], fields["line_count"][0, row] = row, row
    fields["bag"][[BLUE, YELLOW]] = [3, 3]
    fields["lid"][[RED, BLACK]] = [1, 1]  # with the blue taken to the floor: 10 tiles in play
    after = last_move_of_round(fields, BLUE, FLOOR, rest="lid")
    assert not after["game_over"]
    assert after["factories"].sum(axis=1).tolist() == [4, 4, 2, 0, 0, 0, 0, 0, 0]
    assert after["factories"].sum(axis=0).tolist() == [4, 3, 2, 1, 0]
    assert after["bag"].sum() == after["lid"].sum() == 0


def test_a_round_nobody_took_from_the_centre_is_started_by_the_same_player():
    fields = blank()
    fields["player"] = fields["round_starter"] = 1
    fields["factories"][0, RED] = 4
    state = finish(fields)
    state.apply(take(0, RED, 3))          # a single-colour factory: nothing reaches the centre
    after = state.fields()
    assert after["round"] == 2 and after["marker_holder"] == -1
    assert after["player"] == after["round_starter"] == 1


def test_a_round_without_tiles_to_draw_ends_the_game():
    fields = blank(4)
    for seat in range(4):                 # seat p's row r misses colour (r + p) % 5
        for row in range(5):
            fields["wall"][seat, row] = True
            fields["wall"][seat, row, (2 * row + seat) % 5] = False
    for color in range(5):                # the other 4 tiles of each colour sit on unfinished lines
        rows = {seat: (color - seat) % 5 for seat in range(4)}
        for seat, row in rows.items():
            if row:
                fields["line_color"][seat, row] = color
                fields["line_count"][seat, row] += 1
        if 0 in rows.values():
            widest = max(rows, key=rows.get)
            fields["line_count"][widest, rows[widest]] += 1
    assert fields["line_count"][0, 4] == 1 and fields["line_color"][0, 4] == WHITE
    fields["line_count"][0, 4], fields["line_color"][0, 4] = 0, -1   # player 0 lays that tile now
    after = last_move_of_round(fields, WHITE, 4, rest="lid")
    assert after["bag"].sum() == after["lid"].sum() == after["factories"].sum() == 0
    assert after["game_over"] and after["score"].tolist() == [0, 0, 0, 0]
    assert not after["wall"].all(axis=2).any() and after["line_count"][0, 4] == 1


def test_a_factory_move_sends_the_rest_to_the_centre():
    state = GAME.new_state(seed=3)
    factory = state.fields()["factories"][0]
    color = int(np.flatnonzero(factory)[0])
    state.apply(take(0, color, FLOOR))
    after = state.fields()
    rest = factory.copy()
    rest[color] = 0
    assert after["factories"][0].sum() == 0
    assert after["centre"].tolist() == rest.tolist()
    assert after["floor"][0, color] == factory[color] and after["player"] == 1


# ---- legality ---------------------------------------------------------------------------------

def test_legal_moves_follow_the_line_and_wall_rules():
    fields = blank()
    fields["factories"][0, [BLUE, RED]] = [2, 2]
    fields["wall"][0, 1, 1] = True                                    # blue is in wall row 1
    fields["line_color"][0, 2], fields["line_count"][0, 2] = RED, 1    # line 2 holds red
    fields["line_color"][0, 0], fields["line_count"][0, 0] = YELLOW, 1  # line 0 is full
    state = finish(fields)
    legal = set(state.legal_actions())
    assert take(0, BLUE, 1) not in legal            # colour already in that wall row
    assert take(0, BLUE, 2) not in legal            # line holds another colour
    assert take(0, RED, 2) in legal and take(0, RED, 3) in legal
    assert take(0, BLUE, 0) not in legal and take(0, RED, 0) not in legal  # full line
    assert take(0, BLUE, FLOOR) in legal and take(0, RED, FLOOR) in legal
    assert take(0, YELLOW, 3) not in legal          # no yellow on factory 0
    assert take(5, BLUE, 3) not in legal            # a 2-player game has factories 0-4 only
    assert len(legal) == 3 + 5                      # blue: lines 3, 4, floor; red: lines 1-4, floor
    with pytest.raises(ValueError, match="illegal"):
        state.apply(take(0, BLUE, 1))


def test_no_colour_twice_in_a_wall_row_over_random_games():
    # azul_invalid checks every position reached: 20 tiles per colour, lines vs walls, ranges.
    for num_players in (2, 3, 4):
        result = random_games(1000, num_players, seed=num_players)
        assert result["invalid"] is None, result
        assert result["capped"] <= 1 and result["moves"] > 60 * 1000


# ---- conservation, determinism, player counts ---------------------------------------------

def test_tiles_are_conserved_in_python_over_random_games():
    for game_index in range(30):
        num_players = 2 + game_index % 3
        state = GAME.new_state(seed=game_index, num_players=num_players)
        agent = RandomAgent(seed=game_index)
        while not state.is_terminal():
            state.apply(agent.act(state))
            assert tiles_by_color(state.fields()).tolist() == [20] * 5
        assert state.fields()["game_over"]


DRAWN = ("bag", "lid", "factories")


def test_engine_matches_the_python_reference_move_by_move():
    """Every legal mask and every move of games half random, half greedy (which completes
    rows and earns bonuses) against tests/azul_reference.py; after a refill the draws
    differ, so there the table is checked by what it holds."""
    moves = refills = 0
    greedy = GreedyAzulAgent()
    for game_index in range(48):
        state = GAME.new_state(seed=game_index, num_players=2 + game_index % 3)
        picker = random.Random(game_index)
        while not state.is_terminal():
            expected = reference.to_lists(state.fields())
            assert state.legal_actions() == reference.legal_actions(expected)
            action = greedy.act(state) if picker.random() < 0.5 else picker.choice(state.legal_actions())
            round_before = expected["round"]
            state.apply(action)
            reference.apply(expected, action, random.Random(0))
            actual = reference.to_lists(state.fields())
            drew = actual["round"] != round_before
            for key in expected.keys() - {"rng"} - (set(DRAWN) if drew else set()):
                assert actual[key] == expected[key], (key, game_index, moves)
            if drew:
                table = [np.sum([f[k] for k in ("bag", "lid")], axis=0) + np.sum(f["factories"], axis=0)
                         for f in (actual, expected)]
                assert table[0].tolist() == table[1].tolist()
                assert np.sum(actual["factories"], axis=1).tolist() == np.sum(expected["factories"], axis=1).tolist()
                refills += 1
            moves += 1
        assert state.winners() == reference.winners(reference.to_lists(state.fields()))
    assert moves > 3000 and refills > 150


def test_python_reference_plays_whole_games():
    for num_players in (2, 3, 4):
        final = reference.random_game(num_players, seed=num_players)
        assert final["game_over"] and sum(final["bag"]) + sum(final["lid"]) <= 100


@pytest.mark.parametrize("num_players, factories", [(2, 5), (3, 7), (4, 9)])
def test_player_counts(num_players, factories):
    state = GAME.new_state(seed=1, num_players=num_players)
    fields = state.fields()
    assert fields["factories"].shape == (factories, 5)
    assert fields["factories"].sum(axis=1).tolist() == [4] * factories
    assert fields["bag"].sum() == 100 - 4 * factories
    assert {Azul.describe(a)[0] for a in state.legal_actions()} == set(range(factories))
    order = []
    for _ in range(num_players + 1):
        order.append(state.current_player())
        state.apply(state.legal_actions()[-1])   # floor moves: the round goes on
    assert order == list(range(num_players)) + [0]
    assert len(state.returns()) == num_players


def test_same_seed_same_game_and_other_seeds_draw_differently():
    def trajectory(seed):
        state, agent, seen = GAME.new_state(seed=seed, num_players=3), RandomAgent(seed=0), []
        while not state.is_terminal():
            state.apply(agent.act(state))
            seen.append(bytes(state))
        return seen

    assert trajectory(5) == trajectory(5)
    openings = {bytes(GAME.new_state(seed=s).fields()["factories"].tobytes()) for s in range(20)}
    assert len(openings) == 20
    assert GAME.new_state(seed=5).clone() == GAME.new_state(seed=5) != GAME.new_state(seed=6)


def test_observation_is_from_the_observers_perspective():
    assert GAME.observation_shape == (412,) and GAME.num_actions == 300 and GAME.max_players == 4
    state = GAME.new_state(seed=2, num_players=3)
    state.apply(take(0, int(np.flatnonzero(state.fields()["factories"][0])[0]), 4))
    shared, block = 68, 86
    mine = state.observation(0)
    seat1 = state.observation(1)
    assert np.array_equal(mine[shared:shared + block], seat1[shared + 2 * block:shared + 3 * block])
    assert np.array_equal(mine[:45], seat1[:45])            # factories are shared
    assert mine[shared:shared + 25].sum() > 0 and mine[shared + 3 * block:].sum() == 0
    assert mine[61 + 1] == 1 and seat1[61] == 1           # seat 1 to move, relative to each observer
    assert mine[65 + 1] == 1                                # 3 players
    assert ((0 <= mine) & (mine <= 1)).all()


@pytest.mark.parametrize("num_players", [2, 3, 4])
def test_observation_projects_this_rounds_wall_tiling(num_players):
    """Each seat's block ends with the score, wall bonus and game end that this round's
    wall-tiling would give now, the colours each pattern line takes and what finishing
    each unfinished line would score, checked against the Python rules at every move."""
    state, rng, shared, block = GAME.new_state(seed=7, num_players=num_players), random.Random(7), 68, 86
    checked_changes = 0
    while not state.is_terminal():
        tiled = reference.to_lists(state.fields())
        reference.tile_walls(tiled)
        observer = state.current_player()
        observation = state.observation(observer)
        for k in range(num_players):
            seat = (observer + k) % num_players
            start = shared + k * block + 50
            projected = observation[start + 3:start + 6].tolist()
            assert projected == pytest.approx([tiled["score"][seat] / 100,
                                               reference.end_bonus(tiled["wall"][seat]) / 100,
                                               float(any(all(row) for row in tiled["wall"][seat]))])
            checked_changes += tiled["score"][seat] != state.fields()["score"][seat]
            accepts = observation[start + 6:start + 31].reshape(5, 5)
            line_values = observation[start + 31:start + 36]
            for row in range(5):
                color, count = state.fields()["line_color"][seat, row], state.fields()["line_count"][seat, row]
                wall_row = state.fields()["wall"][seat, row]
                for c in range(5):
                    takes = (count == 0 and not wall_row[reference.wall_column(row, c)]) or \
                        (0 < count < row + 1 and c == color)
                    assert accepts[row, c] == takes
                expected = 0.0
                if 0 < count < row + 1:  # points and bonuses if the line were finished, on the tiled wall
                    wall = [list(cells) for cells in tiled["wall"][seat]]
                    before = reference.end_bonus(wall)
                    wall[row][reference.wall_column(row, color)] = True
                    expected = (reference.placement_points(wall, row, reference.wall_column(row, color))
                                + reference.end_bonus(wall) - before) / 20
                assert line_values[row] == pytest.approx(expected)
        state.apply(rng.choice(state.legal_actions()))
    assert checked_changes > 0


def test_render_shows_the_table_and_every_board():
    state = GAME.new_state(seed=0, num_players=3)
    text = str(state)
    assert text.startswith("round 1, move 0, player 0 to move\nfactories: 0:")
    assert text.count("\nplayer ") == 3 and text.count("score 0") == 3 and "centre (9): 1 -" in text
    assert text.endswith("lower case a free space\n")
    assert text.count("byrkw") == 3     # empty walls in lower case


# ---- search and bots ------------------------------------------------------------------------

@pytest.mark.parametrize("num_players", [2, 3, 4])
def test_searches_play_legal_moves(num_players):
    state = GAME.new_state(seed=num_players, num_players=num_players)
    mcts = BatchedMCTS(GAME, 2, num_simulations=32, seed=0)
    states = [state.clone(), GAME.new_state(seed=9, num_players=num_players)]
    for _ in range(2 * num_players):
        policies = mcts.search(states, uniform_evaluator)
        for i, current in enumerate(states):
            assert policies[i][~current.legal_mask()].sum() == 0
            action = mcts.choose_action(i, temperature=1.0)
            current.apply(action)
            mcts.advance(i, action)
    baseline = MCTSBaseline(simulations=64, seed=0)
    for _ in range(num_players):
        action = baseline.act(state)
        assert state.legal_mask()[action]
        state.apply(action)


def test_searches_play_whole_games_across_rounds():
    states = [GAME.new_state(seed=20 + k, num_players=2 + k) for k in range(3)]
    mcts = BatchedMCTS(GAME, 3, num_simulations=8, seed=1)
    while any(not state.is_terminal() for state in states):
        live = [None if state.is_terminal() else state for state in states]
        mcts.search(live, uniform_evaluator)
        for i, state in enumerate(live):
            if state is not None:
                action = mcts.choose_action(i, temperature=1.0)
                state.apply(action)
                mcts.advance(i, action)
    assert all(state.fields()["game_over"] and state.fields()["round"] >= 4 for state in states)
    state, baseline = GAME.new_state(seed=30), MCTSBaseline(simulations=16, seed=2)
    while not state.is_terminal():
        state.apply(baseline.act(state))
    assert state.fields()["game_over"]


def test_greedy_prefers_points_and_avoids_the_floor():
    fields = blank()
    fields["factories"][0, RED] = 3
    fields["factories"][1, BLUE] = 1
    fields["line_color"][0, 3], fields["line_count"][0, 3] = RED, 1
    fields["wall"][0, 2, 0] = True      # above red's spot in row 3: 2 points, more than the blue's 1
    state = finish(fields)
    assert GreedyAzulAgent().act(state) == take(0, RED, 3)
    fields = blank()
    fields["factories"][0, RED] = 4
    fields["factories"][1, YELLOW] = 2
    fields["wall"][0, 3, 0] = True      # red cannot go on line 3: every red move overflows or waits
    state = finish(fields)
    assert GreedyAzulAgent().act(state) == take(1, YELLOW, 1)


def test_greedy_beats_random():
    wins = 0
    for game_index in range(20):
        greedy_seat = game_index % 2
        agents = [RandomAgent(seed=game_index), RandomAgent(seed=game_index)]
        agents[greedy_seat] = GreedyAzulAgent()
        state = GAME.new_state(seed=game_index)
        while not state.is_terminal():
            state.apply(agents[state.current_player()].act(state))
        wins += state.winners() == [greedy_seat]
    assert wins == 20


# ---- bad input ------------------------------------------------------------------------------

def test_inconsistent_positions_are_refused():
    def refused(edit, message, rest="bag"):
        fields = blank()
        edit(fields)
        with pytest.raises(ValueError, match=message):
            finish(fields, rest) if rest else GAME.state_from_fields(fields)

    refused(lambda f: f["bag"].__setitem__(0, 5), "exactly 20 tiles", rest=None)
    refused(lambda f: (f["wall"][0, 0].__setitem__(0, True), f["line_color"][0].__setitem__(0, BLUE),
                       f["line_count"][0].__setitem__(0, 1)), "already has")
    refused(lambda f: (f["line_color"][0].__setitem__(1, RED), f["line_count"][0].__setitem__(1, 3)), "holds 0..r")
    refused(lambda f: f["line_color"][0].__setitem__(2, RED), "exactly when")
    refused(lambda f: f["floor"][0].__setitem__(RED, 8), "at most 7")
    refused(lambda f: f["factories"][0].__setitem__(RED, 5), "at most 4")
    refused(lambda f: f.__setitem__("player", 2), "player must be a seat")
    refused(lambda f: f.__setitem__("marker_holder", 3), "marker_holder")
    refused(lambda f: f.__setitem__("rng", (1, 2)), "odd")
    refused(lambda f: f["score"].__setitem__(1, -1), "score")
    refused(lambda f: f["lid"].__setitem__(0, 300), r"fields\['lid'\] must lie in", rest=None)
    refused(lambda f: f.__setitem__("factories", np.zeros((7, 5), dtype=int)), r"shape \(5, 5\)")
    with pytest.raises(ValueError, match="missing"):
        GAME.state_from_fields({"num_players": 2})
    with pytest.raises(TypeError, match="fields must be a dict"):
        GAME.state_from_fields([1, 2])
    with pytest.raises(ValueError, match="176 bytes|bytes, got 3"):
        GAME.state_from_bytes(b"abc")
    with pytest.raises(NotImplementedError, match="connect4"):
        Connect4().state_from_bytes(bytes(Connect4().new_state()))


def test_native_helpers_refuse_raw_bytes_that_are_no_position():
    from puffercore import _azul

    garbage = b"\xff" * len(bytes(GAME.new_state()))
    for helper in (_azul.fields, _azul.winners, _azul.greedy_action):
        with pytest.raises(ValueError, match="not a consistent Azul state"):
            helper(garbage)
    with pytest.raises(ValueError, match="bytes, got 3"):
        _azul.fields(b"abc")


def test_raw_bytes_round_trip_and_are_read_only():
    state = GAME.new_state(seed=4, num_players=4)
    assert GAME.state_from_bytes(bytes(state)) == state
    assert GAME.state_from_fields(state.fields()) == state
    with pytest.raises(TypeError):
        memoryview(state)[0] = 1


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="num_players"):
        GAME.new_state(num_players=5)
    with pytest.raises(ValueError, match="source"):
        Azul.action(10, 0, 0)
    with pytest.raises(ValueError, match="destination"):
        Azul.action(0, 0, 6)
    with pytest.raises(ValueError, match="action"):
        Azul.describe(300)
    assert Azul.describe(Azul.action(CENTRE, WHITE, FLOOR)) == (CENTRE, WHITE, FLOOR) and Azul.action(9, 4, 5) == 299
    assert Azul.describe(np.int64(299)) == (9, 4, 5)
    with pytest.raises(TypeError, match="color"):
        Azul.action(0, True, 0)
    with pytest.raises(ValueError, match="plays Azul"):
        GreedyAzulAgent().act(Connect4().new_state())
    with pytest.raises(ValueError, match="num_games"):
        random_games(0)
    with pytest.raises(ValueError, match="num_players"):
        random_games(1, num_players=1)


def test_move_notation_round_trips_every_action():
    for action in range(Azul().num_actions):
        text = Azul.move_text(action)
        assert Azul.parse_move(text) == action
        assert Azul.parse_move(text.replace(" ", "").lower()) == action
    assert Azul.parse_move("3 R 1") == Azul.action(3, RED, 1)
    assert Azul.parse_move("c k f") == Azul.action(CENTRE, BLACK, FLOOR)


@pytest.mark.parametrize("text, message", [
    ("3 R", "SOURCE COLOUR LINE"), ("x R 1", "source"), ("3 G 1", "colour"), ("3 R 7", "line"),
    ("3 R 1 2", "SOURCE COLOUR LINE"),
])
def test_move_notation_rejects_what_is_not_a_move(text, message):
    with pytest.raises(ValueError, match=message):
        Azul.parse_move(text)
    with pytest.raises(TypeError, match="str"):
        Azul.parse_move(12)
