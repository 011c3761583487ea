"""Azul in plain Python, written from the rulebook apart from the C engine: the oracle the
tests compare azul.h with move by move, and the peer bench/bench_azul.py times.

The state is the dict `AzulState.fields()` gives, with lists instead of arrays. Draws
use Python's `random.Random`, so only the tiles a refill draws differ from the engine's.
"""

import random

COLORS = ROWS = 5
CENTRE, FLOOR = 9, 5
FLOOR_PENALTIES = [1, 1, 2, 2, 2, 3, 3]


def to_lists(fields):
    """A deep copy of `fields` with Python lists for arrays."""
    return {key: value.tolist() if hasattr(value, "tolist") else value for key, value in fields.items()}


def new_game(num_players, seed):
    state = {
        "num_players": num_players, "player": 0, "round_starter": 0, "marker_holder": -1,
        "game_over": False, "round": 1, "moves": 0,
        "bag": [20] * COLORS, "lid": [0] * COLORS, "centre": [0] * COLORS,
        "factories": [[0] * COLORS for _ in range(2 * num_players + 1)],
        "line_color": [[-1] * ROWS for _ in range(num_players)],
        "line_count": [[0] * ROWS for _ in range(num_players)],
        "wall": [[[False] * ROWS for _ in range(ROWS)] for _ in range(num_players)],
        "floor": [[0] * COLORS for _ in range(num_players)],
        "score": [0] * num_players,
    }
    fill_factories(state, random.Random(seed))
    return state


def fill_factories(state, rng):
    """4 tiles per factory from the bag; the lid refills an empty bag; stop when both are empty."""
    for factory in state["factories"]:
        for _ in range(4):
            if sum(state["bag"]) == 0:
                state["bag"], state["lid"] = state["lid"], [0] * COLORS
            if sum(state["bag"]) == 0:
                return
            tiles = [color for color in range(COLORS) for _ in range(state["bag"][color])]
            color = rng.choice(tiles)
            state["bag"][color] -= 1
            factory[color] += 1


def wall_column(row, color):
    return (color + row) % COLORS


def legal_actions(state):
    if state["game_over"] or state["moves"] >= 1000:
        return []
    seat = state["player"]
    sources = list(enumerate(state["factories"])) + [(CENTRE, state["centre"])]
    actions = []
    for source, offer in sources:
        for color in range(COLORS):
            if offer[color] == 0:
                continue
            for row in range(ROWS):
                count = state["line_count"][seat][row]
                on_wall = state["wall"][seat][row][wall_column(row, color)]
                fits = count == 0 or (state["line_color"][seat][row] == color and count < row + 1)
                if fits and not on_wall:
                    actions.append((source * COLORS + color) * 6 + row)
            actions.append((source * COLORS + color) * 6 + FLOOR)
    return sorted(actions)


def floor_slots(state, seat):
    return min(7, sum(state["floor"][seat]) + (state["marker_holder"] == seat))


def placement_points(wall, row, col):
    def run(cells):
        length = 0
        for r, c in cells:
            if not (0 <= r < ROWS and 0 <= c < ROWS and wall[r][c]):
                break
            length += 1
        return length

    horizontal = 1 + run((row, col - k) for k in range(1, ROWS)) + run((row, col + k) for k in range(1, ROWS))
    vertical = 1 + run((row - k, col) for k in range(1, ROWS)) + run((row + k, col) for k in range(1, ROWS))
    if horizontal == 1 and vertical == 1:
        return 1
    return (horizontal if horizontal > 1 else 0) + (vertical if vertical > 1 else 0)


def end_bonus(wall):
    rows = sum(all(wall[r]) for r in range(ROWS))
    columns = sum(all(wall[r][c] for r in range(ROWS)) for c in range(ROWS))
    colors = sum(all(wall[r][wall_column(r, color)] for r in range(ROWS)) for color in range(COLORS))
    return 2 * rows + 7 * columns + 10 * colors


def apply(state, action, rng):
    """Play `action` (legal) on `state` in place; a refill draws from `rng`."""
    source, color, destination = action // 30, action // 6 % COLORS, action % 6
    seat = state["player"]
    offer = state["centre"] if source == CENTRE else state["factories"][source]
    taken, offer[color] = offer[color], 0
    if source == CENTRE and state["marker_holder"] == -1:
        state["marker_holder"] = seat
    if source != CENTRE:
        for c in range(COLORS):
            state["centre"][c] += offer[c]
            offer[c] = 0
    overflow = taken
    if destination != FLOOR:
        placed = min(taken, destination + 1 - state["line_count"][seat][destination])
        state["line_color"][seat][destination] = color
        state["line_count"][seat][destination] += placed
        overflow -= placed
    for _ in range(overflow):  # tile by tile into a free floor slot (the marker takes one), else the lid
        if sum(state["floor"][seat]) + (state["marker_holder"] == seat) < 7:
            state["floor"][seat][color] += 1
        else:
            state["lid"][color] += 1
    state["moves"] += 1
    table_empty = sum(state["centre"]) == 0 and all(sum(f) == 0 for f in state["factories"])
    if not table_empty:
        state["player"] = (seat + 1) % state["num_players"]
        return
    end_round(state, rng)


def tile_walls(state):
    """Every seat's wall-tiling at the end of a round: full lines to the wall, floor
    penalties, the leftover tiles to the lid."""
    for seat in range(state["num_players"]):
        wall, score = state["wall"][seat], state["score"][seat]
        for row in range(ROWS):
            if state["line_count"][seat][row] != row + 1:
                continue
            color = state["line_color"][seat][row]
            wall[row][wall_column(row, color)] = True
            score += placement_points(wall, row, wall_column(row, color))
            state["lid"][color] += row
            state["line_count"][seat][row], state["line_color"][seat][row] = 0, -1
        score -= sum(FLOOR_PENALTIES[:floor_slots(state, seat)])
        state["score"][seat] = max(score, 0)
        for c in range(COLORS):
            state["lid"][c] += state["floor"][seat][c]
        state["floor"][seat] = [0] * COLORS


def end_round(state, rng):
    tile_walls(state)
    if state["marker_holder"] != -1:
        state["round_starter"], state["marker_holder"] = state["marker_holder"], -1
    if any(all(row) for wall in state["wall"] for row in wall):
        finish_game(state)
        return
    state["player"] = state["round_starter"]
    state["round"] += 1
    fill_factories(state, rng)
    if all(sum(f) == 0 for f in state["factories"]):
        finish_game(state)


def finish_game(state):
    for seat in range(state["num_players"]):
        state["score"][seat] += end_bonus(state["wall"][seat])
    state["game_over"] = True


def winners(state):
    full_rows = [sum(all(row) for row in wall) for wall in state["wall"]]
    best = max(zip(state["score"], full_rows))
    return [seat for seat in range(state["num_players"]) if (state["score"][seat], full_rows[seat]) == best]


def random_game(num_players, seed):
    """One game of uniformly random legal moves; returns the final state."""
    rng = random.Random(seed)
    state = new_game(num_players, seed)
    while True:
        actions = legal_actions(state)
        if not actions:
            return state
        apply(state, rng.choice(actions), rng)
