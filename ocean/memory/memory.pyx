# cython: language_level=3
"""Memory binding: the cue-recall env of ocean/memory/memory.h."""

from puffercore.env cimport PcEnvSpec, spec_capsule
from puffercore.checks import check_int
from puffercore.ocean.native import NativeEnv

cdef extern from "memory.h":
    ctypedef struct CMemory "Memory":
        int delay
        int cue
        int tick
    const PcEnvSpec MEMORY_SPEC


class Memory(NativeEnv):
    """Recall a cue shown `delay` steps before the query (reward +1 right, -1 wrong)."""

    def __init__(self, num_envs=1, seed=0, buffers=None, render_mode=None, *, delay=4):
        self.delay = check_int(delay, "delay", 1, 1_000_000)
        super().__init__(spec_capsule(&MEMORY_SPEC), num_envs, seed, buffers, render_mode)

    def _configure(self, size_t address):
        (<CMemory*>address).delay = self.delay

    def _render_ansi(self, size_t address):
        # The struct, not the observation row: a Normalize transform rewrites that in place.
        cdef CMemory* env = <CMemory*>address
        if env.tick == 0:
            return "cue: left\n" if env.cue == 0 else "cue: right\n"
        return "query: which cue?\n" if env.tick == env.delay else "wait\n"
