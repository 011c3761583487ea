"""Data-parallel training on torch.distributed, for PPO and AlphaZero: one process per
rank, each collecting its own experience (vector env steps, self-play games), gradients
averaged across ranks.

    torchrun --standalone --nproc-per-node 2 -m puffercore train cartpole
    torchrun --standalone --nproc-per-node 2 -m puffercore alphazero connect4
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29400 -m puffercore train ...

`Group.from_environment()` reads torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK); a
plain process is a group of one and every collective is a no-op. gloo on CPU, NCCL on
CUDA (one GPU per rank: cuda:LOCAL_RANK). Gradients are all-reduced explicitly after
each backward (the same code path for MLP and LSTM policies, which DDP's forward wrapper
does not fit); everything that decides control flow (target-KL early stop) is reduced
first, so every rank takes the same branch and no collective waits forever. A rank that
dies is torchrun's to handle: its elastic agent stops the other workers and the job
exits with the error.
"""

from __future__ import annotations

import gc
import os
from typing import Iterable

import torch


class Group:
    def __init__(self, rank: int = 0, world_size: int = 1, local_rank: int = 0, owns_process_group: bool = False):
        self.rank, self.world_size, self.local_rank = rank, world_size, local_rank
        self.owns_process_group = owns_process_group

    @classmethod
    def from_environment(cls, device: str) -> "Group":
        """The torchrun job this process belongs to (initializing the process group once),
        or a group of one."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size == 1:
            return cls()
        import torch.distributed as dist

        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        owns = not dist.is_initialized()
        if owns:
            cuda = torch.device(device).type == "cuda"
            if cuda:
                torch.cuda.set_device(local_rank)
            dist.init_process_group(backend="nccl" if cuda else "gloo")
        return cls(dist.get_rank(), dist.get_world_size(), local_rank, owns)

    def close(self, failed: bool = False) -> None:
        """Tear down the process group this Group started (a process that exits with one
        alive can abort in gloo's threads). After a failure nothing waits for the other
        ranks (they may be inside a collective this rank will never join): the error
        propagates, the process exits and torchrun stops the job."""
        if self.owns_process_group and not failed:
            import torch.distributed as dist

            dist.barrier()  # every rank done with its collectives before any tears down (gloo aborts otherwise)
            dist.destroy_process_group()
            # Free the group's C++ side (gloo's threads) now, while the interpreter is
            # whole: left to interpreter shutdown, its destructor can abort the process.
            gc.collect()
            self.owns_process_group = False

    @property
    def is_main(self) -> bool:
        """Rank 0 writes metrics, checkpoints and the console."""
        return self.rank == 0

    def device(self, device: str) -> str:
        """cuda:LOCAL_RANK for a multi-rank CUDA job, else `device` as given."""
        if self.world_size > 1 and torch.device(device).type == "cuda" and torch.device(device).index is None:
            return f"cuda:{self.local_rank}"
        return device

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` summed over ranks, in place (returned for chaining)."""
        if self.world_size > 1:
            import torch.distributed as dist

            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def mean(self, tensor: torch.Tensor) -> torch.Tensor:
        return self.sum(tensor).div_(self.world_size) if self.world_size > 1 else tensor

    def average_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """Every rank's gradients replaced by their mean over ranks, in one all-reduce."""
        if self.world_size == 1:
            return
        grads = [p.grad for p in parameters if p.grad is not None]
        flat = self.mean(torch.cat([grad.reshape(-1) for grad in grads]))
        offset = 0
        for grad in grads:
            grad.copy_(flat[offset: offset + grad.numel()].view_as(grad))
            offset += grad.numel()

    def broadcast_parameters(self, module: torch.nn.Module) -> None:
        """Rank 0's parameters on every rank (identical starting weights)."""
        if self.world_size > 1:
            import torch.distributed as dist

            for tensor in module.state_dict().values():
                dist.broadcast(tensor, src=0)

    def from_main(self, value: float) -> float:
        """Rank 0's `value` on every rank (decisions every rank must take alike)."""
        if self.world_size == 1:
            return value
        return float(self.sum(torch.tensor([value if self.is_main else 0.0], dtype=torch.float64))[0])

    def max(self, value: float) -> float:
        """The largest of every rank's `value`, on every rank (a request any rank made)."""
        if self.world_size == 1:
            return value
        import torch.distributed as dist

        tensor = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return float(tensor[0])

    def share(self, value):
        """Rank 0's `value` (any picklable object, e.g. the run directory it created) on
        every rank."""
        if self.world_size == 1:
            return value
        import torch.distributed as dist

        box = [value if self.is_main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

