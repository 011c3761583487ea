"""Azul for 2-4 players, the published rules in C (native/include/puffercore/games/azul.h),
seen from Python like every puffercore game, plus what is Azul's own:

    game = Azul()
    state = game.new_state(seed=0, num_players=3)
    state.apply(Azul.action(source=0, color=BLUE, destination=FLOOR))
    print(state)                      # factories, centre, every player's lines/wall/floor
    state.scores(), state.winners()   # raw scores; winners after the complete-rows tie-break
    state.fields()                    # every field, for tests and inspection

Actions: (source * 5 + colour) * 6 + destination, 300 for every player count. Sources
0-8 are factories (2/3/4 players use 5/7/9 of them), CENTRE = 9; destinations 0-4 are
pattern lines (line r holds r + 1 tiles), FLOOR = 5. Colours: BLUE, YELLOW, RED, BLACK,
WHITE = 0..4; colour c sits in column (c + r) % 5 of wall row r.

`returns()` is (score_i - mean score) / 100 by seat: zero-sum, ordered like the scores
(in 2-player games the winner gets +margin / 200). It ignores the tie-break, so a score
tie broken by complete rows shows equal returns; `winners()` is the official result.

Hand-built positions: change a state's `fields()` and pass them to
`game.state_from_fields(fields)`; the native check refuses inconsistent ones (a colour
without exactly 20 tiles, a pattern line holding a colour its wall row has, ...).
"""

from __future__ import annotations

from puffercore import _azul
from puffercore._games import Game, GameState
from puffercore.checks import check_int

BLUE, YELLOW, RED, BLACK, WHITE = range(5)
COLORS = 5
ROWS = 5
CENTRE = 9
FLOOR = 5
NUM_ACTIONS = _azul.NUM_ACTIONS
COLOR_LETTERS = "BYRKW"  # as the board prints them: K is black


class AzulState(GameState):
    """An Azul position: the GameState API plus Azul's scores, winners and fields."""

    def scores(self) -> list[int]:
        """Each seat's score (end-of-game bonuses included once the game is over)."""
        return [int(score) for score in _azul.fields(self)["score"]]

    def winners(self) -> list[int]:
        """Seats sharing the win: highest score, ties to more complete wall rows, then
        shared. Meaningful once the game is over; during play, who leads."""
        return _azul.winners(self)

    def fields(self) -> dict:
        """Every field as ints and NumPy arrays (copies): num_players, player (to move),
        round_starter, marker_holder (-1 = centre), game_over, round, moves, rng,
        bag/lid/centre [5], factories [num_factories, 5], and per seat line_color /
        line_count / floor [n, 5], wall bool [n, 5, 5] (row, column), score [n]."""
        return _azul.fields(self)


class Azul(Game):
    """Azul, 2-4 players: `Azul().new_state(seed, num_players)`."""

    state_class = AzulState

    def __init__(self):
        super().__init__(_azul.azul_spec())

    def check_state_bytes(self, data) -> None:
        reason = _azul.invalid_reason(data)
        if reason is not None:
            raise ValueError(f"not a consistent Azul state: {reason}")

    def state_from_fields(self, fields: dict) -> AzulState:
        """A state from `fields` (the dict `state.fields()` gives, changed at will);
        ValueError naming what is wrong when it is not a consistent position."""
        if not isinstance(fields, dict):
            raise TypeError(f"fields must be a dict like state.fields(), got {type(fields).__name__}")
        return self.state_from_bytes(_azul.encode(fields))

    @staticmethod
    def action(source: int, color: int, destination: int) -> int:
        """The action index of taking `color` from `source` to `destination`."""
        for value, name, high in ((source, "source", CENTRE), (color, "color", COLORS - 1),
                                  (destination, "destination", FLOOR)):
            check_int(value, name, 0, high)
        return int((source * COLORS + color) * (FLOOR + 1) + destination)

    @staticmethod
    def parse_move(text: str) -> int:
        """The action of a move written as SOURCE COLOUR DESTINATION, e.g. "3 R 1" or
        "c k f": a factory number or c (centre); a colour letter B Y R K W; a pattern
        line 0-4 or f (floor). Spaces are optional. ValueError if it is not one."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        letters = "".join(text.split()).upper()
        if len(letters) != 3:
            raise ValueError(f"a move is SOURCE COLOUR LINE like '3 R 1' or 'c K f', got {text!r}")
        source_text, color_text, destination_text = letters
        if source_text != "C" and not source_text.isdigit():
            raise ValueError(f"source must be a factory number or c (centre), got {source_text!r}")
        if color_text not in COLOR_LETTERS:
            raise ValueError(f"colour must be one of {' '.join(COLOR_LETTERS)}, got {color_text!r}")
        if destination_text not in "01234F":
            raise ValueError(f"line must be 0-4 or f (floor), got {destination_text!r}")
        source = CENTRE if source_text == "C" else int(source_text)
        destination = FLOOR if destination_text == "F" else int(destination_text)
        return Azul.action(source, COLOR_LETTERS.index(color_text), destination)

    @staticmethod
    def move_text(action: int) -> str:
        """The notation parse_move reads, e.g. "3 R 1" or "c K f"."""
        source, color, destination = Azul.describe(action)
        return " ".join(("c" if source == CENTRE else str(source), COLOR_LETTERS[color],
                         "f" if destination == FLOOR else str(destination)))

    @staticmethod
    def describe(action: int) -> tuple[int, int, int]:
        """(source, colour, destination) of an action index."""
        action = check_int(action, "action", 0, NUM_ACTIONS - 1)
        return action // (COLORS * (FLOOR + 1)), action // (FLOOR + 1) % COLORS, action % (FLOOR + 1)


class GreedyAzulAgent:
    """Azul's greedy bot (native/include/puffercore/games/azul_greedy.h): plays the move
    worth most this round (wall points of completed lines with their adjacency and
    end-game bonuses, a share for lines under way, minus floor penalties). Deterministic;
    `act(state) -> action` like the agents of puffercore.alphazero.agents."""

    def act(self, state: GameState) -> int:
        if not isinstance(state, GameState):
            raise TypeError(f"state must be a GameState, got {type(state).__name__}")
        if not isinstance(state, AzulState):
            raise ValueError(f"GreedyAzulAgent plays Azul, got a {state.game.name} state")
        if state.is_terminal():
            raise ValueError("state is terminal; there is no move to choose")
        return _azul.greedy_action(state)


def random_games(num_games: int, num_players: int = 2, seed: int = 0, check: bool = True) -> dict:
    """Native random playouts (see puffercore._azul.random_games): throughput and, with
    `check`, the consistency of every position reached."""
    return _azul.random_games(num_games, num_players, seed, check)


__all__ = ["BLACK", "BLUE", "CENTRE", "FLOOR", "RED", "WHITE", "YELLOW", "Azul", "AzulState", "random_games"]
