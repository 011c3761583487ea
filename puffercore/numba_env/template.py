"""Template: the smallest complete numba env (`puffercore new-env NAME --numba` copies
this file, renamed). Walk a corridor from a random cell to cell 8; see docs/authoring.md,
"Write your env in Python with Numba".

    from template import Template
    trainer = puffercore.ppo.train(puffercore.ppo.PPOConfig(), Template)
"""

import gymnasium
import numpy as np

from puffercore import numba_env
from puffercore.numba_env import rng_below

STATE = [("position", np.int32), ("tick", np.int32)]


def reset(state, obs, rng):
    state.position = rng_below(rng, 7)  # this env's PCG32 stream, seeded from (seed, env index)
    state.tick = 0
    obs[0] = state.position


def step(state, action, obs, rng, log):
    state.position += 2 * action - 1
    state.tick += 1
    obs[0] = state.position
    terminal, truncated = state.position == 8, state.tick >= 50
    if terminal or truncated:
        log[0] += state.tick  # log_names[0], added in the step that ends the episode
    return (1.0 if terminal else 0.0), terminal, truncated


Template = numba_env.define(
    "Template", state=STATE, reset=reset, step=step, log_names=["episode_length"],
    observation_space=gymnasium.spaces.Box(-100, 100, (1,), np.float32),
    action_space=gymnasium.spaces.Discrete(2))
