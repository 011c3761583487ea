"""The README stays true: its results table is bench/report.py's rendering of the result
records, its headline numbers come from those records, every `puffercore ...` command
line in it parses, and every Python example runs as shown."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from puffercore.__main__ import build_parser
from puffercore.results import _command_line, read_records, record

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
RECORDS = os.path.join(ROOT, "docs", "results")
REPORT = os.path.join(ROOT, "bench", "report.py")


def _report():
    spec = importlib.util.spec_from_file_location("report", REPORT)  # bench/ is not a package
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _readme() -> str:
    with open(README, encoding="utf-8") as file:
        return file.read()


def _blocks(language: str) -> list[str]:
    """The README's fenced blocks of `language` ('' for the unlabelled ones)."""
    return re.findall(rf"^```{language}\n(.*?)^```$", _readme(), flags=re.M | re.S)


def _latest(measure: str) -> dict:
    return [entry for entry in _report().latest(_report().load(RECORDS)) if entry["measure"] == measure][0]


def test_results_table_is_the_rendering_of_the_records():
    report = _report()
    assert report.block(_readme()) == report.render(report.load(RECORDS)), (
        "README.md's results table is not the rendering of docs/results: run python bench/report.py --write")


def test_headline_numbers_come_from_the_records():
    intro = " ".join(_readme().split("\n## ")[0].split())
    seconds = [float(value) for value in _latest("cartpole_time_to_475_seeds")["value"].split(" / ")]
    assert f"in {min(seconds):g}-{max(seconds):g} s of training" in intro
    assert f"{_latest('cartpole_time_to_475_sb3')['ratio']:.0f}x faster than stable-baselines3" in intro


def _entry(**changes) -> dict:
    entry = dict(measure="m", title="a measure", value=1.5, unit="s", peer="peer", peer_value=3.0, ratio=2.0,
                 machine={"cpu": "CPU", "isa": "AVX2", "cores": 2, "gpu": ""}, date="2026-01-02",
                 command="python bench/x.py", notes="")
    entry.update(changes)
    return entry


def _run_report(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, REPORT, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("line, expected", [
    ("{not json", "records.jsonl:2: not JSON"),
    (json.dumps({k: v for k, v in _entry().items() if k != "date"}), "records.jsonl:2: missing fields ['date']"),
    (json.dumps(_entry(date="27/11/2026")), "records.jsonl:2: date must be YYYY-MM-DD"),
    (json.dumps(_entry(ratio="2x")), "records.jsonl:2: ratio must be"),
    (json.dumps(_entry(machine={"cpu": "CPU", "isa": "AVX2", "cores": "2", "gpu": ""})), "machine.cores must be int"),
])
def test_report_fails_with_one_line_on_a_bad_record(tmp_path, line, expected):
    (tmp_path / "records.jsonl").write_text(json.dumps(_entry()) + "\n" + line + "\n")
    result = _run_report("--records", str(tmp_path))
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and expected in result.stderr, result.stderr


def test_report_without_records_or_markers_fails_with_one_line(tmp_path):
    result = _run_report("--records", str(tmp_path))
    assert result.returncode == 2 and "no *.jsonl result records" in result.stderr
    (tmp_path / "r.jsonl").write_text(json.dumps(_entry()) + "\n")
    (tmp_path / "README.md").write_text("no markers\n")
    result = _run_report("--records", str(tmp_path), "--readme", str(tmp_path / "README.md"), "--write")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1 and "results:begin" in result.stderr
    assert (tmp_path / "README.md").read_text() == "no markers\n"


def test_latest_record_per_measure_and_machine_wins(tmp_path):
    report = _report()
    path = str(tmp_path / "r.jsonl")
    other_machine = {"cpu": "Other", "isa": "AVX-512", "cores": 4, "gpu": ""}
    lines = [_entry(value=1.0), _entry(measure="n", value=7.0), _entry(value=2.0, date="2026-01-03"),
             _entry(value=3.0, machine=other_machine), _entry(value=4.0, date="2026-01-01"),
             _entry(value=5.0, date="2026-01-03")]  # a tie on the date: the later line wins
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows = report.latest(read_records(path))
    assert [(row["measure"], row["value"]) for row in rows] == [("m", 5.0), ("m", 3.0), ("n", 7.0)]
    assert report.row(rows[0]) == ("| a measure | 5.0 s | peer: 3.0 s | 2x | CPU (AVX2), 2 cores | 2026-01-03 | "
                                   "`python bench/x.py` |")


def test_record_appends_what_the_report_renders(tmp_path):
    path = str(tmp_path / "r.jsonl")
    record(path, measure="m", title="t | with a pipe", value=0.25, unit="ms", peer="torch", peer_value=1.0, ratio=4,
           command="python bench/x.py --seed 1")
    rendered = _report().render(read_records(path))
    assert "| t \\| with a pipe | 0.25 ms | torch: 1.0 ms | 4x |" in rendered
    readme = tmp_path / "README.md"
    readme.write_text("top\n<!-- results:begin -->\nold\n<!-- results:end -->\nbottom\n")
    result = _run_report("--records", str(tmp_path), "--readme", str(readme), "--write")
    assert result.returncode == 0, result.stderr
    assert readme.read_text() == f"top\n<!-- results:begin -->\n{rendered}\n<!-- results:end -->\nbottom\n"


def _command_lines() -> list[str]:
    """Every `puffercore ...` line of the README's unlabelled blocks and
    `python bench/...` line, comments stripped."""
    lines = []
    for block in _blocks(""):
        for line in block.splitlines():
            line = line.split("  #")[0].split(" > ")[0].strip()  # a comment, a redirection: the shell's
            if line.startswith(("puffercore ", "python bench/")) or " -m puffercore " in line:
                lines.append(line)
    return lines


@pytest.mark.parametrize("argv, expected", [
    (["bench/compare_training.py", "--seed", "1", "--record"], "python bench/compare_training.py --seed 1"),
    (["bench/compare_training.py", "--record", "out.jsonl", "--seed", "1"], "python bench/compare_training.py --seed 1"),
    (["/venv/bin/puffercore", "judge", "connect4", "RUN", "--record=out.jsonl"], "puffercore judge connect4 RUN"),
])
def test_a_record_names_the_command_without_its_record_flag(argv, expected):
    assert _command_line(argv) == expected


def test_the_readme_shows_commands():
    lines = _command_lines()
    assert len(lines) > 20 and any(line.startswith("puffercore alphazero") for line in lines)


@pytest.mark.parametrize("line", _command_lines())
def test_command_line_parses(line):
    words = shlex.split(line)
    if words[0] == "python":  # a bench script: it exists (its flags are parsed by running it)
        assert os.path.isfile(os.path.join(ROOT, words[1])), line
        return
    words = words[words.index("puffercore") + 1:]
    args = build_parser().parse_args(words)
    if args.command == "bench":
        assert os.path.isfile(os.path.join(ROOT, "bench", args.script + ".py")), line
    if args.command == "train":  # the flags that set config fields name real fields
        assert args.env or args.config or args.resume, line


# Shell lines the README shows before an example, which the example needs.
PREPARE = {"my_env/my_env.pyx": ["new-env", "my_env"]}


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_python_example_runs_as_shown(tmp_path, index):
    code = _blocks("python")[index]
    for needed, command in PREPARE.items():
        if needed in code:
            subprocess.run([sys.executable, "-m", "puffercore", *command], cwd=tmp_path, check=True, timeout=120)
    (tmp_path / "example.py").write_text(code)
    result = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, f"README example {index}:\n{code}\n{result.stderr[-3000:]}"
