"""What a trainer accepts as an env, and how it becomes a vector env.

    source = resolve("cartpole")              # an ocean env by name
    source = resolve("gymnasium:Acrobot-v1")  # a gymnasium id (a bare registered id works too)
    source = resolve("atari:Breakout")        # puffercore.atari.AtariEnv (so is "ALE/Breakout-v5")
    source = resolve("my_envs:Guess")         # module:attribute, imported
    source = resolve(MyEnv)                   # a class or creator: native or Python
    source = resolve(vec)                     # a vector env made by puffercore.vector.make
    vec = make_vector(source, backend="auto", num_envs=8, seed=0)

There is no registry: names are a short table of the ocean envs, everything else is
imported or made by gymnasium. `EnvSource.spec` is the string that makes the env again
(saved in checkpoints); it is None for objects that have no importable name (a lambda,
a vector env instance). `resolve_saved` is the one rule for a saved spec: a file never
chooses code to import or run, so `eval` and `--resume` make an env from a checkpoint's
spec alone only when puffercore knows it (an ocean env, a gymnasium id registered in
gymnasium, an Atari game); for any other env the caller passes it.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from typing import Any, Callable

import gymnasium

from puffercore.flags import suggestion

OCEAN_ENVS = {"cartpole": "CartPole", "snake": "Snake", "squared": "Squared", "memory": "Memory",
              "connect4": "Connect4Env", "azul": "AzulEnv"}
GYMNASIUM_PREFIX = "gymnasium:"
ATARI_PREFIX = "atari:"  # atari:GAME and ALE/GAME-v5 are AtariEnv, preprocessed (gymnasium:ALE/... is the raw env)


@dataclasses.dataclass(frozen=True)
class EnvSource:
    name: str  # for run directories and console titles
    spec: str | None  # makes the env again (resolve(spec)); None: not nameable
    creator: Callable[..., Any] | None  # a NativeEnv subclass or a Python env creator
    native: bool  # creator is a NativeEnv subclass (vectorized in C; the threads backend)
    vector: Any = None  # a vector env the caller made (and owns)


def resolve(env: Any) -> EnvSource:
    """The EnvSource of `env`; ValueError/TypeError naming what was expected."""
    if isinstance(env, EnvSource):
        return env
    if isinstance(env, str):
        return _resolve_name(env)
    return _resolve_object(env)


def _resolve_object(env: Any) -> EnvSource:
    """The EnvSource of an env class, creator or vector env (resolve's, for what is not a name)."""
    if hasattr(env, "recv") and hasattr(env, "send") and hasattr(env, "single_observation_space"):
        return EnvSource(name=getattr(env, "env_name", type(env).__name__.lower()), spec=None, creator=None,
                         native=False, vector=env)
    if _is_env_instance(env):
        raise TypeError(
            f"env must be an env class, a creator (a function returning a new env), a name or a vector env "
            f"made by puffercore.vector.make; got an env instance of {type(env).__name__}: the trainer makes "
            f"num_envs envs itself, so pass {type(env).__name__} (the class) or a lambda that makes one")
    if not callable(env):
        raise TypeError(f"env must be a name, an env class, a creator or a vector env, got {env!r}")
    return EnvSource(name=getattr(env, "__name__", type(env).__name__).lower(), spec=importable_name(env),
                     creator=env, native=_is_native_class(env))


# How a caller passes the env of a checkpoint that can't make its own.
PASS_THE_ENV = ("on the command line, `puffercore eval my_module:MyEnv --checkpoint RUN` or `puffercore train "
                "my_module:MyEnv --resume RUN`; in Python, `ppo.evaluate(RUN, env=MyEnv)` or "
                "`ppo.train(resume=RUN, env=MyEnv)`")


def resolve_saved(spec: Any, env: Any, where: str) -> EnvSource:
    """The EnvSource of a saved run whose checkpoint (at `where`) names its env `spec`.
    `env`, when the caller passes one, is used, and refused when it is another env than
    the spec names. Without it the spec alone makes the env only when it names an env
    puffercore knows: anything else (module:attribute, which would be imported and
    called) is refused with how to pass the env, never imported."""
    if env is not None:
        source = resolve(env)
        if spec is not None and source.spec is not None and source.spec != spec:
            raise ValueError(f"{where} was trained on {spec!r}, not {source.spec!r}")
        return source
    if spec is None:
        raise ValueError(f"{where}: the checkpoint's env has no importable name (a lambda or a vector env); "
                         f"pass the env: {PASS_THE_ENV}")
    known = _known_env(spec) if isinstance(spec, str) else None
    if known is None:
        raise ValueError(
            f"{where}: the checkpoint names the env {spec!r}, which is not one puffercore knows (an ocean env, a "
            f"gymnasium id registered in gymnasium, atari:GAME); code a file names is never imported or run. "
            f"If you trust that env, pass it yourself: {PASS_THE_ENV}")
    return known


def same_env(a: Any, b: Any) -> bool:
    """Whether two env names make the same env ("Acrobot-v1" is "gymnasium:Acrobot-v1")."""
    return a == b or resolve(a).spec == resolve(b).spec


def make_vector(source: EnvSource, backend: str = "auto", num_envs: int = 8, num_workers: int | None = None,
                batch_size: int | None = None, seed: int = 0):
    """A vector env of `num_envs` sub-envs of `source` on `backend` ("auto": threads for
    native envs, processes for Python envs). A source that already is a vector env is
    returned as it is. A native env on serial or processes is made in blocks of sub-envs
    (its creator called with num_envs=block): one per batch, and on processes one per
    worker; errors name the numbers given here."""
    import puffercore.vector

    if source.vector is not None:
        return source.vector
    if backend == "auto":
        backend = "threads" if source.native else "processes"
    if backend not in puffercore.vector.BACKENDS:
        raise ValueError(f"backend must be one of {['auto', *sorted(puffercore.vector.BACKENDS)]}, got {backend!r}")
    if not source.native:
        if backend == "threads":
            raise ValueError(f"env {source.name!r} is a Python env; the threads backend steps native envs only "
                             f"(use serial or processes)")
        return puffercore.vector.make(source.creator, num_envs, backend=backend, num_workers=num_workers,
                                      batch_size=batch_size, seed=seed)
    if backend == "threads":
        return puffercore.vector.make(source.creator, num_envs, backend="threads", num_workers=num_workers,
                                      batch_size=batch_size, seed=seed)
    # serial/processes: each creator env is a block of sub-envs, one block per batch and,
    # on processes, at least one per worker (a batch is whole workers, each with whole blocks).
    batches = num_envs // (batch_size or num_envs)
    blocks = batches
    if backend == "processes" and num_workers:
        if num_envs % num_workers:
            raise ValueError(f"num_workers must divide num_envs={num_envs}, got {num_workers}")
        if num_workers % batches:
            raise ValueError(f"num_workers must be a multiple of num_envs / batch_size = {batches} on the processes "
                             f"backend (a batch is whole workers), got {num_workers}")
        blocks = num_workers
    creator = functools.partial(source.creator, num_envs=num_envs // blocks)
    return puffercore.vector.make(creator, blocks, backend=backend, num_workers=num_workers,
                                  batch_size=blocks // batches if batches > 1 else None, seed=seed)


def _known_env(name: str) -> EnvSource | None:
    """The env `name` gives without importing anything the name chooses (an ocean env, a
    registered gymnasium id, an Atari game), or None."""
    if name in OCEAN_ENVS:
        from puffercore import ocean

        return EnvSource(name=name, spec=name, creator=getattr(ocean, OCEAN_ENVS[name]), native=True)
    if name.startswith((ATARI_PREFIX, "ALE/")):
        from puffercore.atari import AtariEnv, ale_id

        env_id = ale_id(name.removeprefix(ATARI_PREFIX))  # ValueError naming the game
        game = env_id.removeprefix("ALE/").rsplit("-", 1)[0]
        return EnvSource(name=f"{ATARI_PREFIX}{game}", spec=name, creator=functools.partial(AtariEnv, env_id),
                         native=False)
    env_id = name.removeprefix(GYMNASIUM_PREFIX)
    if env_id in gymnasium.registry:
        return EnvSource(name=f"{GYMNASIUM_PREFIX}{env_id}", spec=f"{GYMNASIUM_PREFIX}{env_id}",
                         creator=functools.partial(gymnasium.make, env_id), native=False)
    return None


def _resolve_name(name: str) -> EnvSource:
    known = _known_env(name)
    if known is not None:
        return known
    if name.startswith(GYMNASIUM_PREFIX):
        env_id = name.removeprefix(GYMNASIUM_PREFIX)
        raise ValueError(f"unknown gymnasium env id {env_id!r} in env={name!r}"
                         f"{suggestion(env_id, gymnasium.registry, key=str.lower)}")
    if ":" in name:
        return dataclasses.replace(_resolve_object(import_attribute(name)), name=name, spec=name)
    raise ValueError(
        f"unknown env {name!r}; expected an ocean env ({', '.join(sorted(OCEAN_ENVS))}), a gymnasium id "
        f"(e.g. Acrobot-v1 or {GYMNASIUM_PREFIX}Acrobot-v1), an Atari game ({ATARI_PREFIX}Breakout or "
        f"ALE/Breakout-v5) or module:attribute (e.g. my_envs:MyEnv)"
        f"{suggestion(name, [*OCEAN_ENVS, *gymnasium.registry], key=str.lower)}")


def imports_code(name: str) -> bool:
    """Whether resolving the env name `name` would import a module it names
    (module:attribute, or a gymnasium id module:Env-v0 that gymnasium does not know)."""
    return ":" in name and not name.startswith(GYMNASIUM_PREFIX) and _known_env(name) is None


def import_attribute(name: str, what: str = "env") -> Any:
    """The attribute `module:attribute` names, imported (the user's own name for an env
    or a policy, never one read from a file); ValueError naming `what` it was for."""
    module_name, _, attribute = name.partition(":")
    try:
        target = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"{what} {name!r}: cannot import module {module_name!r} ({error})") from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ValueError(f"{what} {name!r}: module {module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    return target


def importable_name(creator: Callable) -> str | None:
    """module:qualname when importing it gives `creator` back (not for lambdas, closures
    or partials)."""
    module, qualname = getattr(creator, "__module__", None), getattr(creator, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        return None
    try:
        return f"{module}:{qualname}" if import_attribute(f"{module}:{qualname}") is creator else None
    except ValueError:
        return None


def _is_native_class(creator: Any) -> bool:
    from puffercore.ocean.native import NativeEnv

    return isinstance(creator, type) and issubclass(creator, NativeEnv)


def _is_env_instance(env: Any) -> bool:
    from puffercore.env import PufferEnv

    return isinstance(env, (gymnasium.Env, PufferEnv)) or (
        hasattr(env, "step") and hasattr(env, "reset") and not isinstance(env, type))
