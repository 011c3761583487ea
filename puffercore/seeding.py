"""Seeds: checked, derived per sub-env, and named per random stream. NumPy only, so the
native bindings and the games can import it without gymnasium or torch.

    check_seed(seed)                                  # None or a non-negative int, else ValueError
    derive_seed(seed, index)                          # sub-env / game `index`'s seed
    named_seeds(run_seed, ("envs", "torch"))          # one child seed per random stream
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np


def check_seed(seed: Any) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
    return int(seed)


def derive_seed(seed: int, index: int) -> int:
    """The 63-bit seed of sub-env `index` for a run seeded with `seed`, for envs that take
    one integer seed (gymnasium). Native envs use (seed, index) as PCG32 state and stream
    directly. SplitMix64 mixing keeps (seed, index) pairs from colliding like seed + index."""
    mask = (1 << 64) - 1
    z = (seed * 0x9E3779B97F4A7C15 + index + 1) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return (z ^ (z >> 31)) >> 1


def named_seeds(run_seed: int, names: Iterable[str]) -> dict[str, int]:
    """One child seed per name, spawned from the run seed (NumPy SeedSequence), so each
    random stream can be replayed or varied alone. Names must be distinct: two streams
    under one name would silently share a seed."""
    names = tuple(names)
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"seed names must be distinct, got {duplicates} more than once")
    children = np.random.SeedSequence(run_seed).spawn(len(names))
    return {name: int(child.generate_state(1, np.uint64)[0] >> np.uint64(1)) for name, child in zip(names, children)}
