# cython: language_level=3
"""Memory binding: the cue-recall env of ocean/memory/memory.h."""

from puffercore.env cimport PcEnvSpec, spec_capsule
from puffercore.checks import check_int
from puffercore.ocean.native import NativeEnv

cdef extern from "memory.h":
    ctypedef struct CMemory "Memory":
        int delay
    const PcEnvSpec MEMORY_SPEC


class Memory(NativeEnv):
    """Recall a cue shown `delay` steps before the query (reward +1 right, -1 wrong)."""

    def __init__(self, num_envs=1, seed=0, buffers=None, render_mode=None, *, delay=4):
        self.delay = check_int(delay, "delay", 1, 1_000_000)
        super().__init__(spec_capsule(&MEMORY_SPEC), num_envs, seed, buffers, render_mode)

    def _configure(self, size_t address):
        (<CMemory*>address).delay = self.delay

    def _render_ansi(self, address):
        cue_left, cue_right, query = self.observations[0]
        return ("cue: left\n" if cue_left else "cue: right\n" if cue_right else
                "query: which cue?\n" if query else "wait\n")
