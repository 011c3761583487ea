"""`puffercore new-env NAME [--numba]`: a ready-to-build C env folder, copied from the
template that ships with the package (ocean/template in a source checkout), or a numba
env module (from puffercore/numba_env/template.py).

    path = write_env("maze", "envs")              # envs/maze/maze.h, envs/maze/maze.pyx: class Maze
    path = write_env("maze", "envs", numba=True)  # envs/maze/maze.py: class Maze, compiled by numba
"""

from __future__ import annotations

import keyword
import os
import re

TEMPLATE_FILES = ("template.h", "template.pyx")


def template_dir() -> str:
    """The env template: installed in the package, or beside it in a source checkout."""
    package_dir = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(package_dir, "templates", "env")
    if os.path.isdir(installed):
        return installed
    return os.path.join(os.path.dirname(package_dir), "ocean", "template")


def write_env(name: str, directory: str = ".", numba: bool = False) -> str:
    """Write DIRECTORY/NAME/NAME.h and NAME.pyx (the template with Template / template /
    TEMPLATE renamed), or NAME.py with `numba`, and return the folder. `name`: a
    lowercase Python identifier, the module name; its class is the CamelCase of it."""
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name) or keyword.iskeyword(name) \
            or name == "template":
        raise ValueError(f"name must be a lowercase identifier such as 'maze' or 'grid_world', got {name!r}")
    folder = os.path.join(directory, name)
    if os.path.exists(folder):
        raise FileExistsError(f"{folder} already exists; choose another name or directory")
    class_name = "".join(part.capitalize() for part in name.split("_"))
    os.makedirs(folder)
    sources = [os.path.join(template_dir(), file_name) for file_name in TEMPLATE_FILES]
    if numba:
        sources = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "numba_env", "template.py")]
    for source in sources:
        file_name = os.path.basename(source)
        with open(source) as file:
            text = file.read()
        text = text.replace("TEMPLATE", name.upper()).replace("Template", class_name).replace("template", name)
        extension = os.path.splitext(file_name)[1]
        with open(os.path.join(folder, name + extension), "w") as file:
            file.write(text)
    return folder
