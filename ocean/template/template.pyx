# cython: language_level=3
"""Template binding: declare the config fields, point at the spec (which declares the spaces).
Build it with puffercore.build.build_env("template.pyx") (see docs/authoring.md)."""

from puffercore.env cimport PcEnvSpec, spec_capsule
from puffercore.checks import check_int
from puffercore.ocean.native import NativeEnv

cdef extern from "template.h":
    ctypedef struct CTemplate "Template":
        int length
        int position
    const PcEnvSpec TEMPLATE_SPEC


class Template(NativeEnv):
    """Walk right along a corridor of `length` cells to the exit (reward 1)."""

    def __init__(self, num_envs=1, seed=0, buffers=None, render_mode=None, *, length=8):
        self.length = check_int(length, "length", 2, 1_000_000)
        super().__init__(spec_capsule(&TEMPLATE_SPEC), num_envs, seed, buffers, render_mode)

    def _configure(self, size_t address):
        (<CTemplate*>address).length = self.length

    def _render_ansi(self, size_t address):
        # The struct, not the observation row: a Normalize transform rewrites that in place.
        position = (<CTemplate*>address).position
        return "".join("A" if i == position else "." for i in range(self.length - 1)) + "|\n"
