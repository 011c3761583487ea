"""What the config dataclasses (PPOConfig, AlphaZeroConfig) share: the check of every
field against its annotation, and the command-line flags of the `puffercore` commands
(PPO's `train`, AlphaZero's `alphazero`): one flag per field, dashes or underscores,
default None so that only what the user typed overrides the preset.

    check_fields(config)   # in validate(): ValueError naming the first field of the wrong type
    add_dataclass_flags(parser, PPOConfig, prefix=lambda field: ..., preset="the env preset")
    overrides = dataclass_overrides(args, PPOConfig)
    PPOConfig.__doc__ += field_docs(PPOConfig)   # the same help for help(PPOConfig)
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import numbers
import typing
from typing import Callable

# How a message names the value each annotation asks for.
EXPECTED = {bool: "a bool (True or False)", int: "an int", float: "a number", str: "a str"}


@functools.cache
def field_types(config_class: type) -> dict[str, type]:
    """Each field's annotation, resolved: bool, int, float or str (TypeError for another,
    which neither the checks nor the flags would know how to read)."""
    hints = typing.get_type_hints(config_class)
    types = {field.name: hints[field.name] for field in dataclasses.fields(config_class)}
    for name, kind in types.items():
        if kind not in EXPECTED:
            raise TypeError(f"{config_class.__name__}.{name}: config fields are bool, int, float or str, not {kind}")
    return types


def is_value_of(value, kind: type) -> bool:
    """Whether `value` may be the value of a field annotated `kind` (before check_fields
    converts it: an int for a float field, a NumPy number for a Python one)."""
    if kind is bool:
        return isinstance(value, bool)  # 0 and 1 are not flags' values
    if kind is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)  # NumPy ints too
    if kind is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    return isinstance(value, kind)


def check_fields(config) -> None:
    """Every field of a config dataclass checked against its annotation and its
    metadata's `choices`, in place: bools only True or False, ints no bools, floats any
    finite real (an int becomes a float, a NumPy number a Python one). ValueError naming
    the first bad field and what it expected."""
    for name, kind in field_types(type(config)).items():
        value = getattr(config, name)
        if not is_value_of(value, kind):
            raise ValueError(f"{name} must be {EXPECTED[kind]}, got {value!r}")
        if kind is float and not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
        if kind in (int, float):
            setattr(config, name, kind(value))
        choices = config.__dataclass_fields__[name].metadata.get("choices")
        if choices and value not in choices:
            raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


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
        extra = value_options(field_types(config_class)[field.name])
        if field.metadata.get("choices"):
            extra["choices"] = field.metadata["choices"]
        groups[title].add_argument(*sorted(names), dest=field.name, default=None, **extra,
                                   help=f"{field.metadata['help']} (default {field.default!r}, or {preset})")


def dataclass_overrides(args: argparse.Namespace, config_class: type, skip: tuple[str, ...] = ()) -> dict:
    """The fields the user set on the command line."""
    return {field.name: getattr(args, field.name) for field in dataclasses.fields(config_class)
            if field.name not in skip and getattr(args, field.name) is not None}


def field_docs(config_class: type) -> str:
    """Docstring lines for every field of `config_class` from the help in its metadata,
    the one source of `--help` and of `help(config_class)`. Indented as a class
    docstring's body (four spaces), so that help() dedents it with the rest."""
    lines = ["", "", "    Fields (each a command-line flag; see the command's --help):", ""]
    kinds = field_types(config_class)
    for field in dataclasses.fields(config_class):
        choices = field.metadata.get("choices")
        lines.append(f"    {field.name}: {kinds[field.name].__name__} = {field.default!r}")
        lines.append(f"        {field.metadata['help']}" + (f" (one of {', '.join(map(str, choices))})" if choices else ""))
    return "\n".join(lines)
