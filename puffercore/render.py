"""Pictures of the native envs' states as uint8 [height, width, 3] RGB arrays, drawn
with NumPy alone (no pygame), for their "rgb_array" render mode and for video.

    frame = cartpole(x=0.1, theta=-0.05)      # [400, 600, 3], gymnasium's CartPole picture
    frame = snake(cells, heads)               # the grid, walled, 16 pixels a cell
"""

from __future__ import annotations

import numpy as np

# gymnasium's CartPole picture: a 600 x 400 screen showing x in [-2.4, 2.4], a 50 x 30
# cart centred on the track 100 pixels above the bottom, a 10-pixel pole 1 m (125
# pixels) long pivoting a quarter of the cart's height above the cart's centre.
CARTPOLE_HEIGHT, CARTPOLE_WIDTH = 400, 600
_SCALE = CARTPOLE_WIDTH / 4.8
_CART_Y, _CART_HALF_WIDTH, _CART_HALF_HEIGHT = 100, 25.0, 15.0
_POLE_LENGTH, _POLE_HALF_WIDTH = 2 * 0.5 * _SCALE, 5.0
_AXLE_Y = _CART_Y + _CART_HALF_HEIGHT / 2
_CART, _POLE, _AXLE, _TRACK = (0, 0, 0), (202, 152, 101), (129, 132, 203), (0, 0, 0)

# Snake cell codes (ocean/snake/snake.h): 0 empty, 1 food, 2 wall, 3 + k snake k's body.
SNAKE_WALL, SNAKE_FIRST_BODY = 2, 3
_SNAKE_CELLS = [(24, 24, 24), (230, 60, 60), (120, 120, 120)]
_SNAKE_BODIES = [(60, 160, 230), (80, 200, 90), (240, 180, 40), (180, 100, 220), (240, 120, 170), (60, 200, 190)]
# Every code a cell can hold (up to 255) to its colour: snakes cycle through the bodies.
_SNAKE_PALETTE = np.array(_SNAKE_CELLS + [_SNAKE_BODIES[k % len(_SNAKE_BODIES)]
                                          for k in range(256 - SNAKE_FIRST_BODY)], np.uint8)


def cartpole(x: float, theta: float) -> np.ndarray:
    """The cart at position `x` (m) with its pole at angle `theta` (radians, positive
    leaning right), drawn as gymnasium's CartPole-v1 draws it: [400, 600, 3] uint8."""
    # Pixel centres in screen coordinates with y up (gymnasium draws so, then flips).
    px = np.arange(CARTPOLE_WIDTH)[None, :] + 0.5
    py = (CARTPOLE_HEIGHT - 1 - np.arange(CARTPOLE_HEIGHT))[:, None] + 0.5
    cart_x = x * _SCALE + CARTPOLE_WIDTH / 2
    dx, dy = px - cart_x, py - _AXLE_Y
    along = dx * np.sin(theta) + dy * np.cos(theta)  # distance up the pole from the axle
    across = dx * np.cos(theta) - dy * np.sin(theta)
    frame = np.full((CARTPOLE_HEIGHT, CARTPOLE_WIDTH, 3), 255, np.uint8)
    frame[(np.abs(dx) <= _CART_HALF_WIDTH) & (np.abs(py - _CART_Y) <= _CART_HALF_HEIGHT)] = _CART
    frame[(along >= -_POLE_HALF_WIDTH) & (along <= _POLE_LENGTH - _POLE_HALF_WIDTH)
          & (np.abs(across) <= _POLE_HALF_WIDTH)] = _POLE
    frame[dx * dx + dy * dy <= _POLE_HALF_WIDTH ** 2] = _AXLE
    frame[CARTPOLE_HEIGHT - 1 - _CART_Y] = _TRACK
    return frame


def snake(cells: np.ndarray, heads: np.ndarray, scale: int = 16) -> np.ndarray:
    """The snake grid: `cells` [height, width] holds the cell codes inside the walls,
    `heads` [height, width] is True where a snake's head is. Drawn with a wall around,
    each cell `scale` x `scale` pixels: dark empty cells, red food, grey walls, each
    snake in its own colour (cycling after six) with a lighter head. uint8
    [(height + 2) * scale, (width + 2) * scale, 3]."""
    picture = _SNAKE_PALETTE[np.pad(cells, 1, constant_values=SNAKE_WALL)]
    lit = np.pad(heads, 1)
    picture[lit] = (picture[lit].astype(np.uint16) + 255) // 2  # halfway to white
    return picture.repeat(scale, axis=0).repeat(scale, axis=1)
