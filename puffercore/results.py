"""Result records: one JSON line per measurement, written by the bench scripts and judges
with `--record`, rendered into the README's results table by `bench/report.py`.

    add_record_flag(parser)                      # --record [PATH]
    record(args.record, measure="cartpole_time_to_475", title="PPO CartPole to 475",
           value=0.52, unit="s", peer="stable-baselines3", peer_value=17.8, ratio=34.2,
           command="python bench/compare_training.py --seed 1")
    rows = read_records("docs/results/results.jsonl")   # ValueError naming file:line for a bad one

A record names the machine in `puffercore.info.machine()`'s terms and the date it ran.
"""

from __future__ import annotations

import argparse
import datetime
import fcntl
import json
import math
import os
import shlex
import sys

from puffercore.info import machine

DEFAULT_PATH = os.path.join("docs", "results", "results.jsonl")
# field -> the types its value may have; every record has all of them.
FIELDS = {"measure": (str,), "title": (str,), "value": (int, float, str), "unit": (str,), "peer": (str,),
          "peer_value": (int, float, str, type(None)), "ratio": (int, float, type(None)), "machine": (dict,),
          "date": (str,), "command": (str,), "notes": (str,)}
MACHINE_FIELDS = {"cpu": str, "isa": str, "cores": int, "gpu": str}


def add_record_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--record", nargs="?", const=DEFAULT_PATH, default=None, metavar="PATH",
                        help=f"append this run's results as records to PATH (default {DEFAULT_PATH}), "
                             "which bench/report.py renders into the README's table")


def check_record(entry: dict, where: str) -> dict:
    """`entry` if it is a well-formed record, else ValueError naming `where` and the field."""
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: a record is a JSON object, got {type(entry).__name__}")
    missing, unknown = sorted(set(FIELDS) - set(entry)), sorted(set(entry) - set(FIELDS))
    if missing or unknown:
        raise ValueError(f"{where}: " + "; ".join(filter(None, (missing and f"missing fields {missing}",
                                                                  unknown and f"unknown fields {unknown}"))))
    for name, kinds in FIELDS.items():
        value = entry[name]
        if not isinstance(value, kinds) or isinstance(value, bool):
            raise ValueError(f"{where}: {name} must be {' or '.join(kind.__name__ for kind in kinds)}, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{where}: {name} must be finite, got {value!r}")
    for name, kind in MACHINE_FIELDS.items():
        if not isinstance(entry["machine"].get(name), kind):
            raise ValueError(f"{where}: machine.{name} must be {kind.__name__}, got {entry['machine'].get(name)!r}")
    try:
        datetime.date.fromisoformat(entry["date"])
    except ValueError:
        raise ValueError(f"{where}: date must be YYYY-MM-DD, got {entry['date']!r}") from None
    return entry


def _command_line(argv: list[str]) -> str:
    """The command that is running, as a user would type it again, less its --record."""
    words, skip = [], False
    for index, word in enumerate(argv):
        if skip:
            skip = False
            continue
        if word == "--record":
            # its optional PATH: the next word when it is not another flag
            skip = index + 1 < len(argv) and not argv[index + 1].startswith("-")
            continue
        if not word.startswith("--record="):
            words.append(word)
    program = os.path.basename(words[0]) if words else ""
    return shlex.join(([program] if program == "puffercore" else ["python", *words[:1]]) + words[1:])


def record(path: str | None, *, measure: str, title: str, value, unit: str = "", peer: str = "", peer_value=None,
           ratio: float | None = None, command: str | None = None, notes: str = "") -> dict | None:
    """Append one record to `path` (nothing when `path` is None: --record not given) and
    return it. `command` defaults to the command line that is running. The append holds
    an exclusive lock and writes the whole line at once, so runs side by side never tear
    each other's lines."""
    if path is None:
        return None
    entry = check_record({
        "measure": measure, "title": title, "value": value, "unit": unit, "peer": peer, "peer_value": peer_value,
        "ratio": None if ratio is None else round(float(ratio), 3), "machine": machine(),
        "date": datetime.date.today().isoformat(),
        "command": command if command is not None else _command_line(sys.argv), "notes": notes},
        f"record for {measure!r}")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    line = json.dumps(entry, sort_keys=True) + "\n"
    with open(path, "a", encoding="utf-8") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        file.write(line)
        file.flush()
        os.fsync(file.fileno())
    return entry


def read_records(path: str) -> list[dict]:
    """Every record in `path`, checked; ValueError naming the file and line of a bad one."""
    entries = []
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not JSON ({error.msg})") from None
            entries.append(check_record(entry, f"{path}:{number}"))
    return entries
