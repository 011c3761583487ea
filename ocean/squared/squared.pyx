# cython: language_level=3
"""Squared binding; the rules are in squared.h."""

from puffercore.env cimport PcEnvSpec, spec_capsule
from puffercore.checks import check_int
from puffercore.ocean.native import NativeEnv

cdef extern from "squared.h":
    ctypedef struct CSquared "Squared":
        int size
        int max_steps
        int agent_row, agent_col, target_row, target_col
    const PcEnvSpec SQUARED_SPEC


class Squared(NativeEnv):
    """Walk from the centre of a size x size grid to a target on its border (reward 1).

    Discrete(5) actions: stay, up, down, left, right. Observation: the grid as size*size
    uint8 (0 empty, 1 agent, 2 target). max_steps defaults to 2 * size.
    """

    def __init__(self, num_envs=1, seed=0, buffers=None, render_mode=None, *, size=7, max_steps=None):
        self.size = check_int(size, "size", 3, 255)
        if self.size % 2 == 0:
            raise ValueError(f"size must be odd (the agent starts at the centre), got {size}")
        self.max_steps = check_int(2 * self.size if max_steps is None else max_steps, "max_steps", 1, 2**31 - 1)
        super().__init__(spec_capsule(&SQUARED_SPEC), num_envs, seed, buffers, render_mode,
                         obs_size=self.size * self.size)

    def _configure(self, size_t address):
        cdef CSquared* env = <CSquared*>address
        env.size = self.size
        env.max_steps = self.max_steps

    def _render_ansi(self, size_t address):
        # The struct, not the observation row: a Normalize transform rewrites that in place.
        cdef CSquared* env = <CSquared*>address
        grid = [["."] * self.size for _ in range(self.size)]
        grid[env.target_row][env.target_col] = "T"
        grid[env.agent_row][env.agent_col] = "A"
        return "".join("".join(row) + "\n" for row in grid)
