"""`puffercore export RUN --format onnx|torchscript`: a checkpoint's policy as one file
that runs without puffercore (onnxruntime, or torch.jit.load), giving the actions
`ppo.Policy.load(RUN).act` gives.

    path = export_policy("runs/cartpole-...", "onnx")                  # runs/cartpole-.../policy.onnx
    path = export_policy("runs/my-run", "torchscript", policy=MyPolicy, output="my_policy.pt")

The file holds `ppo.deploy.DeployedNetwork`, traced (torch.jit.trace; ONNX by torch's
TorchScript-based exporter, opset 17): observation normalization folded in, the action
mask applied. Inputs: `observations` [batch, *observation_space.shape] in the space's
dtype (and a recurrent policy's `state_0`, `state_1`, ... [batch, ...], zeros at an
episode's start); outputs: `actions` (greedy; Box actions before clipping to the bounds),
`params` (masked logits or Gaussian means), `value`, and a recurrent policy's
`new_state_0`, ... Every batch dimension is dynamic.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from typing import Any

import numpy as np
import torch

from puffercore import run

FORMATS = {"onnx": "policy.onnx", "torchscript": "policy.pt"}  # format -> default file name in the run directory
ONNX_OPSET = 17


def export_policy(path: str, format: str, output: str | None = None, policy: Any = None) -> str:
    """Write the policy of the run directory or checkpoint `path` in `format` ("onnx" or
    "torchscript") to `output` (default: FORMATS' name beside the checkpoint); `policy`
    as for `ppo.Policy.load`. Returns the path written."""
    from puffercore.ppo.deploy import Policy

    if format not in FORMATS:
        raise ValueError(f"format must be one of {list(FORMATS)}, got {format!r}")
    if format == "onnx" and importlib.util.find_spec("onnx") is None:
        raise ImportError('exporting to ONNX needs the onnx package: pip install "puffercore[onnx]"')
    deployed = Policy.load(path, policy)
    deployed.network.requires_grad_(False)  # the file's outputs are plain tensors, not autograd's
    output = output or os.path.join(os.path.dirname(run.checkpoint_path(path)), FORMATS[format])
    space = deployed.observation_space
    batch = 2  # traced with a batch of 2; the batch dimension stays dynamic
    observations = torch.as_tensor(np.zeros((batch, *space.shape), space.dtype))
    state = deployed.policy.initial_state(batch, "cpu") or ()
    inputs = (observations, *state)
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    temporary = f"{output}.tmp"
    try:
        _write(deployed, format, inputs, len(state), temporary)
        os.replace(temporary, output)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return output


def _write(deployed, format: str, inputs: tuple, state_size: int, path: str) -> None:
    with torch.no_grad(), warnings.catch_warnings():
        # The TorchScript-based ONNX exporter is deprecated in torch 2.9+ but needs no
        # onnxscript; tracing warns on the policies' shape checks, which are constant.
        warnings.simplefilter("ignore")
        if format == "torchscript":
            torch.jit.trace(deployed.network, inputs, check_trace=False).save(path)
            return
        inputs_named = ["observations", *(f"state_{index}" for index in range(state_size))]
        outputs_named = ["actions", "params", "value", *(f"new_state_{index}" for index in range(state_size))]
        torch.onnx.export(deployed.network, inputs, path, dynamo=False, opset_version=ONNX_OPSET,
                          input_names=inputs_named, output_names=outputs_named,
                          dynamic_axes={name: {0: "batch"} for name in inputs_named + outputs_named})
