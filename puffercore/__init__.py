"""puffercore: reinforcement learning with a native core.

Parts load on first use (`puffercore.vector`, `puffercore.ppo`, ...), so importing one
part does not import the rest: `import puffercore.games` loads no gymnasium and no
vector backend. Design: docs/design.md; usage: README.md.
"""

import importlib
import os

from puffercore.info import apply_forced_isa

__version__ = "0.1.0"

apply_forced_isa()  # PUFFERCORE_ISA=avx2: torch's variables set before it runs anything

# Attribute -> module that defines it (None: the attribute is the submodule itself).
_LAZY = {
    "Buffers": "puffercore.env", "GymnasiumView": "puffercore.env", "PufferEnv": "puffercore.env",
    **{name: None for name in ("advantage", "alphazero", "checkpoint", "emulation", "env_sources", "games",
                               "ocean", "ppo", "run", "spaces", "transforms", "vector")},
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'puffercore' has no attribute {name!r}")
    module_name = _LAZY[name]
    value = importlib.import_module(f"puffercore.{name}") if module_name is None else \
        getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def get_include() -> str:
    """Directory of the C headers (the env ABI), for building your own envs against an
    installed puffercore, like numpy.get_include()."""
    package_dir = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(package_dir, "include")
    if os.path.isdir(installed):
        return installed
    # Editable install: the package is the source folder, the headers sit beside it.
    return os.path.join(os.path.dirname(package_dir), "native", "include")


__all__ = ["Buffers", "GymnasiumView", "PufferEnv", "get_include", "__version__", *sorted(
    name for name, module in _LAZY.items() if module is None)]
