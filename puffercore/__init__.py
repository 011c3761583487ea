"""puffercore: reinforcement learning with a native core.

Design: DESIGN.md in the project's shared folder; README.md for usage.
"""

import os

from puffercore import emulation, vector
from puffercore.env import Buffers, GymnasiumView, PufferEnv

__version__ = "0.1.0"


def get_include() -> str:
    """Directory of the C headers (the env ABI), for building your own envs against an
    installed puffercore, like numpy.get_include()."""
    package_dir = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(package_dir, "include")
    if os.path.isdir(installed):
        return installed
    # Editable install: the package is the source folder, the headers sit beside it.
    return os.path.join(os.path.dirname(package_dir), "native", "include")


__all__ = ["Buffers", "GymnasiumView", "PufferEnv", "emulation", "get_include", "vector", "__version__"]
