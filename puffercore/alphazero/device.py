"""AlphaZero's network evaluations on a CUDA device (`--device cuda`).

BatchedMCTS asks for a batch of leaf positions per search round. On the device the
frozen copy (`puffercore.frozen_copy.FrozenCopy`, in bfloat16 with precision "auto")
lives in GPU memory, and each call moves data once each way: the observations and legal
masks are packed side by side into one pinned host buffer and go over in one copy, the
priors and values come back in one copy into another, and the forward between them is a
CUDA graph replay (a few kernels' launch cost instead of one Python dispatch per op).

A graph has fixed shapes, so a batch is padded to its bucket: the lane's most rows, or a
half, a quarter or an eighth of it (a smaller forward pays on a GPU only in launches).
Rows left over from earlier calls fill the padding; their answers are never read.

Every thread that evaluates at once needs a lane of its own (a CUDA stream, staging
buffers and graphs): `DeviceEvaluator(..., lanes=T, max_rows=R)` makes T lanes and
captures their graphs up front, in the constructing thread, before the self-play
threads start (a capture must not overlap other threads' CUDA work); each calling thread
then takes a free lane on its first call. An evaluator made without lanes makes one on
its first call and captures buckets as rows need them: for one thread at a time (the
evaluation agent's). Where capture fails the lane runs the same forward eagerly, after
one printed line.

On the CPU the same code runs with plain buffers and no graphs (what the CPU tests
check); the trainer's CPU default takes the traced evaluator of `network.make_evaluator`.
"""

from __future__ import annotations

import math
import sys
import threading
from dataclasses import dataclass

import numpy as np
import torch

from puffercore.checks import check_int
from puffercore.frozen_copy import FrozenCopy

# Buckets below the most rows: 1/2, 1/4 and 1/8 of it.
SMALLER_BUCKETS = 3
# Eager forwards on the lane's stream before a capture (cuDNN and cuBLAS set themselves up),
# after the one that sized the bucket.
WARMUP_RUNS = 1


@dataclass
class _Bucket:
    """One padded batch size: pinned host staging, device buffers and the graph."""
    host_in: torch.Tensor  # [rows, observation size + actions] float32
    device_in: torch.Tensor
    host_out: torch.Tensor  # [rows, actions + players] float32
    device_out: torch.Tensor  # the graph's output, or the last eager forward's
    graph: object = None  # torch.cuda.CUDAGraph, or None: run eagerly


class _Lane:
    """One thread's stream and buckets."""

    def __init__(self, device: torch.device, lazy_capture: bool):
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        if self.stream is not None:  # the copy's weights were written on the current stream
            self.stream.wait_stream(torch.cuda.current_stream(device))
        self.buckets: dict[int, _Bucket] = {}
        self.lazy_capture = lazy_capture


class DeviceEvaluator:
    """BatchedMCTS's evaluator (`(observations, legal_masks) -> (priors, values)`) on the
    device of `model`, a FrozenCopy of `PriorsAndValues` (see the module docstring)."""

    def __init__(self, model: FrozenCopy, observation_shape: tuple[int, ...], num_actions: int,
                 lanes: int = 0, max_rows: int | None = None):
        self.model = model
        self.device = next(model.model.parameters()).device
        self.observation_shape = tuple(observation_shape)
        self.observation_size, self.num_actions = math.prod(self.observation_shape), num_actions
        self._lock = threading.Lock()
        self._local = threading.local()
        self._free: list[_Lane] = []
        self.mode = "graphed" if self.device.type == "cuda" else "eager"  # "eager" after a failed capture
        if lanes:
            check_int(max_rows, "max_rows", 1)
        for _ in range(lanes):
            lane = _Lane(self.device, lazy_capture=False)
            for rows in sorted({max(1, max_rows >> k) for k in range(SMALLER_BUCKETS + 1)}):
                self._make_bucket(lane, rows)
            self._free.append(lane)

    def __call__(self, observations: np.ndarray, legal_masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lane = getattr(self._local, "lane", None)
        if lane is None:
            with self._lock:
                lane = self._free.pop() if self._free else _Lane(self.device, lazy_capture=True)
            self._local.lane = lane
        rows = len(observations)
        bucket = self._bucket_for(lane, rows)
        staged = bucket.host_in.numpy()
        staged[:rows, :self.observation_size] = observations.reshape(rows, -1)
        staged[:rows, self.observation_size:] = legal_masks
        with torch.inference_mode(), torch.cuda.stream(lane.stream):  # stream None (the CPU's): no-op
            bucket.device_in.copy_(bucket.host_in, non_blocking=True)
            if bucket.graph is not None:
                bucket.graph.replay()
            else:
                bucket.device_out = self._forward(bucket.device_in)
            bucket.host_out.copy_(bucket.device_out, non_blocking=True)
        if lane.stream is not None:
            lane.stream.synchronize()  # releases the GIL while the GPU works
        answers = bucket.host_out.numpy()[:rows]
        # Copies: the staging buffer is overwritten by the next call, and a cache keeps rows.
        return answers[:, :self.num_actions].copy(), answers[:, self.num_actions:].copy()

    def _forward(self, packed: torch.Tensor) -> torch.Tensor:
        """Unpack the staged rows, evaluate them, and pack priors and values side by side."""
        observations = packed[:, :self.observation_size].reshape(-1, *self.observation_shape)
        legal_masks = packed[:, self.observation_size:] > 0.5
        priors, values = self.model(observations, legal_masks)
        return torch.cat((priors, values), dim=1)

    def _bucket_for(self, lane: _Lane, rows: int) -> _Bucket:
        fitting = [size for size in lane.buckets if size >= rows]
        if fitting:
            return lane.buckets[min(fitting)]
        # A lane made up front never captures later (other threads run); rows beyond its
        # buckets (more than max_rows) get an eager bucket of their own.
        return self._make_bucket(lane, 1 << (rows - 1).bit_length(), capture=lane.lazy_capture)

    def _make_bucket(self, lane: _Lane, rows: int, capture: bool = True) -> _Bucket:
        width_in = self.observation_size + self.num_actions
        pinned = self.device.type == "cuda"
        host_in = torch.zeros(rows, width_in, pin_memory=pinned)  # zero masks: padding rows stay finite
        with torch.inference_mode(), torch.cuda.stream(lane.stream):  # made and zeroed on the lane's stream
            device_in = torch.zeros(rows, width_in, device=self.device)
            device_out = self._forward(device_in)  # its shape, and the first warm-up
        bucket = _Bucket(host_in, device_in, torch.empty(device_out.shape, pin_memory=pinned), device_out)
        if capture and self.mode == "graphed":
            self._capture(lane, bucket)
        lane.buckets[rows] = bucket
        return bucket

    def _capture(self, lane: _Lane, bucket: _Bucket) -> None:
        try:
            with torch.inference_mode():
                with torch.cuda.stream(lane.stream):
                    for _ in range(WARMUP_RUNS):
                        self._forward(bucket.device_in)
                lane.stream.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, stream=lane.stream):
                    bucket.device_out = self._forward(bucket.device_in)
            bucket.graph = graph
        except Exception as error:  # the platform or an op refused: the same forward, eagerly
            self.mode = "eager"
            reason = (str(error).strip().splitlines() or [""])[0][:160]
            print(f"puffercore: CUDA graph capture of AlphaZero's evaluations failed ({type(error).__name__}: "
                  f"{reason}); they run eagerly", file=sys.stderr, flush=True)

