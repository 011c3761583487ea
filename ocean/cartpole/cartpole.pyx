# cython: language_level=3
"""CartPole binding; the dynamics are in cartpole.h."""

import numpy as np

from puffercore import render
from puffercore.env cimport PcEnvSpec, spec_capsule
from puffercore.ocean.native import NativeEnv

cdef extern from "cartpole.h":
    ctypedef struct CCartPole "CartPole":
        float x, x_dot, theta, theta_dot
    const PcEnvSpec CARTPOLE_SPEC
    const PcEnvSpec CARTPOLE_CONTINUOUS_SPEC


class CartPole(NativeEnv):
    """gymnasium's CartPole-v1 (same dynamics and episode rules), `num_envs` at once.

    continuous=False: Discrete(2) actions (0 pushes left, 1 right), as gymnasium.
    continuous=True: Box(-1, 1, (1,)) actions; force = 10 N * clip(action, -1, 1).
    Renders sub-env 0 as text ("ansi") or as gymnasium's picture ("rgb_array").
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 50}

    def __init__(self, num_envs=1, seed=0, buffers=None, render_mode=None, *, continuous=False):
        if not isinstance(continuous, (bool, np.bool_)):
            raise TypeError(f"continuous must be a bool, got {continuous!r}")
        spec = spec_capsule(&CARTPOLE_CONTINUOUS_SPEC if continuous else &CARTPOLE_SPEC)
        super().__init__(spec, num_envs, seed, buffers, render_mode)

    def _render_ansi(self, size_t address):
        # The state, not the observation row: a Normalize transform rewrites that in place.
        cdef CCartPole* env = <CCartPole*>address
        x, x_dot, theta, theta_dot = env.x, env.x_dot, env.theta, env.theta_dot
        width = 41
        cart = int(round((x + 2.4) / 4.8 * (width - 1)))
        track = ["-"] * width
        track[min(max(cart, 0), width - 1)] = "#"
        pole = "|" if abs(theta) < 0.035 else ("/" if theta > 0 else "\\")
        top = [" "] * width
        top[min(max(cart, 0), width - 1)] = pole
        return (f"{''.join(top)}\n{''.join(track)}\n"
                f"x={x:+.3f} x_dot={x_dot:+.3f} theta={theta:+.3f} theta_dot={theta_dot:+.3f}\n")

    def _render_rgb_array(self, size_t address):
        cdef CCartPole* env = <CCartPole*>address
        return render.cartpole(env.x, env.theta)
