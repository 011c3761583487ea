"""Snake: hand-checkable moves, deaths and respawns that keep their rows, masks."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from puffercore.ocean import Snake

UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3
EMPTY, FOOD, WALL, SELF, OTHER = 0, 1, 2, 3, 4


def view(env, row=0, obs=None):
    side = 2 * env.vision + 1
    return (env.observations if obs is None else obs)[row].reshape(side, side)


def head_position(env, row=0):
    """(row, col) of a snake's head, read from walls in a view that spans the grid."""
    grid = view(env, row)
    wall_rows_above = int(np.sum(np.all(grid == WALL, axis=1)[: env.vision]))
    wall_cols_left = int(np.sum(np.all(grid == WALL, axis=0)[: env.vision]))
    return env.vision - wall_rows_above, env.vision - wall_cols_left


def test_walking_into_the_wall_kills_after_the_expected_steps_and_respawns_in_place():
    env = Snake(num_envs=1, seed=3, width=6, height=5, num_snakes=1, num_food=0, vision=6)
    env.reset()
    for _ in range(5):
        row, _ = head_position(env)
        for step in range(row + 1):
            before = view(env).copy()
            obs, rew, term, trunc, info = env.step(np.array([UP], np.int32))
            if step < row:
                assert (rew[0], term[0]) == (0.0, False)
                assert head_position(env)[0] == row - step - 1
        assert (rew[0], term[0], trunc[0]) == (-1.0, True, False)
        assert info == {"episodes": 1.0, "episode_return": -1.0, "episode_length": row + 1.0, "snake_length": 1.0}
        # the final observation is the view at the death: the head against the top wall
        np.testing.assert_array_equal(view(env, obs=env.final_observations), before)
        assert np.all(view(env, obs=env.final_observations)[env.vision - 1] == WALL)
        assert env.masks[0] and view(env)[env.vision, env.vision] == SELF


def test_eating_grows_the_snake_and_scores():
    # a 4x2 grid with one snake and food on every other cell: every legal move eats
    env = Snake(num_envs=1, seed=0, width=4, height=2, num_snakes=1, num_food=7, vision=4)
    env.reset()
    row, col = head_position(env)
    move = RIGHT if col < 3 else LEFT
    _, rew, term, _, _ = env.step(np.array([move], np.int32))
    assert (rew[0], term[0]) == (1.0, False)
    grid = view(env)
    assert np.sum(grid == SELF) == 2 and np.sum(grid == FOOD) == 6, "no free cell for new food yet"


def test_rows_keep_their_snakes_through_deaths_and_masks_stay_true():
    env = Snake(num_envs=8, seed=0, width=6, height=6, num_snakes=5, num_food=10, vision=3)
    obs, _ = env.reset()
    rng = np.random.default_rng(0)
    deaths = 0
    for _ in range(400):
        obs, rew, term, trunc, info = env.step(rng.integers(0, 4, env.num_agents, dtype=np.int32))
        assert env.masks.all()
        # every row's view is centred on its own living head, right after a death too
        assert np.all(obs[:, obs.shape[1] // 2] == SELF)
        # a death shows in its own row only: reward -1 exactly where terminal
        np.testing.assert_array_equal(rew == -1.0, term)
        assert not trunc.any()
        deaths += int(term.sum())
        if term.any():
            assert info["episodes"] == term.sum()
    assert deaths > 100


def test_snakes_in_one_env_see_each_other():
    env = Snake(num_envs=1, seed=0, width=3, height=3, num_snakes=9, num_food=0, vision=2)
    obs, _ = env.reset()
    # nine length-1 snakes fill a 3x3 grid: every in-grid cell is a snake
    for row in range(9):
        grid = view(env, row)
        assert np.sum(grid == SELF) == 1 and np.sum(grid == OTHER) == 8 and np.sum(grid == EMPTY) == 0


def test_a_full_grid_still_respawns_every_dead_snake():
    env = Snake(num_envs=4, seed=0, width=3, height=3, num_snakes=7, num_food=2, vision=1)
    env.reset()
    rng = np.random.default_rng(1)
    for _ in range(200):
        obs, _, term, _, _ = env.step(rng.integers(0, 4, env.num_agents, dtype=np.int32))
        assert env.masks.all() and np.all(obs[:, 4] == SELF)


@settings(max_examples=25, deadline=None)
@given(
    width=st.integers(2, 12),
    height=st.integers(2, 12),
    num_snakes=st.integers(1, 6),
    food_share=st.floats(0, 1),
    vision=st.integers(1, 6),
    seed=st.integers(0, 2**32),
)
def test_any_config_keeps_the_invariants(width, height, num_snakes, food_share, vision, seed):
    num_snakes = min(num_snakes, width * height)
    num_food = int(food_share * (width * height - num_snakes))
    env = Snake(num_envs=2, seed=seed, width=width, height=height, num_snakes=num_snakes,
                num_food=num_food, vision=vision)
    obs, _ = env.reset()
    rng = np.random.default_rng(seed)
    for _ in range(60):
        obs, rew, term, _, _ = env.step(rng.integers(0, 4, env.num_agents, dtype=np.int32))
        assert env.masks.all() and obs.max() <= OTHER
        assert np.all(obs[:, obs.shape[1] // 2] == SELF)
        np.testing.assert_array_equal(rew == -1.0, term)
