"""Spaces as fixed-shape rows (NumPy and gymnasium only, no env code), for the
emulation adapters and the native bindings:

- `SpaceTree` maps a (nested Dict/Tuple) observation space to one flat row and back.
  The row has a single dtype when every leaf shares it, else it is raw uint8 bytes with
  each leaf aligned to its itemsize, so `unflatten` can reinterpret slices in place
  (`ndarray.view(dtype)` / `Tensor.view(dtype)`) and hand the policy views, not copies.
- `ActionTree` maps a (nested) action space to a flat MultiDiscrete (all leaves discrete)
  or float32 Box (all leaves continuous) and turns flat rows back into env actions.
- `action_mask_leaf` is the leaf named `action_mask` that policies apply, and
  `mask_columns` its columns and the others: observation transforms touch only the
  others, so a mask reaches the policy as the env wrote it.
- `masked_observation_tree` is the tree of a native env whose rows start with its
  action mask.
- `spec_spaces` gives the spaces a native env's spec declares (env.h, ABI 2) from its
  bounds; `flat_bounds` the bounds of a space, its inverse.
- `space_to_data` / `space_from_data`: a space as plain data, for checkpoints.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Iterator, NamedTuple

import gymnasium
import numpy as np
from gymnasium import spaces

LEAF_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
DISCRETE_SPACES = (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One leaf of a space tree: where it lives in the structure and in the flat row.
    `start`/`stop` count elements of the row's dtype (bytes for a uint8 byte row)."""

    path: tuple
    space: gymnasium.Space
    dtype: np.dtype
    shape: tuple
    start: int
    stop: int


def _walk(space: gymnasium.Space, what: str, path: tuple = ()) -> Iterator[tuple[tuple, gymnasium.Space]]:
    """(path, leaf space) in depth-first order; raises on spaces with no fixed shape."""
    if isinstance(space, spaces.Dict):
        for key, child in space.spaces.items():
            yield from _walk(child, what, path + (key,))
    elif isinstance(space, spaces.Tuple):
        for index, child in enumerate(space.spaces):
            yield from _walk(child, what, path + (index,))
    elif isinstance(space, LEAF_SPACES):
        yield path, space
    else:
        raise TypeError(
            f"{what}{_path_str(path)} is {space}, which has no fixed shape; supported: Box, "
            "Discrete, MultiDiscrete, MultiBinary and Dict/Tuple of them"
        )


def _path_str(path: tuple) -> str:
    return "".join(f"[{key!r}]" for key in path)


def _get(structure: Any, path: tuple) -> Any:
    for key in path:
        structure = structure[key]
    return structure


def _assemble(space: gymnasium.Space, leaf_values: Iterator) -> Any:
    """Rebuild the nested structure of `space` from leaf values in `_walk` order."""
    if isinstance(space, spaces.Dict):
        return {key: _assemble(child, leaf_values) for key, child in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_assemble(child, leaf_values) for child in space.spaces)
    return next(leaf_values)


def _leaves(space: gymnasium.Space, what: str, in_bytes: bool) -> list[Leaf]:
    """Lay the leaves out one after another. With `in_bytes`, offsets count bytes and
    each leaf starts at a multiple of its itemsize; otherwise they count elements."""
    leaves, offset = [], 0
    for path, leaf_space in _walk(space, what):
        count = math.prod(leaf_space.shape)
        if in_bytes:
            itemsize = np.dtype(leaf_space.dtype).itemsize
            offset = -(-offset // itemsize) * itemsize
            count *= itemsize
        leaves.append(Leaf(path, leaf_space, np.dtype(leaf_space.dtype), leaf_space.shape, offset, offset + count))
        offset += count
    if not leaves or offset == 0:
        raise ValueError(f"{what} {space} has no elements")
    return leaves


def flat_bounds(space: gymnasium.Space) -> tuple[np.ndarray, np.ndarray]:
    """Flat (low, high) of one leaf, inclusive (Discrete: the integers it holds)."""
    if isinstance(space, spaces.Box):
        return space.low.ravel(), space.high.ravel()
    if isinstance(space, spaces.Discrete):
        return np.array([space.start]), np.array([space.start + space.n - 1])
    if isinstance(space, spaces.MultiDiscrete):
        return space.start.ravel(), (space.start + space.nvec - 1).ravel()
    return np.zeros(space.n, np.int8).ravel(), np.ones(space.n, np.int8).ravel()


class SpaceTree:
    """A structured observation space laid out as one flat row.

    `flat_space` is the Box of one row; `leaves` lists every leaf (path, dtype, shape,
    offset). `flatten` writes observations into rows, `unflatten` reads rows back as
    nested dicts/tuples of views. Both accept any leading batch dims on the row array.
    """

    def __init__(self, space: gymnasium.Space):
        if not isinstance(space, gymnasium.Space):
            raise TypeError(f"space must be a gymnasium.Space, got {type(space).__name__}")
        self.space = space
        self.leaves = _leaves(space, "observation space", in_bytes=False)
        leaf_dtypes = {leaf.dtype for leaf in self.leaves}
        self.is_bytes = len(leaf_dtypes) > 1
        if not self.is_bytes:
            self.dtype = leaf_dtypes.pop()
            low, high = zip(*(flat_bounds(leaf.space) for leaf in self.leaves))
            low, high = np.concatenate(low).astype(self.dtype), np.concatenate(high).astype(self.dtype)
            self.size = self.leaves[-1].stop
            self.flat_space = spaces.Box(low, high, (self.size,), self.dtype)
        else:
            self.dtype = np.dtype(np.uint8)
            self.leaves = _leaves(space, "observation space", in_bytes=True)
            # Pad the row to the widest itemsize so every row of a batch stays aligned.
            widest = max(leaf.dtype.itemsize for leaf in self.leaves)
            self.size = -(-self.leaves[-1].stop // widest) * widest
            self.flat_space = spaces.Box(0, 255, (self.size,), np.uint8)
        self._torch_cache = None  # (row dtype, [leaf dtypes]), resolved on first torch use

    def leaf(self, *path) -> Leaf:
        """The leaf at `path` (keys of Dicts, indices of Tuples)."""
        for leaf in self.leaves:
            if leaf.path == path:
                return leaf
        raise KeyError(f"no leaf at path {path}; leaves: {[leaf.path for leaf in self.leaves]}")

    def flatten(self, observation: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Write `observation` (a structure matching the space) into `out`, a row
        `[size]` or a batch `[*batch, size]` when every leaf carries the same leading
        batch dims. Allocates a single row when `out` is None. Returns `out`."""
        if out is None:
            out = np.zeros(self.size, self.dtype)
        self.writer(out)(observation)
        return out

    def writer(self, out: np.ndarray, owner: str = "") -> Callable[[Any], None]:
        """`flatten` into a fixed `out` with its leaf views computed once: the adapters'
        per-step path, a handful of `np.copyto` calls. Each leaf must have its exact
        shape (no broadcasting: a scalar for a Box(4,) is an env's bug, not 4 copies);
        `owner` begins the error message (the adapters name their env)."""
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy array, got {type(out).__name__}")
        targets = list(zip(self.leaves, self._leaf_views(out, "out")))
        def write(observation: Any) -> None:
            for leaf, view in targets:
                try:
                    value = _get(observation, leaf.path)
                    if np.shape(value) != view.shape:
                        raise ValueError(f"its shape is {np.shape(value)}, expected {view.shape}")
                    np.copyto(view, value, casting="same_kind")
                except (KeyError, IndexError, TypeError, ValueError) as error:
                    raise ValueError(
                        f"{owner}observation{_path_str(leaf.path)} does not fit {leaf.space}: {error}") from error

        return write

    def unflatten(self, flat: Any) -> Any:
        """The nested structure of `flat` (NumPy array or torch tensor `[*batch, size]`),
        each leaf a view `[*batch, *leaf.shape]` sharing memory with `flat`."""
        return _assemble(self.space, iter(self._leaf_views(flat, "flat")))

    def _leaf_views(self, flat: Any, name: str) -> list:
        is_numpy = isinstance(flat, np.ndarray)
        if not is_numpy and not hasattr(flat, "untyped_storage"):
            raise TypeError(f"{name} must be a numpy array or torch tensor, got {type(flat).__name__}")
        row_dtype, leaf_dtypes = (self.dtype, [leaf.dtype for leaf in self.leaves]) if is_numpy else self._torch_dtypes()
        if flat.dtype != row_dtype or flat.ndim < 1 or flat.shape[-1] != self.size:
            raise ValueError(
                f"{name} must have shape [..., {self.size}] and dtype {row_dtype}, got {tuple(flat.shape)} {flat.dtype}"
            )
        batch = tuple(flat.shape[:-1])
        slices = [flat[..., leaf.start : leaf.stop] for leaf in self.leaves]
        if self.is_bytes:
            slices = [s.view(dtype) for s, dtype in zip(slices, leaf_dtypes)]
        if is_numpy:
            return [s.reshape(batch + leaf.shape) for s, leaf in zip(slices, self.leaves)]
        # torch: .view never copies (it raises instead), which is the guarantee we want.
        return [s.view(batch + leaf.shape) for s, leaf in zip(slices, self.leaves)]

    def _torch_dtypes(self) -> tuple:
        if self._torch_cache is None:
            import torch

            def to_torch(dtype):
                return torch.from_numpy(np.empty(0, dtype)).dtype

            self._torch_cache = (to_torch(self.dtype), [to_torch(leaf.dtype) for leaf in self.leaves])
        return self._torch_cache


class ActionTree:
    """A structured action space as one flat action row: MultiDiscrete when every leaf is
    discrete (Discrete/MultiDiscrete/MultiBinary; `start` offsets are kept so flat values
    equal env values), float32 Box when every leaf is a Box. A top-level Discrete stays
    Discrete. `unflatten(row)` gives the env action; `flatten(action)` the flat row."""

    def __init__(self, space: gymnasium.Space):
        if not isinstance(space, gymnasium.Space):
            raise TypeError(f"space must be a gymnasium.Space, got {type(space).__name__}")
        self.space = space
        self.leaves = _leaves(space, "action space", in_bytes=False)
        discrete = [isinstance(leaf.space, DISCRETE_SPACES) for leaf in self.leaves]
        if any(discrete) and not all(discrete):
            kinds = {leaf.path: type(leaf.space).__name__ for leaf in self.leaves}
            raise ValueError(
                f"action space mixes discrete and continuous leaves ({kinds}); puffercore's flat "
                "actions are either MultiDiscrete or Box. Split the action or discretize the Box."
            )
        low, high = zip(*(flat_bounds(leaf.space) for leaf in self.leaves))
        low, high = np.concatenate(low), np.concatenate(high)
        # The scalar type of a top-level Discrete: unflatten's fast path.
        self._discrete = space.dtype.type if isinstance(space, spaces.Discrete) else None
        if isinstance(space, spaces.Discrete):
            self.flat_space = space
        elif all(discrete):
            self.flat_space = spaces.MultiDiscrete(high - low + 1, start=low)
        else:
            self.flat_space = spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)

    def unflatten(self, row: np.ndarray) -> Any:
        """The env action of one flat row. Discrete leaves become NumPy scalars of the
        leaf's dtype, as gymnasium's own vector envs pass them (and its `Discrete.contains`
        checks them faster than Python ints, for which it builds an `np.iinfo`)."""
        if self._discrete is not None:
            return self._discrete(row)
        values = (
            leaf.dtype.type(row[leaf.start])
            if isinstance(leaf.space, spaces.Discrete)
            else row[leaf.start : leaf.stop].reshape(leaf.shape).astype(leaf.dtype)
            for leaf in self.leaves
        )
        return _assemble(self.space, values)

    def unflatten_batch(self, rows: np.ndarray) -> Any:
        """The env actions of flat rows `[k, ...]`, an iterable of k: a whole batch
        converted at once, so a plain Discrete costs one `astype` instead of k scalars."""
        if self._discrete is not None:
            return rows.astype(self.space.dtype)
        return [self.unflatten(row) for row in rows]

    def flatten(self, action: Any) -> np.ndarray:
        row = np.zeros(self.flat_space.shape, self.flat_space.dtype)
        if isinstance(self.space, spaces.Discrete):
            row[...] = action
            return row
        for leaf in self.leaves:
            row[leaf.start : leaf.stop] = np.ravel(_get(action, leaf.path))
        return row


def action_mask_leaf(tree: SpaceTree | None) -> Leaf | None:
    """The leaf named `action_mask` (at any depth) of an observation tree, which policies
    apply to their logits; None without one (or without a tree). ValueError for two."""
    if tree is None:
        return None
    masks = [leaf for leaf in tree.leaves if leaf.path and leaf.path[-1] == "action_mask"]
    if len(masks) > 1:
        raise ValueError(f"the observation tree has {len(masks)} action_mask leaves; expected at most one")
    return masks[0] if masks else None


class MaskColumns(NamedTuple):
    """Where an observation row's action mask is (`mask`: a slice of its last axis, None
    without one) and the columns that are observations proper (`others`: a slice when
    they are one block, else an index array)."""

    mask: slice | None
    others: slice | np.ndarray


def mask_columns(tree: SpaceTree | None) -> MaskColumns:
    """The action mask's columns of rows laid out by `tree` (a vector's
    `observation_tree`, None for plain rows) and the other columns. Every observation
    transform reads and writes only `others`: a mask is the env's statement of the legal
    actions, not a feature to rescale or stack."""
    leaf = action_mask_leaf(tree)
    if leaf is None:
        return MaskColumns(None, slice(None))
    if leaf.start == 0 or leaf.stop == tree.size:
        others = slice(leaf.stop, tree.size) if leaf.start == 0 else slice(0, leaf.start)
    else:
        others = np.r_[0:leaf.start, leaf.stop:tree.size]
    return MaskColumns(slice(leaf.start, leaf.stop), others)


def masked_observation_tree(num_actions, board, *, layout, header):
    """The SpaceTree of an env whose observation row is its legal-action mask then its
    board: Dict(action_mask=Box(0, 1, [num_actions]), board=`board`), keys in sorted
    order as gymnasium lays them out. `layout` is (mask offset, board offset, row size)
    as the C `header` writes rows, checked against the tree's."""
    tree = SpaceTree(spaces.Dict({
        "action_mask": spaces.Box(0.0, 1.0, (num_actions,), np.float32), "board": board}))
    in_tree = (tree.leaf("action_mask").start, tree.leaf("board").start, tree.size)
    if in_tree != tuple(layout):
        raise RuntimeError(f"{header} writes rows laid out as {tuple(layout)} (mask offset, board offset, size), "
                           f"the observation tree as {in_tree}")
    return tree


def spec_spaces(obs_low: np.ndarray, obs_high: np.ndarray, obs_dtype: np.dtype, act_low: np.ndarray,
                act_high: np.ndarray, discrete: bool, obs_shape: tuple | None = None,
                act_shape: tuple | None = None) -> tuple[spaces.Box, gymnasium.Space]:
    """The (observation, action) spaces of a native env's spec, from its flat float32
    bounds (env.h: PcEnvSpec.obs_bounds, act_bounds): a Box of `obs_dtype`, and Discrete
    (one element) or MultiDiscrete of the integers in [act_low, act_high] when `discrete`,
    else a float32 Box. The shapes, when given, are those the rows present instead of
    flat ones (numba envs keep their user's). ValueError for bounds no space can have."""
    for what, low, high in (("observation", obs_low, obs_high), ("action", act_low, act_high)):
        if not (low <= high).all():  # NaN fails too
            raise ValueError(f"{what} bounds must have low <= high for every element, got {low} and {high}")
    obs_dtype = np.dtype(obs_dtype)
    if obs_dtype == np.uint8 and not _integers_in(obs_low, obs_high, 0, 255):
        raise ValueError(f"uint8 observation bounds must be integers in [0, 255], got {obs_low} and {obs_high}")
    observation = spaces.Box(_shaped(obs_low.astype(obs_dtype), obs_shape, "observation"),
                             _shaped(obs_high.astype(obs_dtype), obs_shape, "observation"), dtype=obs_dtype)
    if not discrete:
        return observation, spaces.Box(_shaped(act_low, act_shape, "action"), _shaped(act_high, act_shape, "action"),
                                       dtype=np.float32)
    if not _integers_in(act_low, act_high, -2**31, 2**31 - 1):
        raise ValueError(f"discrete action bounds must be int32 integers, got {act_low} and {act_high}")
    start, counts = act_low.astype(np.int64), act_high.astype(np.int64) - act_low.astype(np.int64) + 1
    if start.size == 1:
        return observation, spaces.Discrete(int(counts[0]), start=int(start[0]))
    return observation, spaces.MultiDiscrete(counts, start=start)


def _integers_in(low: np.ndarray, high: np.ndarray, smallest: int, largest: int) -> bool:
    values = np.concatenate([low, high]).astype(np.float64)
    return bool(np.all((values >= smallest) & (values <= largest) & (values == np.round(values))))


def _shaped(values: np.ndarray, shape: tuple | None, what: str) -> np.ndarray:
    if shape is None:
        return values
    if math.prod(shape) != values.size:
        raise ValueError(f"{what} shape {tuple(shape)} does not hold the {values.size} elements of a row")
    return values.reshape(shape)


def space_to_data(space: gymnasium.Space) -> dict[str, Any]:
    """`space` as plain data (dicts, lists, str, ints and arrays), which a checkpoint
    loads without unpickling anything; `space_from_data` makes the space again."""
    if isinstance(space, spaces.Box):
        return {"type": "Box", "low": _bound(space.low), "high": _bound(space.high), "shape": list(space.shape),
                "dtype": space.dtype.str}
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec, "start": space.start, "dtype": space.dtype.str}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.atleast_1d(space.n).tolist()}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "keys": list(space.spaces), "spaces": [space_to_data(item) for item in space.values()]}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_data(item) for item in space.spaces]}
    raise TypeError(f"cannot record a {type(space).__name__} space (Box, Discrete, MultiDiscrete, MultiBinary, "
                    f"Dict and Tuple can be)")


def _bound(bound: np.ndarray) -> float | list:
    """A Box bound as plain numbers (which may be infinite, unlike a checkpoint's arrays):
    one number when every entry is the same (images: 0 and 255), else a nested list."""
    first = bound.flat[0].item() if bound.size else 0
    return first if (bound == first).all() else bound.tolist()


def space_from_data(data: dict[str, Any]) -> gymnasium.Space:
    """The space `space_to_data` recorded."""
    kind = data["type"]
    if kind == "Box":
        shape, dtype = tuple(data["shape"]), np.dtype(data["dtype"])
        low, high = (np.broadcast_to(np.asarray(data[name], dtype), shape) for name in ("low", "high"))
        return spaces.Box(low, high, shape, dtype=dtype)
    if kind == "Discrete":
        return spaces.Discrete(data["n"], start=data["start"])
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(data["nvec"], dtype=np.dtype(data["dtype"]), start=data["start"])
    if kind == "MultiBinary":
        return spaces.MultiBinary(data["n"] if len(data["n"]) > 1 else data["n"][0])
    if kind == "Dict":
        return spaces.Dict(list(zip(data["keys"], map(space_from_data, data["spaces"]))))  # the recorded order
    if kind == "Tuple":
        return spaces.Tuple(tuple(map(space_from_data, data["spaces"])))
    raise ValueError(f"unknown recorded space type {kind!r}")
