"""Render the README's results table from the result records in docs/results/*.jsonl.

    python bench/report.py            # print the table
    python bench/report.py --write    # put it between README.md's results markers

One row per measure and machine: the latest record of each (by date; a later line wins a
tie), in the order the measures first appear in the records. The bench scripts append
records with `--record` (puffercore.results); a bad record fails with one line naming
its file and line.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

from puffercore.info import machine_label
from puffercore.results import read_records

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
HEADER = ("| what | puffercore | peer | ratio | machine | date | command |\n"
          "| --- | --- | --- | --- | --- | --- | --- |")


def load(directory: str) -> list[dict]:
    """Every record of every .jsonl file in `directory`, in file-name and line order."""
    paths = sorted(glob.glob(os.path.join(directory, "*.jsonl")))
    if not paths:
        raise ValueError(f"{directory}: no *.jsonl result records")
    return [entry for path in paths for entry in read_records(path)]


def latest(records: list[dict]) -> list[dict]:
    """The latest record of each (measure, machine), ordered by each measure's first record."""
    order: dict[str, int] = {}
    chosen: dict[tuple[str, str], dict] = {}
    for entry in records:
        order.setdefault(entry["measure"], len(order))
        key = (entry["measure"], machine_label(entry["machine"]))
        if key not in chosen or entry["date"] >= chosen[key]["date"]:
            chosen[key] = entry
    return sorted(chosen.values(), key=lambda entry: (order[entry["measure"]], machine_label(entry["machine"])))


def _number(value) -> str:
    """A value as its record holds it (the bench scripts round), thousands separated."""
    return value if isinstance(value, str) else f"{value:,}"


def _with_unit(value, unit: str) -> str:
    return f"{_number(value)} {unit}".strip() if unit and not unit.startswith("%") else f"{_number(value)}{unit}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def row(entry: dict) -> str:
    result = _with_unit(entry["value"], entry["unit"])
    if entry["notes"]:
        result += f" ({entry['notes']})"
    peer = entry["peer"]
    if entry["peer_value"] is not None:
        value = _with_unit(entry["peer_value"], entry["unit"])
        peer = f"{peer}: {value}" if peer else value
    ratio = "" if entry["ratio"] is None else f"{entry['ratio']:.3g}x"
    cells = (entry["title"], result, peer, ratio, machine_label(entry["machine"]), entry["date"],
             f"`{entry['command']}`")
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |"


def render(records: list[dict]) -> str:
    return "\n".join([HEADER, *(row(entry) for entry in latest(records))])


def replace_block(text: str, table: str, where: str = "README.md") -> str:
    """`text` with the lines between the results markers replaced by `table`."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{where}: needs the lines {BEGIN} and {END}, in that order")
    return text[:start + len(BEGIN)] + "\n" + table + "\n" + text[end:]


def block(text: str) -> str:
    """The table between the results markers of `text` ('' where there are none)."""
    start, end = text.find(BEGIN), text.find(END)
    return text[start + len(BEGIN):end].strip("\n") if 0 <= start < end else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", default=os.path.join(ROOT, "docs", "results"),
                        help="the folder of *.jsonl result records")
    parser.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    parser.add_argument("--write", action="store_true", help="replace the README's table instead of printing it")
    args = parser.parse_args(argv)
    try:
        table = render(load(args.records))
        if not args.write:
            print(table)
            return 0
        with open(args.readme, encoding="utf-8") as file:
            text = replace_block(file.read(), table, args.readme)
        with open(args.readme, "w", encoding="utf-8") as file:
            file.write(text)
    except (OSError, ValueError) as error:
        print(f"report.py: {error}", file=sys.stderr)
        return 2
    print(f"wrote the results table ({len(table.splitlines()) - 2} rows) into {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
