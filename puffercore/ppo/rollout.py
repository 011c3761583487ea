"""PPO's rollout storage: a `RolloutBuffer` of N rows x T steps, preallocated on the
policy's device, views of its transitions, minibatches over them and prioritized row
sampling.

Only the fields that need the bootstrap slot are `[N, T + 1]`: `obs`, `value` and
`mask` (slot t: the observation of step t; slot T: the one after the last step, whose
value GAE bootstraps from). Per-transition fields are `[N, T]`: `action`, `log_prob`,
`reward`, `terminal`, `truncation`, `final_value`, and the `advantage` and `return`
the algorithm adds. A recurrent policy's state at slot 0 is per row: `state_0`,
`state_1`, ... (`state_fields`), one per tensor of its state, each `[N, ...]`.

    rollout = RolloutBuffer(rows, horizon, vec.single_observation_space, policy, device)
    view = rollout.transition_view()                     # [N, T] views of every field
    for minibatch in iterate_minibatches(view, 256, generator): ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import numpy as np
import torch

if TYPE_CHECKING:
    from puffercore.ppo.policy import ActorCritic

BOOTSTRAP_FIELDS = ("obs", "value", "mask")  # [N, T + 1]
STATE_PREFIX = "state_"  # per-row fields: the recurrent state at slot 0, [N, ...]


def state_fields(count: int) -> tuple[str, ...]:
    """The rollout's names of the `count` tensors of a recurrent state."""
    return tuple(f"{STATE_PREFIX}{index}" for index in range(count))


class RolloutBuffer:
    """The rollout, filled row by row from a vector env's (possibly staggered) batches.

    Each row has its own next slot (`position`; T + 1: full). The step a row takes on
    its bootstrap observation (slot T) is the first transition of the next rollout: its
    action, log-prob and recurrent state wait in `carried` until `start_rollout` moves
    them, with that observation, to slot 0. A row whose batch comes back once more after
    it filled up (threads work stealing) "ran ahead": that step was sent but not kept,
    and the row starts the next rollout at slot 0 with the observation it gets next."""

    def __init__(self, rows: int, horizon: int, observation_space, policy: "ActorCritic", device):
        self.rows, self.horizon, self.device = rows, horizon, torch.device(device)
        obs_dtype = torch.from_numpy(np.empty(0, observation_space.dtype)).dtype
        head = policy.head
        slots, steps = (rows, horizon + 1), (rows, horizon)
        self.fields = {
            "obs": torch.zeros(*slots, *observation_space.shape, dtype=obs_dtype, device=device),
            "value": torch.zeros(slots, device=device),
            "mask": torch.zeros(slots, dtype=torch.bool, device=device),
            "action": torch.zeros(*steps, *head.action_shape, dtype=head.action_dtype, device=device),
            "log_prob": torch.zeros(steps, device=device),
            "reward": torch.zeros(steps, device=device),
            "terminal": torch.zeros(steps, dtype=torch.bool, device=device),
            "truncation": torch.zeros(steps, dtype=torch.bool, device=device),
            "final_value": torch.zeros(steps, device=device),
        }
        self.carried = {
            "action": torch.zeros(rows, *head.action_shape, dtype=head.action_dtype, device=device),
            "log_prob": torch.zeros(rows, device=device),
        }
        state = policy.initial_state(rows, device)
        self.state_fields = state_fields(len(state or ()))
        for fields in (self.fields, self.carried):
            for name, part in zip(self.state_fields, state or ()):
                fields[name] = torch.zeros_like(part)
        self.position = np.zeros(rows, np.int64)
        self.ran_ahead = np.zeros(rows, np.bool_)
        # On the CPU collection writes through NumPy views of the fields: a NumPy
        # assignment takes under a microsecond, a torch one about three (eight a step).
        self.host = self.device.type == "cpu"
        self.field_arrays = {name: tensor.numpy() for name, tensor in self.fields.items()} if self.host else None
        self.carried_arrays = {name: tensor.numpy() for name, tensor in self.carried.items()} if self.host else None

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.fields[name]

    def __setitem__(self, name: str, tensor: torch.Tensor) -> None:
        self.fields[name] = tensor
        if self.host and name in self.field_arrays:  # collection writes the new tensor
            self.field_arrays[name] = tensor.numpy()

    def reset(self) -> None:
        """Every row back to slot 0 (the envs were reset: nothing carries over)."""
        self.position[:] = 0
        self.ran_ahead[:] = False

    def start_rollout(self) -> None:
        """Rows that filled their last rollout exactly already hold the first step of this
        one: the observation in slot T and its step in `carried`; move them to slot 0."""
        full = self.position == self.horizon + 1
        carried = full & ~self.ran_ahead
        if carried.any():
            index = slice(None) if carried.all() else np.flatnonzero(carried)
            fields, carried_fields = self.field_arrays, self.carried_arrays
            if not self.host:
                fields, carried_fields = self.fields, self.carried
                if not isinstance(index, slice):
                    index = torch.as_tensor(index, device=self.device)
            for name in BOOTSTRAP_FIELDS:
                fields[name][index, 0] = fields[name][index, -1]
            for name, values in carried_fields.items():
                if name in self.state_fields:
                    fields[name][index] = values[index]
                else:
                    fields[name][index, 0] = values[index]
        self.position[carried] = 1
        self.position[full & self.ran_ahead] = 0
        self.ran_ahead[:] = False

    def filling(self) -> bool:
        """Whether some row still has a slot to fill."""
        return bool((self.position <= self.horizon).any())

    def batch_slots(self, rows: slice | np.ndarray) -> "BatchSlots":
        """Where a batch's rows (`Batch.rows`: a slice or an index array) write next."""
        return BatchSlots(self, rows)

    def transition_view(self) -> dict[str, torch.Tensor]:
        """Every field as a view, transition-aligned: `[N, T]` leading dims (the first T
        slots of obs, value and mask, with the action, reward and flags of the transition
        taken there), per-row fields as they are."""
        return {name: tensor[:, :self.horizon] if name in BOOTSTRAP_FIELDS else tensor
                for name, tensor in self.fields.items()}


class BatchSlots:
    """One batch's rows of a RolloutBuffer and the slot each writes next. Usually every
    row of a batch is at the same slot (one basic-indexing write per field); rows at
    different slots (a processes backend mixing batches) take the scattered path."""

    def __init__(self, rollout: RolloutBuffer, rows: slice | np.ndarray):
        self.rollout, self.rows = rollout, rows
        # A copy: the batch's row ids can be a read-only view, which torch won't wrap.
        self.index = rows if isinstance(rows, slice) else torch.tensor(rows, device=rollout.device)
        self.row_ids = np.arange(rollout.rows)[rows]
        self.position = position = rollout.position[rows]
        self.same_slot = bool(position[0] == position[-1] and (position == position[0]).all())
        # The transition that led to this batch's observations sits in slot position - 1
        # (none at slot 0; not kept for rows that already filled this rollout).
        self.has_previous = (position >= 1) & (position <= rollout.horizon)

    def store_transition(self, fields: dict[str, np.ndarray | torch.Tensor]) -> None:
        """Reward and flags of the transition that led to this batch's observations."""
        self._write(False, fields, self.position - 1, self.has_previous)

    def store_final_values(self, at: np.ndarray, values: np.ndarray | torch.Tensor) -> None:
        """V(final observation) of the batch's rows `at` (truncated there) for that transition."""
        device = self.rollout.device
        self.rollout.fields["final_value"][torch.as_tensor(self.row_ids[at], device=device),
                                           torch.as_tensor(self.position[at] - 1, device=device)] = \
            torch.as_tensor(values, device=device)

    def store_step(self, observed: dict[str, np.ndarray | torch.Tensor], taken: dict[str, np.ndarray | torch.Tensor],
                   state=None) -> None:
        """This batch's observations (`observed`: obs, value, mask) and the step `taken`
        on them (action, log-prob), with the recurrent `state` they were taken in. A step
        taken on slot T is the next rollout's first: it goes to `carried`."""
        horizon, position = self.rollout.horizon, self.position
        self._write(False, observed, position, position <= horizon)
        self._write(False, taken, position, position < horizon)
        self._write(True, taken, None, position == horizon)
        if state is not None:
            state = dict(zip(self.rollout.state_fields, state))
            self._write(False, state, None, position == 0)
            self._write(True, state, None, position == horizon)

    def advance(self) -> None:
        rollout, position = self.rollout, self.position
        rollout.ran_ahead[self.rows] |= position > rollout.horizon
        rollout.position[self.rows] = np.minimum(position + 1, rollout.horizon + 1)

    def _write(self, carried: bool, fields: dict, slots: np.ndarray | None, selected: np.ndarray) -> None:
        """field[row, slot] = fields[name] (NumPy arrays or tensors) for the selected rows
        of the batch, into the rollout's fields or, with `carried`, into `carried`
        without a slot (`slots` None)."""
        rollout = self.rollout
        if not (selected[0] if self.same_slot else selected.any()):
            return
        if rollout.host:
            target = rollout.carried_arrays if carried else rollout.field_arrays
            rows, values = self.rows, {name: value.numpy() if isinstance(value, torch.Tensor) else value
                                       for name, value in fields.items()}
        else:
            target = rollout.carried if carried else rollout.fields
            rows, values = self.index, {name: torch.as_tensor(value, device=rollout.device)
                                        for name, value in fields.items()}
        if self.same_slot:
            at = rows if slots is None else (rows, int(slots[0]))
            for name, value in values.items():
                target[name][at] = value
            return
        at = (self.row_ids[selected],) if slots is None else (self.row_ids[selected], slots[selected])
        if not rollout.host:
            at = tuple(torch.as_tensor(part, device=rollout.device) for part in at)
            selected = torch.as_tensor(selected, device=rollout.device)
        for name, value in values.items():
            target[name][at] = value[selected]


def iterate_minibatches(view: dict[str, torch.Tensor], minibatch_size: int, generator: torch.Generator,
                        order: torch.Tensor | None = None, by_rows: bool = False,
                        fields: tuple[str, ...] | None = None) -> Iterator[dict[str, torch.Tensor]]:
    """Minibatches of a transition view: of its N x T transitions (per-row fields left
    out), or with `by_rows` of its N whole rows. In `order` (default a fresh shuffle),
    `minibatch_size` at a time, the last one possibly smaller; each minibatch also
    carries "index", the positions it took (transition t of row n is n * T + t).
    `fields`: the names to take (default all). Transitions are gathered once per call,
    one shuffled copy of each field, and the minibatches are slices of it: one gather
    per field and pass instead of one per minibatch (small minibatches made the
    gathers a tenth of the update)."""
    rows, horizon = view["reward"].shape
    count = rows if by_rows else rows * horizon
    if order is None:
        order = torch.randperm(count, generator=generator).to(view["reward"].device)
    taken = {name: tensor for name, tensor in view.items() if fields is None or name in fields}
    if by_rows:
        for start in range(0, len(order), minibatch_size):
            index = order[start : start + minibatch_size]
            yield {"index": index, **{name: tensor[index] for name, tensor in taken.items()}}
        return
    # Flattened to [N * T, ...] first (a copy for the bootstrap fields' views): one
    # index_select a field, about half the time of indexing [N, T] by two index tensors.
    shuffled = {"index": order, **{name: tensor.reshape(count, *tensor.shape[2:]).index_select(0, order)
                                   for name, tensor in taken.items() if not name.startswith(STATE_PREFIX)}}
    for start in range(0, len(order), minibatch_size):
        yield {name: tensor[start : start + minibatch_size] for name, tensor in shuffled.items()}


def row_priorities(advantages: torch.Tensor, mask: torch.Tensor, alpha: float, beta: float):
    """Prioritized rows: sampling probabilities p ~ (sum_t |A|)^alpha over the rows of
    `advantages` [N, T] (padding entries excluded), and importance weights (N p)^-beta
    normalised by their max (rows with p = 0 are never drawn; their weight is 0)."""
    priority = (advantages.abs() * mask).sum(1).pow(alpha)
    total = priority.sum()
    probability = priority / total if total > 0 else torch.full_like(priority, 1.0 / len(priority))
    weights = torch.where(probability > 0, (len(probability) * probability).pow(-beta), torch.zeros_like(probability))
    return probability, weights / weights.max()
