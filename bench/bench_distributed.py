"""Data-parallel PPO scaling: the same preset on 1, 2, ... ranks under torchrun (gloo on CPU,
NCCL on CUDA), env steps per second, time to solve and the scaling efficiency.

    python bench/bench_distributed.py                      # 1 and 2 ranks, the cartpole preset
    python bench/bench_distributed.py --ranks 1 2 4 8 --env snake --steps 5000000

Each rank steps its own vector env of the preset's size, so N ranks collect N times the
transitions per update (the global batch grows with the ranks, as in PufferLib and
CleanRL's multi-GPU PPO). Efficiency = SPS(N) / (N * SPS(1)). On a machine with fewer
cores than ranks x (1 + env workers) the ranks share cores and the efficiency says so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SOLVED = 475.0


def one_rank_job(env: str, steps: int, out: str, solved: float) -> None:
    """What each torchrun worker runs; rank 0 writes the result to `out`."""
    from puffercore import ppo

    start = time.perf_counter()
    solved_at: dict = {}

    def until(trainer) -> bool:
        recent = trainer.recent_return()
        if recent is not None and recent >= solved and not solved_at:
            solved_at.update(seconds=time.perf_counter() - start, steps=trainer.global_step)
        return False

    config = ppo.PPOConfig.for_env(env, total_timesteps=steps, quiet=True, tensorboard=False,
                                   checkpoint_interval=0, run_dir=tempfile.mkdtemp(prefix="bench-distributed-"))
    trainer = ppo.train(config, env, until=until)
    if trainer.group.is_main:
        with open(out, "w") as file:
            json.dump({"sps": trainer.global_step / trainer.elapsed, "seconds": trainer.elapsed,
                       "solved_seconds": solved_at.get("seconds"), "final": trainer.recent_return()}, file)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--env", default="cartpole", help="an ocean preset (default cartpole)")
    parser.add_argument("--steps", type=int, default=1_000_000, help="env steps over all ranks (default 1M)")
    parser.add_argument("--solved", type=float, default=SOLVED, help="recent return counted as solved (default 475)")
    parser.add_argument("--worker", nargs=3, metavar=("ENV", "STEPS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        one_rank_job(args.worker[0], int(args.worker[1]), args.worker[2], args.solved)
        return

    print(f"{args.env}, {args.steps:,} env steps over all ranks; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'ranks':>5} {'steps/s':>12} {'efficiency':>10} {'seconds':>8} {'to solve':>9} {'final return':>12}")
    baseline = None
    for ranks in args.ranks:
        out = tempfile.mktemp(suffix=".json")
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
                   os.path.abspath(__file__), "--solved", str(args.solved), "--worker", args.env, str(args.steps), out]
        subprocess.run(command, check=True, capture_output=True, text=True)
        with open(out) as file:
            result = json.load(file)
        os.remove(out)
        baseline = baseline or result["sps"] / ranks
        solve = "-" if result["solved_seconds"] is None else f"{result['solved_seconds']:.1f} s"
        print(f"{ranks:>5} {result['sps']:>12,.0f} {result['sps'] / (ranks * baseline):>10.2f} "
              f"{result['seconds']:>8.1f} {solve:>9} {result['final'] or float('nan'):>12.1f}", flush=True)


if __name__ == "__main__":
    main()
