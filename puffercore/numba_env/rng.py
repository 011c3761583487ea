"""PCG32 over an env's PcEnv.rng in numba, as native/include/puffercore/rng.h: the same
stream as the C envs, so numba envs seed and draw exactly as they do. `rng` is a
uint64[2] view of (state, inc). uint64 constants everywhere: numba turns uint64 mixed
with a Python int into float64."""

import numba
import numpy as np

JIT = {"error_model": "numpy"}  # no ZeroDivisionError: nothing may raise inside a cfunc

_MULTIPLIER = np.uint64(6364136223846793005)
_LOW32 = np.uint64(0xFFFFFFFF)


@numba.njit(cache=True, **JIT)
def rng_next(rng):
    """pc_rng_next: the next 32 random bits (as a uint64)."""
    old = rng[0]
    rng[0] = old * _MULTIPLIER + rng[1]
    xorshifted = (((old >> np.uint64(18)) ^ old) >> np.uint64(27)) & _LOW32
    rot = old >> np.uint64(59)
    return ((xorshifted >> rot) | (xorshifted << ((np.uint64(32) - rot) & np.uint64(31)))) & _LOW32


@numba.njit(cache=True, **JIT)
def rng_float(rng):
    """pc_rng_float: a float32 uniform in [0, 1) with 24 random bits."""
    return np.float32(rng_next(rng) >> np.uint64(8)) * np.float32(1.0 / 16777216.0)


@numba.njit(cache=True, **JIT)
def rng_uniform(rng, low, high):
    """pc_rng_uniform: a float32 uniform in [low, high), computed in float32 as C does."""
    low, high = np.float32(low), np.float32(high)
    return low + (high - low) * rng_float(rng)


@numba.njit(cache=True, **JIT)
def rng_below(rng, bound):
    """pc_rng_below: an unbiased integer in [0, bound), for bound in [1, 2**32)."""
    bound = np.uint64(bound)
    product = rng_next(rng) * bound
    if product & _LOW32 < bound:
        threshold = ((_LOW32 - bound + np.uint64(1)) & _LOW32) % bound  # (uint32)(-bound) % bound
        while product & _LOW32 < threshold:
            product = rng_next(rng) * bound
    return np.int64(product >> np.uint64(32))
