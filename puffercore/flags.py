"""Command-line flags from config dataclass fields, shared by the `puffercore` commands
(PPO's `train`, AlphaZero's `alphazero`): one flag per field, dashes or underscores,
default None so that only what the user typed overrides the preset.

    add_dataclass_flags(parser, PPOConfig, prefix=lambda field: ..., preset="the env preset")
    overrides = dataclass_overrides(args, PPOConfig)
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Callable


def parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_finite_float(text: str) -> float:
    """A float flag's value: nan and inf set no field to anything meaningful."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def value_options(kind: type) -> dict:
    """add_argument keywords parsing a value of `kind`; a bare bool flag means true."""
    if kind is bool:
        return {"nargs": "?", "const": True, "type": parse_bool, "metavar": "BOOL"}
    if kind is float:
        return {"type": parse_finite_float, "metavar": "FLOAT"}
    return {"type": kind}


def add_dataclass_flags(parser: argparse.ArgumentParser, config_class: type, preset: str,
                        prefix: Callable[[dataclasses.Field], str] = lambda field: "",
                        group: Callable[[dataclasses.Field], str] = lambda field: "config",
                        skip: tuple[str, ...] = (), aliases: dict[str, tuple[str, ...]] | None = None) -> None:
    """A flag --PREFIXNAME (and --PREFIX_NAME) per field of `config_class`, in argument
    groups by `group(field)`; help text and choices from the field's metadata."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for field in dataclasses.fields(config_class):
        if field.name in skip:
            continue
        title = group(field)
        if title not in groups:
            groups[title] = parser.add_argument_group(f"{title} options")
        names = {f"--{prefix(field)}{field.name.replace('_', '-')}", f"--{prefix(field)}{field.name}",
                 *(aliases or {}).get(field.name, ())}
        extra = value_options(type(field.default))
        if field.metadata.get("choices"):
            extra["choices"] = field.metadata["choices"]
        groups[title].add_argument(*sorted(names), dest=field.name, default=None, **extra,
                                   help=f"{field.metadata['help']} (default {field.default!r}, or {preset})")


def dataclass_overrides(args: argparse.Namespace, config_class: type, skip: tuple[str, ...] = ()) -> dict:
    """The fields the user set on the command line."""
    return {field.name: getattr(args, field.name) for field in dataclasses.fields(config_class)
            if field.name not in skip and getattr(args, field.name) is not None}
