"""What every trainer's run shares: its directory, its named seeds, the files that
describe it, and how a signal stops it (PPO and AlphaZero alike).

    seeds = named_seeds(config.seed, ("envs", "torch", "sampling"))         # puffercore.seeding
    run_dir = create_run_dir("cartpole", config.seed)   # runs/cartpole-0-20261124-120000, new
    write_run_files(run_dir, config_dict, config.seed, seeds)   # config.json, seeds.json
    with StopSignals("update") as signals:             # SIGINT and SIGTERM ask the loop to stop
        while training:
            ...one update...
            if signals.received(group):                # every rank together
                checkpoint.save(checkpoint_path(run_dir), state)
                break
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from typing import Any

CHECKPOINT_NAME = "checkpoint.pt"
RUNS_FOLDER = "runs"


def create_run_dir(name: str, seed: int, group=None, parent: str = RUNS_FOLDER) -> str:
    """A new directory PARENT/NAME-SEED-TIME for a run, created now (characters that
    don't belong in a folder name replaced). The name is taken exclusively (mkdir fails
    on one that exists), so runs started in the same second never share a directory:
    the second gets NAME-SEED-TIME-2, the next -3, and so on. Under torchrun (`group`,
    a `distributed.Group`) rank 0 creates it and every rank gets its name."""
    if group is not None and group.world_size > 1:
        return group.share(create_run_dir(name, seed, parent=parent) if group.is_main else None)
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
    base = os.path.join(parent, f"{safe}-{seed}-{time.strftime('%Y%m%d-%H%M%S')}")
    os.makedirs(parent, exist_ok=True)
    path, number = base, 1
    while True:
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            number += 1
            path = f"{base}-{number}"


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


class StopSignals:
    """SIGINT (Ctrl-C) and SIGTERM (what schedulers, `timeout`, `docker stop` and Slurm
    send) ask a training loop to stop at the end of its `step` in progress (an update,
    an iteration), where it saves a checkpoint and says how to resume, instead of dying.

    A context manager: the handlers are installed on entry, in the main thread only
    (where Python runs signal handlers; elsewhere it does nothing), and not over a signal
    the process ignores (a job started with SIGINT ignored keeps ignoring it); the
    previous handlers are back on exit. After the first signal SIGINT gets its previous
    handler back, so a second Ctrl-C acts at once (KeyboardInterrupt); a second SIGTERM
    changes nothing (a scheduler sends SIGKILL when its grace period ends, and under
    torchrun a rank can get both the scheduler's signal and the agent's copy of it)."""

    HANDLED = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, step: str):
        self.step = step
        self.signal: signal.Signals | None = None  # the first one received
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for number in self.HANDLED:
                previous = signal.getsignal(number)
                if previous is not None and previous is not signal.SIG_IGN:  # None: a handler set outside Python
                    self._previous[number] = signal.signal(number, self._receive)
        return self

    def __exit__(self, *exception) -> None:
        for number, previous in self._previous.items():
            signal.signal(number, previous)
        self._previous = {}

    def _receive(self, number: int, frame) -> None:
        if self.signal is None:
            self.signal = signal.Signals(number)
            try:  # os.write: print could re-enter a write to stderr that this signal interrupted
                os.write(2, f"\n{self.signal.name}: stopping at the end of this {self.step} to save a checkpoint "
                            f"(Ctrl-C again stops at once)\n".encode())
            except OSError:
                pass
        if signal.SIGINT in self._previous:
            signal.signal(signal.SIGINT, self._previous[signal.SIGINT])

    def received(self, group) -> signal.Signals | None:
        """The signal that asked the run to stop, on this rank or any other of a torchrun
        `group` (one all-reduce, so every rank stops after the same step); None to go on."""
        number = int(group.max(float(self.signal or 0)))
        return signal.Signals(number) if number else None
