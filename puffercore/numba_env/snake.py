"""Snake written for numba, a multi-agent env: ocean/snake/snake.h function for function,
so that with the same config, seed and actions it gives the C Snake's observations,
rewards, flags, masks and logs exactly (tests/test_numba_snake.py checks it).

    from puffercore.numba_env.snake import numba_snake
    env = numba_snake(num_envs=1024, seed=0, num_snakes=4)   # the C Snake's arguments
    vec = puffercore.vector.make(numba_snake, 4096, backend="threads", width=8, height=8)

The rules and the observation are the C Snake's (see snake.h). The grid, the bodies and
the per-snake counters are arrays in the state record, sized by the config, so each
config is its own class (snake_class: compiled once, cached); the config values
themselves are state fields, read at run time as the C env reads its struct.
"""

import functools

import gymnasium
import numpy as np

from puffercore import numba_env
from puffercore.numba_env import jit, rng_below
from puffercore.checks import check_int
from puffercore.render import snake as snake_picture

EMPTY, FOOD, WALL, FIRST_BODY = 0, 1, 2, 3  # cell codes; FIRST_BODY + k: snake k
SEES_SELF, SEES_OTHER = 3, 4


@jit
def inside(state, i):
    """Index in cells of the i-th cell inside the walls, row-major."""
    return (i // state.width + state.vision) * state.stride + i % state.width + state.vision


@jit
def head(state, k):
    return state.body[k, (state.tail[k] + state.length[k] - 1) % (state.width * state.height)]


@jit
def free_cell(state, rng):
    """A random empty cell, or -1 when the grid is full: a few random probes, then a scan
    from a random start so that a crowded grid still finds its last free cells."""
    count = state.width * state.height
    for _ in range(8):
        cell = inside(state, rng_below(rng, count))
        if state.cells[cell] == EMPTY:
            return cell
    start = rng_below(rng, count)
    for i in range(count):
        cell = inside(state, (start + i) % count)
        if state.cells[cell] == EMPTY:
            return cell
    return -1


@jit
def spawn(state, k, rng):
    cell = free_cell(state, rng)
    if cell < 0:
        return  # unreachable (see snake.h); the row would stay masked out
    state.body[k, 0] = cell
    state.tail[k] = 0
    state.length[k] = 1
    state.episode_return[k] = 0
    state.episode_length[k] = 0
    state.cells[cell] = FIRST_BODY + k


@jit
def place_food(state, rng):
    while state.food_count < state.num_food:
        cell = free_cell(state, rng)
        if cell < 0:
            return
        state.cells[cell] = FOOD
        state.food_count += 1


@jit
def observe(state, k, obs):
    if state.length[k] == 0:
        obs[:] = 0
        return
    side = 2 * state.vision + 1
    corner = head(state, k) - state.vision * (state.stride + 1)
    for r in range(side):
        for c in range(side):
            cell = state.cells[corner + r * state.stride + c]
            obs[r * side + c] = cell if cell < FIRST_BODY else SEES_SELF if cell == FIRST_BODY + k else SEES_OTHER


@jit
def die(state, k, agents, log):
    state.episode_return[k] -= 1
    agents.rewards[k] = -1
    agents.terminals[k] = True
    observe(state, k, agents.final_observations[k])
    log[0] += state.episode_return[k]
    log[1] += state.episode_length[k]
    log[2] += state.length[k]
    capacity = state.width * state.height
    for i in range(state.length[k]):
        state.cells[state.body[k, (state.tail[k] + i) % capacity]] = EMPTY
    state.length[k] = 0


@jit
def move(state, k, action, agents, log):
    capacity = state.width * state.height
    tail = state.body[k, state.tail[k]]
    stride = np.int64(state.stride)  # one integer type: a tuple indexed at run time must be homogeneous
    target = head(state, k) + (-stride, stride, -1, 1)[action]  # up, down, left, right
    cell = state.cells[target]
    state.episode_length[k] += 1
    if cell == WALL or (cell >= FIRST_BODY and target != tail):
        die(state, k, agents, log)
        return
    if cell == FOOD:
        state.length[k] += 1
        state.episode_return[k] += 1
        agents.rewards[k] = 1
        state.food_count -= 1
    else:
        state.cells[tail] = EMPTY
        state.tail[k] = (state.tail[k] + 1) % capacity
    state.body[k, (state.tail[k] + state.length[k] - 1) % capacity] = target
    state.cells[target] = FIRST_BODY + k


@jit
def observe_all(state, agents):
    for k in range(state.num_snakes):
        observe(state, k, agents.observations[k])
        agents.masks[k] = state.length[k] > 0


def reset(state, agents, rng):
    state.cells[:] = WALL
    for row in range(state.height):
        start = inside(state, row * state.width)
        state.cells[start:start + state.width] = EMPTY
    state.food_count = 0
    for k in range(state.num_snakes):
        state.length[k] = 0
        spawn(state, k, rng)
    place_food(state, rng)
    observe_all(state, agents)


def step(state, agents, rng, log):
    for k in range(state.num_snakes):  # rewards and flags start at 0: the wrapper cleared them
        if state.length[k] > 0:
            move(state, k, agents.actions[k], agents, log)
    for k in range(state.num_snakes):
        if state.length[k] == 0:
            spawn(state, k, rng)
    place_food(state, rng)
    observe_all(state, agents)


def _grid(state):
    """The cells inside the walls, [height, width] cell codes, and where the heads are."""
    width, height, stride, vision = int(state.width), int(state.height), int(state.stride), int(state.vision)
    cells = np.array([state.cells[inside.py_func(state, i)] for i in range(width * height)], np.uint8)
    heads = np.zeros(width * height, bool)
    for k in range(state.num_snakes):
        if state.length[k] > 0:
            row, col = divmod(int(head.py_func(state, k)), stride)
            heads[(row - vision) * width + col - vision] = True
    return cells.reshape(height, width), heads.reshape(height, width)


def render(state):
    """'#' walls, '*' food, snake k as its letter: upper case head, lower case body."""
    cells, heads = _grid(state)
    picture = [[".*"[code] if code < FIRST_BODY else chr(ord("a") + (code - FIRST_BODY) % 26) for code in row]
               for row in cells]
    for r, c in zip(*np.nonzero(heads)):
        picture[r][c] = picture[r][c].upper()
    wall = "#" * (cells.shape[1] + 2) + "\n"
    return wall + "".join("#" + "".join(row) + "#\n" for row in picture) + wall


def picture(state):
    """The C Snake's rgb_array picture (puffercore.render.snake)."""
    return snake_picture(*_grid(state))


def snake_class(width=16, height=16, num_snakes=4, num_food=4, vision=5):
    """The NumbaEnv class of one config (the C Snake's keyword arguments and checks)."""
    width, height = check_int(width, "width", 2, 255), check_int(height, "height", 2, 255)
    num_snakes = check_int(num_snakes, "num_snakes", 1, 253)
    num_food = check_int(num_food, "num_food", 0, width * height)
    vision = check_int(vision, "vision", 1, 32)
    if num_snakes + num_food > width * height:
        raise ValueError(f"num_snakes + num_food must fit on the {width}x{height} grid, got {num_snakes} + {num_food}")
    return _snake_class(width, height, num_snakes, num_food, vision)


@functools.cache  # one class per config, however it was spelt
def _snake_class(width, height, num_snakes, num_food, vision):
    stride = width + 2 * vision
    side = 2 * vision + 1
    state = [("width", np.int32), ("height", np.int32), ("num_snakes", np.int32), ("num_food", np.int32),
             ("vision", np.int32), ("stride", np.int32), ("food_count", np.int32),
             ("tail", np.int32, num_snakes), ("length", np.int32, num_snakes),
             ("episode_return", np.float32, num_snakes), ("episode_length", np.int32, num_snakes),
             ("body", np.int32, (num_snakes, width * height)),  # ring buffers of cell indices
             ("cells", np.uint8, stride * (height + 2 * vision))]  # the grid inside a band of walls
    return numba_env.define(
        "NumbaSnake", state=state, reset=reset, step=step, agents=num_snakes, render=render,
        render_rgb_array=picture, render_fps=15,
        log_names=("episode_return", "episode_length", "snake_length"),
        config=dict(width=width, height=height, num_snakes=num_snakes, num_food=num_food, vision=vision,
                    stride=stride),
        observation_space=gymnasium.spaces.Box(0, 4, (side * side,), dtype=np.uint8),
        action_space=gymnasium.spaces.Discrete(4))


def numba_snake(num_envs=1, seed=0, buffers=None, render_mode=None, **config):
    """An env of snake_class(**config): a creator taking the C Snake's arguments."""
    return snake_class(**config)(num_envs, seed, buffers, render_mode)
