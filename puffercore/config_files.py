"""Config files: `--config FILE` (JSON or TOML), a sweep's file, and the config.json every
run writes, in one form with each setting's one name (puffercore.flags.setting_name):

    env = "cartpole"
    total_timesteps = 200000          # the run group's settings: the field alone
    [train]
    learning_rate = 1e-3              # or, at the top, "train.learning_rate" = 1e-3

A bare field of another group (`learning_rate` at the top, as config.json files of
earlier releases have them) still loads, with a FutureWarning. Every file is checked
before anything is made of it: an unknown key, a value of the wrong type or out of range
is one ValueError naming the file, the setting and, for an unknown one, the puffercore
version that wrote the file (config.json records it).

    values = read_file("runs/cartpole-1-.../config.json")
    fields, extras = settings_of(values, PPOConfig, "config.json", extra=("env",))
    json.dump(file_form(dataclasses.asdict(config), PPOConfig, env="cartpole"), file)
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any

from puffercore.flags import (EXPECTED, TOP_GROUP, deprecated, field_types, groups, is_value_of, setting_name,
                              settings, suggestion)

# The key of the puffercore version that wrote a config file.
VERSION_KEY = "puffercore_version"
# The table of a config file that holds a sweep's search space (puffercore.sweep).
SWEEP_TABLE = "sweep"


def puffercore_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("puffercore")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


def read_file(path: str) -> dict[str, Any]:
    """The table of a JSON or TOML file (by its extension: .toml, else JSON); ValueError
    naming the file and the problem."""
    try:
        if path.endswith(".toml"):
            import tomllib

            with open(path, "rb") as file:
                values = tomllib.load(file)
        else:
            with open(path) as file:
                values = json.load(file)
    except OSError as error:
        raise ValueError(f"{path}: {error.strerror}") from None
    except ValueError as error:  # json.JSONDecodeError and tomllib.TOMLDecodeError
        raise ValueError(f"{path}: not valid {'TOML' if path.endswith('.toml') else 'JSON'} ({error})") from None
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a table of settings, got {type(values).__name__}")
    return values


def _written_by(values: dict) -> str:
    version = values.get(VERSION_KEY)
    return f" (the file was written by puffercore {version}; this is puffercore {puffercore_version()})" \
        if isinstance(version, str) else ""


def field_of(name: str, config_class: type, where: str, known_extra: tuple[str, ...] = (), written_by: str = "",
             flat: list[str] | None = None) -> dataclasses.Field:
    """The field a setting name in a file names: its one name ("train.learning_rate"),
    or, for a release more, the bare field (appended to `flat`, for one warning per
    file); ValueError naming the file, the key and the closest known name."""
    by_setting, name = settings(config_class), name.replace("-", "_")  # dashes, as flags have them
    if name in by_setting:
        return by_setting[name]
    bare = {field.name: field for field in by_setting.values()}
    if name in bare and flat is not None:
        flat.append(name)
        return bare[name]
    raise ValueError(f"{where}: unknown setting {name!r}"
                     f"{suggestion(name, [*by_setting, *known_extra], key=lambda text: text.replace('-', '_'))}"
                     f"{written_by}")


def check_value(config_class: type, field: dataclasses.Field, value: Any, where: str) -> None:
    """ValueError naming the file and the setting unless `value` is of the field's type
    (and one of its choices)."""
    kind, choices = field_types(config_class)[field.name], field.metadata.get("choices")
    if not is_value_of(value, kind):
        expected = EXPECTED[kind]
    elif kind is float and not math.isfinite(value):
        expected = "a finite number"
    elif choices and value not in choices:
        expected = f"one of {list(choices)}"
    else:
        return
    raise ValueError(f"{where}: {setting_name(field)} must be {expected}, got {value!r}")


def settings_of(values: dict[str, Any], config_class: type, where: str,
                extra: tuple[str, ...] = ()) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fields (by field name) a config file's table sets, each checked, and its
    `extra` top-level entries (e.g. "env"); nested [GROUP] tables, dotted keys and, with
    a FutureWarning, bare fields all name settings. ValueError naming `where` and the key."""
    written_by, fields, extras, flat, named = _written_by(values), {}, {}, [], {}

    def take(name: str, value: Any) -> None:
        field = field_of(name, config_class, where, (*extra, *groups(config_class)), written_by, flat)
        if field.name in named:
            raise ValueError(f"{where}: {setting_name(field)} is set twice (as {named[field.name]!r} and {name!r})")
        check_value(config_class, field, value, where)
        named[field.name] = name
        fields[field.name] = value

    for key, value in values.items():
        if key == VERSION_KEY:
            continue
        if key in groups(config_class) and (isinstance(value, dict) or key not in extra):
            if not isinstance(value, dict):
                raise ValueError(f"{where}: {key} must be a table of {key}.* settings, got {value!r}")
            for name, item in value.items():
                take(f"{key}.{name}", item)
        elif key in extra:
            extras[key] = value
        else:
            take(key, value)
    if flat:
        names = {field.name: setting_name(field) for field in dataclasses.fields(config_class)}
        listed = ", ".join(flat[:3]) + (f" and {len(flat) - 3} more" if len(flat) > 3 else "")
        deprecated(f"{where}: the bare name{'s' if len(flat) > 1 else ''} {listed}", "the settings' names, as "
                   f"dotted keys or [GROUP] tables ({', '.join(names[name] for name in flat[:3])})")
    return fields, extras


def checked(config: Any, where: str) -> Any:
    """`config` validated, a ValueError naming `where` as well as the field."""
    try:
        config.validate()
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    return config


def _version_beside(where: str) -> str:
    """Which puffercore wrote the run of a checkpoint at `where` (a file or its run
    directory), as the run's config.json records it, for a message."""
    folder = where if os.path.isdir(where) else os.path.dirname(where)
    try:
        version = read_file(os.path.join(folder, "config.json")).get(VERSION_KEY)
    except ValueError:  # no config.json there, or not one puffercore wrote
        version = None
    return f"puffercore {version}" if isinstance(version, str) else "another version of puffercore"


def saved_config(config_class: type, values: Any, where: str) -> Any:
    """A config a checkpoint saved (its fields by name), checked field by field before it
    is made and validated; ValueError naming `where` and the field."""
    if not isinstance(values, dict):
        raise ValueError(f"{where}: its saved config is not a table of settings ({type(values).__name__})")
    by_name = {field.name: field for field in dataclasses.fields(config_class)}
    for name, value in values.items():
        if name not in by_name:
            raise ValueError(f"{where}: its saved config has the field {name!r}, which puffercore "
                             f"{puffercore_version()} does not know (the run was written by {_version_beside(where)})"
                             f"{suggestion(name, by_name)}")
        check_value(config_class, by_name[name], value, where)
    return checked(config_class(**values), where)


def file_form(fields: dict[str, Any], config_class: type, **extras: Any) -> dict[str, Any]:
    """The config-file table of `fields` (by field name, all or some): the version, the
    `extras` (e.g. env), the run group's settings, then a table per other group. An extra
    named as a group (a custom policy's "policy": module:attribute) takes the place of
    that group's table, whose settings it does not read."""
    table: dict[str, Any] = {VERSION_KEY: puffercore_version(), **extras}
    for field in dataclasses.fields(config_class):
        if field.name in fields and field.metadata["group"] not in extras:
            group = field.metadata["group"]
            (table if group == TOP_GROUP else table.setdefault(group, {}))[field.name] = fields[field.name]
    return table


def flatten(values: dict[str, Any], config_class: type) -> dict[str, Any]:
    """A config file's settings by bare field names and its other plain entries (env),
    whichever form and release wrote it: [GROUP] tables and dotted keys undone; the
    version and other tables (a sweep's, a run's plan) left out. Unchecked: for reading
    runs (puffercore.plots), not for making a config."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if key in groups(config_class) and isinstance(value, dict):
            flat.update(value)
        elif key != VERSION_KEY and not isinstance(value, dict):
            flat[key.rpartition(".")[2]] = value
    return flat
