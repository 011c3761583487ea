"""Command-line flags from config dataclass fields, shared by the `puffercore` commands."""

from __future__ import annotations

import argparse


def parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def value_options(kind: type) -> dict:
    """add_argument keywords parsing a value of `kind`; a bare bool flag means true."""
    if kind is bool:
        return {"nargs": "?", "const": True, "type": parse_bool, "metavar": "BOOL"}
    return {"type": kind}
