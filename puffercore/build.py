"""Build your own C env against the installed puffercore.

    import puffercore.build
    my_env = puffercore.build.build_env("my_env/my_env.pyx")
    env = my_env.MyEnv(num_envs=1024)

The .pyx is cythonized with puffercore's declarations (`puffercore/env.pxd`, found in
`puffercore.get_include()`) and compiled with that directory and the .pyx's own folder
(where its header lives) on the include path. Needs Cython and setuptools at build time
(`pip install cython setuptools`); the setup.py equivalent is in docs/authoring.md.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from types import ModuleType

import puffercore


def build_env(
    pyx_path: str | os.PathLike,
    output_dir: str | os.PathLike | None = None,
    extra_compile_args: list[str] | None = None,
    quiet: bool = True,
) -> ModuleType:
    """Compile the env binding `pyx_path` into an extension module named after the file,
    place it in `output_dir` (default: beside the .pyx) and return it imported."""
    pyx = os.path.abspath(os.fspath(pyx_path))
    if not pyx.endswith(".pyx") or not os.path.isfile(pyx):
        raise ValueError(f"pyx_path must be an existing .pyx file, got {os.fspath(pyx_path)!r}")
    try:
        from Cython.Build import cythonize
        from setuptools import Distribution, Extension
    except ImportError as error:
        raise ImportError("building an env needs Cython and setuptools: pip install cython setuptools") from error

    name = os.path.splitext(os.path.basename(pyx))[0]
    source_dir = os.path.dirname(pyx)
    output_dir = os.path.abspath(os.fspath(output_dir)) if output_dir is not None else source_dir
    _refuse_shadowing(name, source_dir, output_dir)
    include_dirs = [puffercore.get_include(), source_dir]
    extension = Extension(
        name,
        [pyx],
        include_dirs=include_dirs,
        extra_compile_args=["-O3", *(extra_compile_args or [])],
    )
    with tempfile.TemporaryDirectory(prefix=f"puffercore-build-{name}-") as build_temp:
        (compiled,) = cythonize(
            [extension],
            include_path=include_dirs,
            build_dir=build_temp,
            compiler_directives={"language_level": 3},
            force=True,
            quiet=quiet,
        )
        command = Distribution({"name": name, "ext_modules": [compiled]}).get_command_obj("build_ext")
        command.build_lib = output_dir
        command.build_temp = build_temp
        command.ensure_finalized()
        command.run()
        module_path = command.get_ext_fullpath(name)

    spec = importlib.util.spec_from_file_location(name, module_path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _refuse_shadowing(name: str, source_dir: str, output_dir: str) -> None:
    """The module is imported under its file name: refuse one that another importable
    module already has (json.pyx would replace sys.modules["json"]). A module of that
    name in `output_dir` itself is an earlier build of this env, which may be rebuilt;
    a folder of that name that is the .pyx's own folder (my_env/ seen from its parent,
    the README's layout: a namespace package to Python) is no module to shadow."""
    existing = sys.modules.get(name)
    try:
        spec = importlib.util.find_spec(name) if existing is None else existing.__spec__
    except (ImportError, ValueError):
        spec = None
    if existing is None and spec is None:
        return
    origin = getattr(spec, "origin", None) if spec is not None else getattr(existing, "__file__", None)
    folders = {os.path.abspath(folder) for folder in (getattr(spec, "submodule_search_locations", None) or ())}
    if origin is None and folders:  # a namespace package: folders without __init__.py
        if folders == {source_dir}:
            return
        where = "the folder " + ", ".join(sorted(folders))
    elif origin and os.path.dirname(os.path.abspath(origin)) == output_dir:
        return
    else:
        where = {"built-in": "built into Python", "frozen": "frozen into Python"}.get(origin, origin) or "imported"
    raise ValueError(f"pyx_path: its module name {name!r} (the file name) is already an importable module "
                     f"({where}); building it would shadow that module: rename the .pyx")
