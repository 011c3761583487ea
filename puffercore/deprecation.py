"""Old public names kept for one release after a rename: each gives the new object and
warns once (DeprecationWarning) that it is going.

    __getattr__ = renamed(__name__, {"Connect4": "puffercore.ocean.Connect4Env"})
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any, Callable


def renamed(module_name: str, aliases: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `module_name` that resolves each old name in `aliases`
    to the object its new dotted name ("package.module.Name") gives, warning on the
    first use of each old name; other names raise AttributeError as usual."""
    warned: set[str] = set()

    def __getattr__(name: str) -> Any:
        if name not in aliases:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        new_module, _, new_name = aliases[name].rpartition(".")
        if name not in warned:
            warned.add(name)
            warnings.warn(f"{module_name}.{name} is renamed {aliases[name]}; the old name will be removed in the "
                          f"next release", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new_module), new_name)

    return __getattr__
