"""What the config dataclasses (PPOConfig, AlphaZeroConfig) share: their fields, each
declared by `option` with a group; the one name of each setting; the check of every
field against its annotation; and the command-line flags of the `puffercore` commands
(PPO's `train`, AlphaZero's `alphazero`).

A setting's name is GROUP.FIELD ("train.learning_rate"), or the field alone in the `run`
group ("total_timesteps"). The same name is the flag (--train.learning-rate, dashes or
underscores), the key of config files and sweeps (a dotted key or a [train] table;
puffercore.config_files) and of a run's config.json.

    learning_rate: float = option(2.5e-4, "train", "Adam learning rate")
    check_fields(config)   # in validate(): ValueError naming the first field of the wrong type
    add_dataclass_flags(parser, PPOConfig, shown=PPOConfig.for_env("cartpole"), preset="cartpole's preset")
    overrides = dataclass_overrides(args, PPOConfig)
    PPOConfig.__doc__ += field_docs(PPOConfig)   # the same help for help(PPOConfig)
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import math
import numbers
import typing
import warnings

# How a message names the value each annotation asks for.
EXPECTED = {bool: "a bool (True or False)", int: "an int", float: "a number", str: "a str"}
# The group whose settings are named by the field alone (--seed, not --run.seed).
TOP_GROUP = "run"


def option(default, group: str, help: str, choices: tuple | None = None):
    """A config field in `group` (its setting name GROUP.FIELD, or FIELD in the run
    group), with its help text and, for a str, the values it may take."""
    return dataclasses.field(default=default, metadata={"group": group, "help": help, "choices": choices})


def setting_name(field: dataclasses.Field) -> str:
    """The one name of a field's setting: "train.learning_rate", or "seed" in the run group."""
    group = field.metadata["group"]
    return field.name if group == TOP_GROUP else f"{group}.{field.name}"


def flag_name(setting: str) -> str:
    """A setting's flag: "train.learning_rate" -> "--train.learning-rate"."""
    return "--" + setting.replace("_", "-")


@functools.cache
def settings(config_class: type) -> dict[str, dataclasses.Field]:
    """The fields of `config_class` by their setting names."""
    return {setting_name(field): field for field in dataclasses.fields(config_class)}


def groups(config_class: type) -> tuple[str, ...]:
    """The groups of `config_class` whose settings are GROUP.FIELD (all but the run group)."""
    return tuple(dict.fromkeys(field.metadata["group"] for field in dataclasses.fields(config_class)
                               if field.metadata["group"] != TOP_GROUP))


def suggestion(name: str, known: typing.Iterable[str], key: typing.Callable[[str], str] = lambda text: text) -> str:
    """"; did you mean X?" for the known name closest to `name`, or "". Names are compared
    by `key`, whole and by their part after the last dot, so that --learning-rate finds
    --train.learning-rate and run.seed finds seed."""
    keyed: dict[str, str] = {}
    for candidate in known:
        keyed.setdefault(key(candidate), candidate)
        keyed.setdefault(key(candidate).rpartition(".")[2], candidate)
    probes = dict.fromkeys((key(name), key(name).rpartition(".")[2]))
    score, best = max(((difflib.SequenceMatcher(None, probe, candidate).ratio(), candidate)
                       for probe in probes for candidate in keyed), default=(0.0, ""))
    return f"; did you mean {keyed[best]}?" if score >= 0.6 else ""


class DeprecatedName(FutureWarning):
    """An old spelling of a setting or flag (a FutureWarning: meant for users, shown by default)."""


def deprecated(old: str, new: str) -> None:
    """Warn that `old` will stop working in a later release and `new` is the name to use."""
    warnings.warn(f"{old}: deprecated (removed in a later release); use {new}", DeprecatedName,
                  stacklevel=3)


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


class _DeprecatedFlag(argparse.Action):
    """An old spelling of a flag, hidden from --help: sets the field and warns once used."""

    def __init__(self, option_strings, dest, canonical: str, **options):
        super().__init__(option_strings, dest, **options)
        self.canonical = canonical

    def __call__(self, parser, namespace, values, option_string=None):
        deprecated(option_string, self.canonical)
        setattr(namespace, self.dest, values)


def add_dataclass_flags(parser: argparse.ArgumentParser, config_class: type, preset: str, shown=None,
                        skip: tuple[str, ...] = (), aliases: dict[str, tuple[str, ...]] | None = None,
                        deprecated_flags: typing.Callable[[dataclasses.Field], tuple[str, ...]] = lambda field: ()
                        ) -> None:
    """A flag per field of `config_class`, named by its setting (--GROUP.FIELD-NAME, or
    --FIELD-NAME in the run group; underscores work too) plus its `aliases`, in argument
    groups by the field's group; help text and choices from the field's metadata. The
    default shown is `shown`'s value (a config with a preset applied, `preset` naming it)
    where it differs from the field's own. `deprecated_flags(field)`: old spellings,
    accepted with a FutureWarning and hidden from --help."""
    titled: dict[str, argparse._ArgumentGroup] = {}
    for name, field in settings(config_class).items():
        if field.name in skip:
            continue
        title = field.metadata["group"]
        if title not in titled:
            titled[title] = parser.add_argument_group(f"{title} options")
        flag = flag_name(name)
        names = {flag, f"--{name}", *(aliases or {}).get(field.name, ())}
        extra = value_options(field_types(config_class)[field.name])
        if field.metadata.get("choices"):
            extra["choices"] = field.metadata["choices"]
        value = field.default if shown is None else getattr(shown, field.name)
        default = f"default {value!r}" + (f" in {preset}; {field.default!r} otherwise" if value != field.default
                                          else "" if shown is not None else f", or {preset}")
        titled[title].add_argument(*sorted(names, key=lambda text: (text != flag, text)), dest=field.name,
                                   default=None, **extra, help=f"{field.metadata['help']} ({default})")
        old = sorted(set(deprecated_flags(field)) - names)
        if old:
            parser.add_argument(*old, dest=field.name, default=None, **extra, help=argparse.SUPPRESS,
                                action=_DeprecatedFlag, canonical=flag)


def dataclass_overrides(args: argparse.Namespace, config_class: type, skip: tuple[str, ...] = ()) -> dict:
    """The fields the user set on the command line."""
    return {field.name: getattr(args, field.name) for field in dataclasses.fields(config_class)
            if field.name not in skip and getattr(args, field.name) is not None}


def field_docs(config_class: type) -> str:
    """Docstring lines for every field of `config_class` from the help in its metadata,
    the one source of `--help` and of `help(config_class)`. Indented as a class
    docstring's body (four spaces), so that help() dedents it with the rest."""
    lines = ["", "", "    Fields (each the setting GROUP.FIELD: the flag --GROUP.FIELD, a [GROUP] table in config",
             "    files; the run group's are FIELD alone):", ""]
    kinds = field_types(config_class)
    for name, field in settings(config_class).items():
        choices = field.metadata.get("choices")
        lines.append(f"    {field.name}: {kinds[field.name].__name__} = {field.default!r}   [{name}]")
        lines.append(f"        {field.metadata['help']}" + (f" (one of {', '.join(map(str, choices))})" if choices else ""))
    return "\n".join(lines)
