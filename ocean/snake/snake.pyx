# cython: language_level=3
"""Snake binding; the rules are in snake.h."""

from libc.stdint cimport int32_t, uint8_t

import numpy as np

from puffercore import render
from puffercore.env cimport PcEnvSpec, spec_capsule
from puffercore.checks import check_int
from puffercore.ocean.native import NativeEnv

cdef extern from "snake.h":
    ctypedef struct SnakeAgent:
        int32_t length
    ctypedef struct CSnake "Snake":
        int32_t width, height, num_snakes, num_food, vision
        SnakeAgent* agents
        uint8_t* cells
    size_t snake_env_size(int32_t width, int32_t height, int32_t num_snakes, int32_t vision)
    int32_t snake_inside(const CSnake* env, int32_t i)
    int32_t snake_head(const SnakeAgent* agent, int32_t cells)
    const PcEnvSpec SNAKE_SPEC


class Snake(NativeEnv):
    """Multi-agent snake: `num_snakes` rows per env on one width x height grid.

    Discrete(4) actions (up, down, left, right). Observation: the uint8 cells within
    `vision` of the head, flattened (2*vision+1)^2: 0 empty, 1 food, 2 wall, 3 own body,
    4 another snake. Reward +1 for food, -1 for dying; a dead snake respawns at once.
    Renders env 0's grid as text ("ansi") or as a picture ("rgb_array").
    """

    # A snake moves one cell a step: 15 steps a second is watchable.
    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 15}

    def __init__(self, num_envs=1, seed=0, buffers=None, render_mode=None, *,
                 width=16, height=16, num_snakes=4, num_food=4, vision=5):
        self.width = check_int(width, "width", 2, 255)
        self.height = check_int(height, "height", 2, 255)
        self.num_snakes = check_int(num_snakes, "num_snakes", 1, 253)
        self.num_food = check_int(num_food, "num_food", 0, self.width * self.height)
        self.vision = check_int(vision, "vision", 1, 32)
        if self.num_snakes + self.num_food > self.width * self.height:
            raise ValueError(f"num_snakes + num_food must fit on the {self.width}x{self.height} grid, "
                             f"got {self.num_snakes} + {self.num_food}")
        super().__init__(spec_capsule(&SNAKE_SPEC), num_envs, seed, buffers, render_mode, rows=self.num_snakes,
                         env_size=snake_env_size(self.width, self.height, self.num_snakes, self.vision),
                         obs_size=(2 * self.vision + 1) ** 2)

    def _configure(self, size_t address):
        cdef CSnake* env = <CSnake*>address
        env.width, env.height = self.width, self.height
        env.num_snakes, env.num_food, env.vision = self.num_snakes, self.num_food, self.vision

    def _grid(self, size_t address):
        """The cell codes inside the walls, [height, width], and where the heads are."""
        cdef CSnake* env = <CSnake*>address
        cdef int32_t inside = env.width * env.height
        cells = np.array([env.cells[snake_inside(env, i)] for i in range(inside)], np.uint8)
        head_cells = {snake_head(&env.agents[k], inside) for k in range(env.num_snakes) if env.agents[k].length > 0}
        heads = np.array([snake_inside(env, i) in head_cells for i in range(inside)])
        return cells.reshape(env.height, env.width), heads.reshape(env.height, env.width)

    def _render_ansi(self, size_t address):
        """'#' walls, '*' food, snake k as its letter: upper case head, lower case body."""
        cells, heads = self._grid(address)
        picture = [[".*"[code] if code < 3 else chr(ord("a") + (code - 3) % 26) for code in row] for row in cells]
        for r, c in zip(*np.nonzero(heads)):
            picture[r][c] = picture[r][c].upper()
        wall = "#" * (self.width + 2) + "\n"
        return wall + "".join("#" + "".join(row) + "#\n" for row in picture) + wall

    def _render_rgb_array(self, size_t address):
        return render.snake(*self._grid(address))
