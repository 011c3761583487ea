"""Metrics for trainers: each `log(step, scalars)` goes to a CSV file in the run
directory, to TensorBoard event files (when tensorboard is installed) and to Weights &
Biases (only when asked for and installed); `video(step, tag, path)` puts an MP4 the
run wrote beside them in TensorBoard (an animated GIF in its image tab) and W&B.
`console_print` shows them: a block redrawn in place on a terminal, one line per log
interval when the output is piped or redirected.

    logger = Logger(run_dir, config=asdict(config))
    logger.log(global_step, {"episode_return": 21.5, "loss/policy": 0.01})
    logger.video(global_step, "eval/video", "runs/.../videos/update-000010.mp4")
    logger.close()
"""

from __future__ import annotations

import csv
import io
import math
import os
import sys
from typing import Any

CSV_NAME = "metrics.csv"
STEP_COLUMN = "step"


class Logger:
    """`resume_step`: when continuing a run, CSV rows logged after this step (by a run
    that crashed after its last checkpoint) are dropped so the file reads as one run, and
    so is a half-written last row (a run killed mid-write), with a one-line notice."""

    def __init__(
        self,
        run_dir: str | os.PathLike,
        config: dict[str, Any] | None = None,
        tensorboard: bool = True,
        wandb_project: str | None = None,
        resume_step: int | None = None,
        quiet: bool = False,
    ):
        self.run_dir = os.fspath(run_dir)
        os.makedirs(self.run_dir, exist_ok=True)
        self.csv_path = os.path.join(self.run_dir, CSV_NAME)
        self._columns: list[str] = [STEP_COLUMN]
        self._rows: list[dict[str, Any]] = []
        if resume_step is not None and os.path.isfile(self.csv_path):
            if _torn_last_line(self.csv_path) and not quiet:
                print(f"{self.csv_path}: dropping its half-written last row (a run killed mid-write)", file=sys.stderr)
            self._rows = [row for row in read_csv(self.csv_path) if row[STEP_COLUMN] <= resume_step]
            for row in self._rows:
                self._columns += [key for key in row if key not in self._columns]
        self._rewrite_csv()

        self._tensorboard = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                if not quiet:
                    print("tensorboard is not installed: skipping TensorBoard logs (pip install tensorboard)", file=sys.stderr)
            else:
                self._tensorboard = SummaryWriter(self.run_dir, purge_step=resume_step)
        self._wandb = None
        if wandb_project:
            try:
                import wandb
            except ImportError as error:
                raise ValueError(f"wandb_project={wandb_project!r} needs wandb, which is not installed (pip install wandb)") from error
            self._wandb = wandb.init(project=wandb_project, config=config, dir=self.run_dir)

    def log(self, step: int, scalars: dict[str, float]) -> None:
        row = {STEP_COLUMN: int(step), **{key: float(value) for key, value in scalars.items()}}
        new_columns = [key for key in row if key not in self._columns]
        self._rows.append(row)
        if new_columns:
            self._columns += new_columns
            self._rewrite_csv()
        else:
            with open(self.csv_path, "a", newline="") as file:
                csv.DictWriter(file, self._columns).writerow(row)
        if self._tensorboard is not None:
            for key, value in scalars.items():
                self._tensorboard.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log(dict(scalars), step=step)

    def video(self, step: int, tag: str, path: str) -> None:
        """The MP4 at `path` (already in the run directory) under `tag`: to TensorBoard as
        an animated GIF (what its `add_video` writes, which needs moviepy; here imageio
        encodes it, `video.gif_preview`) and to W&B as the MP4 itself."""
        if self._tensorboard is not None:
            from tensorboard.compat.proto.summary_pb2 import Summary

            from puffercore.video import gif_preview

            data, height, width = gif_preview(path)
            image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=data)
            self._tensorboard._get_file_writer().add_summary(Summary(value=[Summary.Value(tag=tag, image=image)]),
                                                             step)
        if self._wandb is not None:
            import wandb

            self._wandb.log({tag: wandb.Video(path, format="mp4")}, step=step)

    def _rewrite_csv(self) -> None:
        with open(self.csv_path, "w", newline="") as file:
            writer = csv.DictWriter(file, self._columns)
            writer.writeheader()
            writer.writerows(self._rows)

    def close(self) -> None:
        if self._tensorboard is not None:
            self._tensorboard.close()
            self._tensorboard = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


def read_csv(path: str | os.PathLike) -> list[dict[str, float]]:
    """Rows of a metrics CSV as dicts of floats (missing cells left out), step as int. A
    last line without its line end is left out: a row still being written, or torn by a
    kill mid-write."""
    with open(path, newline="") as file:
        text = file.read()
    complete = text[: text.rfind("\n") + 1]
    rows = []
    for raw in csv.DictReader(io.StringIO(complete, newline="")):
        row = {key: float(value) for key, value in raw.items() if value not in ("", None)}
        row[STEP_COLUMN] = int(row[STEP_COLUMN])
        rows.append(row)
    return rows


def _torn_last_line(path: str) -> bool:
    """Whether the file's last line lacks its line end (Logger writes whole lines)."""
    with open(path, "rb") as file:
        if file.seek(0, os.SEEK_END) == 0:
            return False
        file.seek(-1, os.SEEK_END)
        return file.read(1) != b"\n"


def console_print(title: str, scalars: dict[str, float], progress: float | None = None, stream=None) -> None:
    """One log interval on `stream` (stdout): on a terminal, `console_view`'s block,
    redrawn in place; piped or redirected, `console_line`, so that a log file or `grep`
    gets one line per interval."""
    stream = sys.stdout if stream is None else stream
    if stream.isatty():
        print("\x1b[2J\x1b[H" + console_view(title, scalars, progress) + "\n", file=stream, flush=True)
    else:
        print(console_line(title, scalars, progress), file=stream, flush=True)


def console_line(title: str, scalars: dict[str, float], progress: float | None = None) -> str:
    """The title, the progress in percent and `name=value` for each scalar, on one line."""
    parts = [title] + ([f"{100 * min(max(progress, 0.0), 1.0):.1f}%"] if progress is not None else [])
    return " | ".join(parts + [" ".join(f"{key}={format_number(value)}" for key, value in scalars.items())])


def console_view(title: str, scalars: dict[str, float], progress: float | None = None, width: int = 30) -> str:
    """A block of text for a terminal: a title, an optional progress bar and the scalars
    in two columns, grouped by the prefix before '/'."""
    lines = [title]
    if progress is not None:
        filled = int(round(width * min(max(progress, 0.0), 1.0)))
        lines.append(f"[{'#' * filled}{'.' * (width - filled)}] {100 * progress:5.1f}%")
    cells = [f"{key:<24}{format_number(value):>12}" for key, value in scalars.items()]
    for index in range(0, len(cells), 2):
        lines.append("  ".join(cells[index : index + 2]))
    return "\n".join(lines)


def format_number(value: float) -> str:
    """A number for people: whole numbers with thousands separators, tiny and huge ones
    in scientific notation, the rest with 4 decimals (-0.01 stays -0.0100, never -0.0)."""
    if isinstance(value, int) or (math.isfinite(value) and value == int(value) and abs(value) < 1e12):
        return f"{int(value):,}"
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.3e}"
    return f"{value:.4f}"


def counted(count: int, noun: str) -> str:
    """`1 episode`, `3 episodes`: a count with its noun in the right number."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"
