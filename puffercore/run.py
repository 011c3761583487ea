"""What every trainer's run shares: its directory, its named seeds and the files that
describe it (PPO and AlphaZero alike).

    seeds = named_seeds(config.seed, ("envs", "torch", "sampling"))         # puffercore.seeding
    run_dir = default_run_dir("cartpole")             # runs/cartpole-20261124-120000
    write_run_files(run_dir, config_dict, config.seed, seeds)   # config.json, seeds.json
    checkpoint.save(checkpoint_path(run_dir), state)
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

CHECKPOINT_NAME = "checkpoint.pt"


def default_run_dir(name: str) -> str:
    """runs/NAME-TIME, with characters that don't belong in a folder name replaced."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
    return os.path.join("runs", f"{safe}-{time.strftime('%Y%m%d-%H%M%S')}")


def checkpoint_path(run_dir_or_file: str | os.PathLike) -> str:
    """The checkpoint of a run directory (a path to a file is returned as it is)."""
    path = os.fspath(run_dir_or_file)
    return os.path.join(path, CHECKPOINT_NAME) if os.path.isdir(path) else path


def write_run_files(run_dir: str, config: dict[str, Any], run_seed: int, seeds: dict[str, int]) -> None:
    """config.json (passable back to the trainer) and seeds.json in `run_dir`."""
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "config.json"), "w") as file:
        json.dump(config, file, indent=2)
    with open(os.path.join(run_dir, "seeds.json"), "w") as file:
        json.dump({"run": run_seed, **seeds}, file, indent=2)
