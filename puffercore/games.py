"""Turn-based games for search and AlphaZero, with rules in C (native/include/puffercore/
games/, ABI in puffercore/game.h) and a Python view one state at a time:

    game = puffercore.games.Connect4()
    state = game.new_state(seed=0)
    state.apply(state.legal_actions()[0])
    print(state, state.current_player(), state.observation().shape)

States are plain C data: `clone()` is a memcpy, `==` compares positions. A game built
in another extension joins with `Game(spec_capsule)` (a PyCapsule named
"puffercore.PcGameSpec" pointing at its `PcGameSpec`).
"""

import numpy as np

from puffercore._games import MAX_PLAYERS, Game, GameState, connect4_spec, pig_spec, tictactoe_spec
from puffercore.azul import Azul


def _planes(cell_map: np.ndarray, planes: int) -> np.ndarray:
    """The observation map of a board symmetry given by where each cell comes from,
    applied to every plane of a [planes, rows, cols] observation."""
    cells = cell_map.size
    return np.concatenate([plane * cells + cell_map.ravel() for plane in range(planes)])


_CONNECT4_CELLS = np.arange(6 * 7).reshape(6, 7)
_TICTACTOE_CELLS = np.arange(9).reshape(3, 3)


class Connect4(Game):
    """7 columns x 6 rows; action = column; observation [2, 6, 7] (own, opponent)."""

    symmetries = ((_planes(_CONNECT4_CELLS[:, ::-1], 2), np.arange(7)[::-1].copy()),)  # left-right mirror

    def __init__(self):
        super().__init__(connect4_spec())


class TicTacToe(Game):
    """3 x 3; action = row * 3 + col; observation [2, 3, 3] (own, opponent)."""

    # The 7 rotations and reflections of the square besides the identity.
    symmetries = tuple(
        (_planes(cells, 2), cells.ravel().copy())
        for cells in [np.rot90(grid, turns) for grid in (_TICTACTOE_CELLS, _TICTACTOE_CELLS.T) for turns in range(4)][1:]
    )

    def __init__(self):
        super().__init__(tictactoe_spec())


class Pig(Game):
    """The dice game for 2-4 players, to 20 points; action 0 = roll, 1 = hold. A small
    game with chance events (dice from the state's RNG) and more than two players."""

    def __init__(self):
        super().__init__(pig_spec())


__all__ = ["MAX_PLAYERS", "Azul", "Connect4", "Game", "GameState", "Pig", "TicTacToe"]
