"""Argument checks that every part shares, the Cython bindings and games included
(NumPy only, like `puffercore.seeding`). Each takes (value, name, ...) and returns the
value; a bad one gets an exception naming the argument and what was expected.

    self.length = check_int(length, "length", 2, 1_000_000)      # TypeError / ValueError
    num_workers = check_int(num_workers, "num_workers", 1)       # no upper bound
    self.opponent = check_choice(opponent, "opponent", OPPONENTS)
"""

from __future__ import annotations

from typing import Any

import numpy as np


def check_int(value: Any, name: str, low: int, high: int | None = None) -> int:
    """`value` as an int in [low, high] (no upper bound when high is None). NumPy
    integers count as ints; bools, floats and strings do not."""
    if not isinstance(name, str):  # the order of an older helper: (name, value, low, high)
        raise TypeError(f"check_int takes (value, name, low, high): name must be a str, got {name!r}")
    expected = f"an int >= {low}" if high is None else f"an int in [{low}, {high}]"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be {expected}, got {value!r}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name} must be {expected}, got {value!r}")
    return int(value)


def check_choice(value: Any, name: str, choices) -> str:
    """`value`, one of the strings `choices` (ValueError otherwise, listing them)."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value
