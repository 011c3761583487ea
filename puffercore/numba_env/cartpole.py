"""CartPole written for numba: ocean/cartpole/cartpole.h line for line, in float32, so
that with the same seed and actions it gives the C CartPole's observations, rewards and
flags exactly (tests/test_numba_env.py checks it). Discrete(2) actions only.

    from puffercore.numba_env.cartpole import NumbaCartPole
    env = NumbaCartPole(num_envs=4096, seed=0)
"""

import math

import gymnasium
import numpy as np

from puffercore import numba_env
from puffercore.numba_env import rng_uniform

# float32 constants, folded in float32 as the C macros are: a float64 constant would turn
# the arithmetic into float64 and the trajectories would drift apart from C's.
f32 = np.float32
GRAVITY = f32(9.8)
MASSPOLE = f32(0.1)
INV_TOTAL_MASS = f32(1.0) / (f32(1.0) + MASSPOLE)
LENGTH = f32(0.5)  # half the pole's length
POLEMASS_LENGTH = MASSPOLE * LENGTH
FORCE_MAG = f32(10.0)
TAU = f32(0.02)
THETA_THRESHOLD = f32(12.0) * f32(2.0) * f32(3.14159265358979) / f32(360.0)
X_THRESHOLD = f32(2.4)
MAX_STEPS = 500
FOUR_THIRDS = f32(4.0) / f32(3.0)

STATE = [("x", np.float32), ("x_dot", np.float32), ("theta", np.float32), ("theta_dot", np.float32),
         ("tick", np.int32)]


def reset(state, obs, rng):
    state.x = rng_uniform(rng, -0.05, 0.05)
    state.x_dot = rng_uniform(rng, -0.05, 0.05)
    state.theta = rng_uniform(rng, -0.05, 0.05)
    state.theta_dot = rng_uniform(rng, -0.05, 0.05)
    state.tick = 0
    obs[0], obs[1], obs[2], obs[3] = state.x, state.x_dot, state.theta, state.theta_dot


def step(state, action, obs, rng, log):
    force = FORCE_MAG * f32(2 * action - 1)
    cos_theta, sin_theta = math.cos(state.theta), math.sin(state.theta)
    temp = (force + POLEMASS_LENGTH * state.theta_dot * state.theta_dot * sin_theta) * INV_TOTAL_MASS
    theta_acc = (GRAVITY * sin_theta - cos_theta * temp) / (
        LENGTH * (FOUR_THIRDS - MASSPOLE * cos_theta * cos_theta * INV_TOTAL_MASS))
    x_acc = temp - POLEMASS_LENGTH * theta_acc * cos_theta * INV_TOTAL_MASS
    state.x += TAU * state.x_dot
    state.x_dot += TAU * x_acc
    state.theta += TAU * state.theta_dot
    state.theta_dot += TAU * theta_acc
    state.tick += 1
    obs[0], obs[1], obs[2], obs[3] = state.x, state.x_dot, state.theta, state.theta_dot
    terminal = (state.x < -X_THRESHOLD or state.x > X_THRESHOLD
                or state.theta < -THETA_THRESHOLD or state.theta > THETA_THRESHOLD)
    truncated = state.tick >= MAX_STEPS
    if terminal or truncated:
        log[0] += state.tick  # episode_return: reward 1 per step
        log[1] += state.tick
    return 1.0, terminal, truncated


_HIGH = np.array([4.8, np.inf, 24 * np.pi / 180, np.inf], dtype=np.float32)
NumbaCartPole = numba_env.define(
    "NumbaCartPole", state=STATE, reset=reset, step=step, log_names=("episode_return", "episode_length"),
    observation_space=gymnasium.spaces.Box(-_HIGH, _HIGH, dtype=np.float32),
    action_space=gymnasium.spaces.Discrete(2))
