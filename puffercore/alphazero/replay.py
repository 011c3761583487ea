"""AlphaZero's replay buffer: a ring of (observation, legal mask, search policy, value
target) examples from self-play games, sampled uniformly, optionally through the game's
board symmetries."""

from __future__ import annotations

import numpy as np
import torch

from puffercore.checks import check_int


class ReplayBuffer:
    """A ring of (observation, legal mask, search policy, value target) examples with a
    fixed capacity: once full, each new example overwrites the oldest."""

    def __init__(self, capacity: int, observation_shape: tuple[int, ...], num_actions: int, num_players: int):
        check_int(capacity, "capacity", 1)
        self.capacity = capacity
        self.observations = np.zeros((capacity, *observation_shape), dtype=np.float32)
        self.legal_masks = np.zeros((capacity, num_actions), dtype=np.bool_)
        self.policies = np.zeros((capacity, num_actions), dtype=np.float32)
        self.values = np.zeros((capacity, num_players), dtype=np.float32)
        self.write_index = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def extend(self, observations, legal_masks, policies, values) -> None:
        for row in zip(observations, legal_masks, policies, values):
            self.observations[self.write_index], self.legal_masks[self.write_index], \
                self.policies[self.write_index], self.values[self.write_index] = row
            self.write_index = (self.write_index + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def add_game(self, history: list, returns: np.ndarray, moves: int, search_value_weight: float = 0.0,
                 value_discount: float = 1.0) -> None:
        """A finished game of `moves` moves and its recorded positions: `history` holds
        (observation, legal mask, search policy, player to move, root search value by seat,
        proven, moves played before it) per position. Each learns, from its mover's seat,
        the game's final `returns` discounted by `value_discount` per move left to the end
        (`moves` minus the moves before it), mixed with its search's
        root value: (1 - w) * returns * discount^left + w * search value; a position the
        solver proved learns its exact result, discounted the same way."""
        if not history:  # every move of the game had a cheap search
            return
        returns = np.asarray(returns, dtype=np.float32)
        observations, legal_masks, policies, players, search_values, proven, moves_before = zip(*history)
        targets = []
        for player, search, exact, before in zip(players, search_values, proven, moves_before):
            discount = np.float32(value_discount) ** (moves - before)
            target = search * discount if exact else \
                (1 - search_value_weight) * returns * discount + search_value_weight * search
            targets.append(value_targets(target, player))
        self.extend(observations, legal_masks, policies, targets)

    def sample(self, rng: np.random.Generator, batch_size: int, symmetries=()) -> dict[str, torch.Tensor]:
        """`batch_size` examples drawn uniformly with replacement, as tensors. With the
        game's `symmetries`, each example is seen through one of them or as it is, drawn
        uniformly: the same position in another orientation, with the same value."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        index = rng.integers(0, self.size, size=batch_size)
        observations, legal_masks, policies = self.observations[index], self.legal_masks[index], self.policies[index]
        if symmetries:
            seen_through = rng.integers(0, len(symmetries) + 1, size=batch_size)  # 0: as it is
            flat = observations.reshape(batch_size, -1)
            for k, (observation_map, action_map) in enumerate(symmetries, start=1):
                rows = np.flatnonzero(seen_through == k)
                flat[rows] = flat[rows][:, observation_map]
                legal_masks[rows] = legal_masks[rows][:, action_map]
                policies[rows] = policies[rows][:, action_map]
        return {"observations": torch.from_numpy(observations), "legal_masks": torch.from_numpy(legal_masks),
                "policies": torch.from_numpy(policies), "values": torch.from_numpy(self.values[index])}

    def state_dict(self) -> dict:
        return {"observations": self.observations[: self.size], "legal_masks": self.legal_masks[: self.size],
                "policies": self.policies[: self.size], "values": self.values[: self.size],
                "write_index": self.write_index}

    def load_state_dict(self, state: dict) -> None:
        """What `state_dict` gave, checked first (ValueError naming what is wrong): each
        array of this buffer's dtype and shape per example, as many examples in each and
        at most `capacity`, and the write index where the ring's next example goes."""
        if not isinstance(state, dict):
            raise ValueError(f"the replay buffer's state is not a table (got {type(state).__name__})")
        size = None
        for name in ("observations", "legal_masks", "policies", "values"):
            array, mine = state.get(name), getattr(self, name)
            if not isinstance(array, np.ndarray) or array.dtype != mine.dtype or array.shape[1:] != mine.shape[1:]:
                got = f"{array.dtype} {list(array.shape)}" if isinstance(array, np.ndarray) else type(array).__name__
                raise ValueError(f"the replay buffer's {name} must be {mine.dtype} [examples, "
                                 f"{', '.join(map(str, mine.shape[1:]))}], got {got}")
            if size is not None and len(array) != size:
                raise ValueError(f"the replay buffer's arrays hold different numbers of examples ({size} "
                                 f"observations, {len(array)} {name})")
            size = len(array)
        if size > self.capacity:
            raise ValueError(f"the replay buffer holds {size} examples, more than its capacity {self.capacity}")
        write_index = state.get("write_index")
        # The ring fills from 0, so until it is full the next example goes right after the last.
        valid = range(self.capacity) if size == self.capacity else range(size, size + 1)
        if isinstance(write_index, bool) or not isinstance(write_index, (int, np.integer)) or write_index not in valid:
            raise ValueError(f"the replay buffer's write_index must be "
                             f"{'in [0, ' + str(self.capacity) + ')' if size == self.capacity else size} "
                             f"for {size} examples of capacity {self.capacity}, got {write_index!r}")
        for name in ("observations", "legal_masks", "policies", "values"):
            getattr(self, name)[:size] = state[name]
        self.size, self.write_index = size, int(write_index)


def value_targets(returns: np.ndarray, player: int) -> np.ndarray:
    """A game's final returns (by seat) as the value target of a position where `player`
    moved: in observation order, that player first, then the next ones in turn order."""
    return np.roll(np.asarray(returns, dtype=np.float32), -player)
