# cython: language_level=3
"""Busy binding; the env is in busy.h."""

from puffercore.env cimport PcEnvSpec, spec_capsule
from puffercore.checks import check_int
from puffercore.ocean.native import NativeEnv

cdef extern from "busy.h":
    ctypedef struct CBusy "Busy":
        int length
        float min_cost_us
        float max_cost_us
        int tick
        float next_cost_us
    const PcEnvSpec BUSY_SPEC


class Busy(NativeEnv):
    """A benchmark env whose every step spins the CPU for a seeded, uniformly drawn
    min_cost_us..max_cost_us microseconds (uneven step cost, for staggered batching).
    Discrete(2): action 1 earns reward 1. Observation: [tick / length, the coming step's
    cost scaled to 0..1]. Truncated after `length` steps."""

    def __init__(self, num_envs=1, seed=0, buffers=None, render_mode=None, *, length=1000,
                 min_cost_us=0.0, max_cost_us=200.0):
        self.length = check_int(length, "length", 1, 2**31 - 1)
        for name, value in (("min_cost_us", min_cost_us), ("max_cost_us", max_cost_us)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1e6:
                raise ValueError(f"{name} must be a number of microseconds in [0, 1e6], got {value!r}")
        if min_cost_us > max_cost_us:
            raise ValueError(f"min_cost_us must be <= max_cost_us, got {min_cost_us} > {max_cost_us}")
        self.min_cost_us, self.max_cost_us = float(min_cost_us), float(max_cost_us)
        super().__init__(spec_capsule(&BUSY_SPEC), num_envs, seed, buffers, render_mode)

    def _configure(self, size_t address):
        cdef CBusy* env = <CBusy*>address
        env.length = self.length
        env.min_cost_us = self.min_cost_us
        env.max_cost_us = self.max_cost_us

    def _render_ansi(self, size_t address):
        # The struct, not the observation row: a Normalize transform rewrites that in place.
        cdef CBusy* env = <CBusy*>address
        return f"tick {env.tick} of {self.length}\nnext step spins {env.next_cost_us:.0f} us\n"
