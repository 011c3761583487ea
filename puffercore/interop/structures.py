"""What both adapters need of a puffercore vector env: a synchronous one, its
observations as the env defined them (nested Dict/Tuple views of the flat rows), and the
copies they hand out."""

from __future__ import annotations

from typing import Any

import numpy as np


def adapted(vec, adapter: str):
    """(observation tree or None, the env's own observation space) of a synchronous
    `vec`; ValueError naming `adapter` for a staggered one."""
    if getattr(vec, "batch_size", vec.num_envs) != vec.num_envs:
        raise ValueError(f"{adapter} needs a synchronous vector env (batch_size == num_envs); got "
                         f"batch_size={vec.batch_size}, num_envs={vec.num_envs}")
    tree = getattr(vec, "observation_tree", None)
    return tree, (tree.space if tree is not None else vec.single_observation_space)


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
