"""Collection with the rollout on a CUDA device (UpdatePlan's collection "device"): each
step's host work is a few memcpys, and the policy's forward and sampling are one CUDA
graph replayed at the batch's fixed shape.

    collection = DeviceCollection(policy, rollout, action_rng)   # rollout: a RolloutBuffer on the device
    actions = collection.step(batch)       # a vector env's Batch -> the actions to send (a NumPy view)
    outputs = collection.gae_outputs()     # where GAE writes the advantages and returns

A step, per batch (one set of static buffers per batch size, made at its first batch):
- the batch's observations, rewards and flags are copied into pinned host tensors
  (NumPy views of them, so a copy is a memcpy) and from there to the device
  (`non_blocking`), once each;
- the action noise is drawn in place into a static buffer from the trainer's generator
  (`ActionHead.draw`), outside the graph: the graph holds no random-number state, and
  the numbers are the ones the host path's `torch.multinomial` / `torch.randn` draw from
  the same generator, so both paths take the same actions;
- the graph replays `policy.output` and `ActionHead.sample_with` on the static
  observations and noise, writing actions, log-probabilities, values and the env's
  actions into static buffers; a second graph gives V(final observation) for batches
  where a row was truncated (its bootstrap);
- the results are copied into the rollout's slots (`BatchSlots`, which takes device
  tensors), the env's actions come back through a pinned buffer, and one event wait
  ends the step (the actions must be on the host before `send`).

Nothing is allocated per step when the batch's rows are one block at one slot (every
synchronous batch, every fixed-block staggered batch): the writes are copies into views.
Rows at scattered slots (the processes backend mixing batches) take BatchSlots' indexed
path, which builds index tensors.

Capture warms up on the first batch of each size (on a side stream), then records the
graphs; where capture fails, one line says why on stderr and every step runs the same
functions eagerly. With `capture=False` (the default off CUDA) and the rollout on the
CPU, the same code runs on CPU tensors without pinned buffers or graphs: what the CPU
tests compare with the trainer's host path. Recurrent policies stay on the host path
(ppo.plan).
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from puffercore.ppo.policy import ActorCritic
from puffercore.ppo.rollout import BatchSlots, RolloutBuffer

# Eager runs before capture: cuBLAS handles and workspaces, and the policy's first-forward
# check, must exist before the graph records addresses.
WARMUP_RUNS = 3
STAGED = ("obs", "final_obs", "reward", "flags")  # host -> device, each step (final_obs: on a truncation)
TERMINAL, TRUNCATION, MASK = range(3)  # the rows of the staged flags


class _Buffers:
    """One batch size's static tensors on the device, and their pinned host twins (the
    device tensors themselves when the device is the CPU)."""

    def __init__(self, size: int, policy: ActorCritic, observation: torch.Tensor, device: torch.device):
        head = policy.head
        self.device = {
            "obs": torch.zeros(size, *observation.shape, dtype=observation.dtype, device=device),
            "final_obs": torch.zeros(size, *observation.shape, dtype=observation.dtype, device=device),
            "reward": torch.zeros(size, device=device),
            "flags": torch.zeros(3, size, dtype=torch.bool, device=device),
            "action": torch.zeros(size, *head.action_shape, dtype=head.action_dtype, device=device),
            "env_action": torch.zeros(size, *head.action_shape, device=device,
                                      dtype=torch.float32 if head.is_continuous else torch.int32),
            "log_prob": torch.zeros(size, device=device),
            "value": torch.zeros(size, device=device),
            "final_value": torch.zeros(size, device=device),
        }
        self.noise = head.noise(size, device)
        pinned = device.type == "cuda"
        self.host = {name: torch.empty(self.device[name].shape, dtype=self.device[name].dtype, pin_memory=True)
                     if pinned else self.device[name] for name in (*STAGED, "env_action")}
        self.arrays = {name: tensor.numpy() for name, tensor in self.host.items()}
        self.graphs: tuple | None = None  # (act, final values): replays of the captured graphs; None: not captured

    def upload(self, final: bool) -> None:
        """The staged host tensors to the device (a no-op where they are the same)."""
        for name in STAGED:
            if self.host[name] is not self.device[name] and (final or name != "final_obs"):
                self.device[name].copy_(self.host[name], non_blocking=True)


class DeviceCollection:
    """Collection steps of `policy` into `rollout` (a RolloutBuffer on the policy's
    device), sampling from `generator`; `values` maps the critic's output to return units
    (the trainer's, for PopArt; its result is a new tensor, copied back) or is None.
    See the module docstring."""

    def __init__(self, policy: ActorCritic, rollout: RolloutBuffer, generator: torch.Generator,
                 values=None, capture: bool | None = None):
        self.policy, self.rollout, self.generator, self.values = policy, rollout, generator, values
        self.device = rollout.device
        self.capture = self.device.type == "cuda" if capture is None else capture  # False once capture failed
        self.sizes: dict[int, _Buffers] = {}
        self.observation = rollout["obs"][0, 0]  # the shape and dtype of one observation
        self.done = torch.cuda.Event() if self.device.type == "cuda" else None
        steps = (rollout.rows, rollout.horizon)
        self.gae = {"rewards": torch.zeros(steps, device=self.device),
                    "advantages": torch.zeros(steps, device=self.device),
                    "returns": torch.zeros(steps, device=self.device)}

    @property
    def mode(self) -> str:
        """"graphed" (every batch size seen so far replays graphs), "warming up" or "eager"."""
        if not self.capture:
            return "eager"
        return "graphed" if self.sizes and all(buffers.graphs for buffers in self.sizes.values()) else "warming up"

    def gae_outputs(self) -> dict[str, torch.Tensor]:
        """Static tensors for GAE's masked rewards, advantages and returns (the update reads
        the same addresses every rollout)."""
        return self.gae

    def step(self, batch) -> np.ndarray:
        """One batch (a vector env's Batch, rewards already checked finite): store the
        transition that led here, act on the new observations, store them and the step;
        returns the env's actions, a view of a buffer the next step of this batch size
        overwrites (every backend's send copies it)."""
        obs, rewards, terminals, truncations, _, _, masks = batch
        slots = self.rollout.batch_slots(batch.rows)
        buffers = self.sizes.get(len(obs)) or self._buffers(len(obs))
        staged, on_device = buffers.arrays, buffers.device
        np.copyto(staged["obs"], obs)
        np.copyto(staged["reward"], rewards)
        flags = staged["flags"]
        np.copyto(flags[TERMINAL], terminals)
        np.copyto(flags[TRUNCATION], truncations)
        np.copyto(flags[MASK], masks)
        truncated = truncations & slots.has_previous
        final = bool(truncated.any())
        if final:
            np.copyto(staged["final_obs"], batch.final_observations)
        buffers.upload(final)
        self.policy.head.draw(buffers.noise, self.generator)
        if self.capture and buffers.graphs is None:
            self._capture(buffers)
        act, final_values = buffers.graphs or (self._act, self._final_values)

        if slots.has_previous.any():
            slots.store_transition({"reward": on_device["reward"], "terminal": on_device["flags"][TERMINAL],
                                    "truncation": on_device["flags"][TRUNCATION]})
            if final:
                final_values(buffers)
                self._store_final_values(slots, buffers, truncated)
        act(buffers)
        if self.values is not None:
            on_device["value"].copy_(self.values(on_device["value"]))
        slots.store_step({"obs": on_device["obs"], "value": on_device["value"], "mask": on_device["flags"][MASK]},
                         {"action": on_device["action"], "log_prob": on_device["log_prob"]})
        slots.advance()
        if buffers.host["env_action"] is not on_device["env_action"]:
            buffers.host["env_action"].copy_(on_device["env_action"], non_blocking=True)
            self.done.record()
            self.done.synchronize()  # the actions, and every copy before them, are done
        return staged["env_action"]

    # ---- what the graphs hold -----------------------------------------------------------
    def _act(self, buffers: _Buffers) -> None:
        on_device = buffers.device
        out = self.policy.output(on_device["obs"])
        actions, log_prob = self.policy.head.sample_with(out.params, self.policy.log_std, buffers.noise)
        on_device["action"].copy_(actions)
        on_device["log_prob"].copy_(log_prob)
        on_device["value"].copy_(out.value)
        on_device["env_action"].copy_(self.policy.head.env_tensor(actions))

    def _final_values(self, buffers: _Buffers) -> None:
        buffers.device["final_value"].copy_(self.policy.output(buffers.device["final_obs"]).value)

    def _store_final_values(self, slots: BatchSlots, buffers: _Buffers, truncated: np.ndarray) -> None:
        """V(final observation) of the truncated rows, in return units, for the
        transition that led here (GAE reads final_value only where truncation is set)."""
        values = buffers.device["final_value"]
        if self.values is not None:
            values.copy_(self.values(values))
        if isinstance(slots.rows, slice) and slots.same_slot:  # one column: a masked copy, no index tensors
            column = self.rollout["final_value"][slots.rows, int(slots.position[0]) - 1]
            torch.where(buffers.device["flags"][TRUNCATION], values, column, out=column)
            return
        at = np.flatnonzero(truncated)
        slots.store_final_values(at, values[torch.as_tensor(at, device=self.device)])

    # ---- buffers and capture ------------------------------------------------------------
    def _buffers(self, size: int) -> _Buffers:
        self.sizes[size] = _Buffers(size, self.policy, self.observation, self.device)
        return self.sizes[size]

    def _capture(self, buffers: _Buffers) -> None:
        """Warm up on this batch's staged inputs (the first forward sees real
        observations), then record both graphs; on failure, one line and eager steps."""
        try:
            current = torch.cuda.current_stream(self.device)
            side = torch.cuda.Stream(self.device)
            side.wait_stream(current)
            with torch.cuda.stream(side):
                for _ in range(WARMUP_RUNS):
                    self._act(buffers)
                    self._final_values(buffers)
            current.wait_stream(side)
            act = torch.cuda.CUDAGraph()
            with torch.cuda.graph(act):
                self._act(buffers)
            final_values = torch.cuda.CUDAGraph()
            with torch.cuda.graph(final_values, pool=act.pool()):
                self._final_values(buffers)
        except Exception as error:  # the platform or an op refused: the same functions, eagerly
            self.capture = False
            reason = (str(error).strip().splitlines() or [""])[0][:160]
            print(f"puffercore: CUDA graph capture of collection's forward failed ({type(error).__name__}: "
                  f"{reason}); collection runs eagerly", file=sys.stderr, flush=True)
            return
        buffers.graphs = (lambda _: act.replay(), lambda _: final_values.replay())
