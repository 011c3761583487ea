"""Batched observations as the env defined them (nested Dict/Tuple views of the flat
rows), and the copies the adapters hand out."""

from __future__ import annotations

from typing import Any

import numpy as np


def unflatten(tree, rows: np.ndarray) -> Any:
    """`rows` as nested views (`tree`: the vector env's observation tree, None for flat
    observations, which are returned as they are)."""
    return rows if tree is None else tree.unflatten(rows)


def row_of(structure: Any, row: int) -> Any:
    """One env's observation out of a batched (possibly nested) structure, copied."""
    if isinstance(structure, dict):
        return {key: row_of(value, row) for key, value in structure.items()}
    if isinstance(structure, tuple):
        return tuple(row_of(value, row) for value in structure)
    return structure[row].copy()


def copy_structure(structure: Any) -> Any:
    """A copy of a batched (possibly nested) structure: the vector env's buffers change at
    the next step, and the frameworks' own vector envs return copies."""
    if isinstance(structure, dict):
        return {key: copy_structure(value) for key, value in structure.items()}
    if isinstance(structure, tuple):
        return tuple(copy_structure(value) for value in structure)
    return structure.copy()
