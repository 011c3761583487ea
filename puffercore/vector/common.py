"""Pieces every vector backend shares: building sub-envs from a user's creator,
argument checks, merging infos, the batches recv() returns, and the guard that keeps
two threads out of one vector env."""

from __future__ import annotations

import functools
import operator
import threading
from typing import Any, Callable, NoReturn

import gymnasium
import numpy as np

from puffercore.checks import check_int
from puffercore.emulation import Adapter, GymnasiumEnv, PettingZooEnv
from puffercore.env import Buffers, EpisodeMeans, PufferEnv, check_seed


# What every backend says once an env raised mid-batch: the others of the batch may have
# stepped, so the vector's state is unknown until a reset.
RESET_AFTER_FAILURE = "call reset() before stepping again"


def merge_infos(infos: list[dict]) -> dict[str, float]:
    """One info of sub-env infos (each a dict of means plus `episodes`): the
    episode-weighted means (`EpisodeMeans`)."""
    means = EpisodeMeans()
    for info in infos:
        means.add(info)
    return means.drain()


def check_creator(env_creator: Any) -> None:
    """TypeError unless `env_creator` can be called to make envs (an env instance can't:
    the vector makes num_envs of them)."""
    if not callable(env_creator):
        raise TypeError(f"env_creator must be an env class or a function returning a new env (the vector makes "
                        f"num_envs of them), got {type(env_creator).__name__} {env_creator!r:.80}: pass the class, "
                        f"e.g. CartPole, or a function, e.g. lambda: gymnasium.make('CartPole-v1')")


def check_batching(num_envs: Any, batch_size: Any) -> tuple[int, int]:
    """num_envs and batch_size (None: all envs) as every backend accepts them."""
    num_envs = check_int(num_envs, "num_envs", 1)
    batch_size = num_envs if batch_size is None else check_int(batch_size, "batch_size", 1)
    if num_envs % batch_size:
        raise ValueError(f"batch_size must divide num_envs={num_envs}, got {batch_size}")
    return num_envs, batch_size


def _wrapper_for(env: Any) -> Callable[..., PufferEnv]:
    """How to turn what a creator returned into a PufferEnv writing into given buffers."""
    if isinstance(env, gymnasium.Env):
        return GymnasiumEnv
    try:
        from pettingzoo import ParallelEnv
    except ImportError:  # PettingZoo is optional
        ParallelEnv = ()
    if isinstance(env, ParallelEnv):
        return PettingZooEnv
    raise TypeError(
        "env_creator must return a puffercore PufferEnv, a gymnasium.Env or a PettingZoo ParallelEnv, "
        f"got {type(env).__name__}"
    )


def env_name(env: PufferEnv) -> str:
    """What to call the envs of a vector (a trainer names its run after it): a gymnasium
    env's registered id, else the class of the env (the one an adapter wraps)."""
    inner = env.env if isinstance(env, Adapter) else env
    spec = getattr(inner, "spec", None)
    return spec.id if isinstance(getattr(spec, "id", None), str) else type(getattr(inner, "unwrapped", inner)).__name__.lower()


class EnvFactory:
    """Builds the envs of a vector from a user's `env_creator(**env_kwargs)`: each call
    returns a PufferEnv writing into the buffers it is given. A creator that returns a
    PufferEnv must accept `buffers=`; a gymnasium Env or PettingZoo ParallelEnv is wrapped
    in its adapter. Picklable when the creator is, so worker processes build their own.

    `probe` is one env built on its own buffers, which tells the spaces and row counts;
    the caller closes it."""

    def __init__(self, env_creator: Callable[..., Any], env_kwargs: dict):
        check_creator(env_creator)
        self.env_creator, self.env_kwargs = env_creator, env_kwargs
        first = env_creator(**env_kwargs)
        if isinstance(first, PufferEnv):
            self.wrapper = None
            first.close()
            self.probe = self(None)  # fails here, not in a worker, if buffers= is refused
        else:
            self.wrapper = _wrapper_for(first)
            self.probe = self.wrapper(first)

    def __call__(self, buffers: Buffers | None = None) -> PufferEnv:
        if self.wrapper is not None:
            return self.wrapper(self.env_creator(**self.env_kwargs), buffers=buffers)
        try:
            return self.env_creator(buffers=buffers, **self.env_kwargs)
        except TypeError as error:
            if "buffers" in str(error):
                raise TypeError("env_creator returns a PufferEnv, so it must accept buffers=") from error
            raise

    def __getstate__(self):
        return {**self.__dict__, "probe": None}


class Batch(tuple):
    """What `recv()` returns: a tuple that unpacks as
    `(observations, rewards, terminals, truncations, info, env_ids, masks)`, with the same
    items by name, plus `final_observations` (the batch's rows of the vector's
    `final_observations`) and `rows` (the batch's rows of the vector's buffers: a slice
    when they are one block, else an index array in batch order)."""

    observations = property(operator.itemgetter(0))
    rewards = property(operator.itemgetter(1))
    terminals = property(operator.itemgetter(2))
    truncations = property(operator.itemgetter(3))
    info = property(operator.itemgetter(4))
    env_ids = property(operator.itemgetter(5))
    masks = property(operator.itemgetter(6))
    final_observations: np.ndarray
    rows: slice | np.ndarray


# Scattered unit sets whose rows and env_ids are kept: a few workers finish in a few
# orders, so a handful of sets recur; the bound keeps a many-unit vector from growing it.
MAX_SCATTERED = 4096
GATHERED = ("observations", "final_observations", "rewards", "terminals", "truncations", "masks")


class Batcher:
    """The batches of one vector's buffers, built in one place for every backend.

    The buffers are cut into `num_units` equal units of consecutive envs (a backend's
    unit: an env, a worker's envs, a threads unit); a batch is `units_per_batch` units.
    When a batch's units are one block its arrays are views of the buffers, made once per
    block and reused, so the hot path builds only the tuple; otherwise they are gathered
    into staging arrays, valid until the next scattered batch."""

    def __init__(self, buffers: Buffers, num_units: int, envs_per_unit: int, units_per_batch: int):
        self.buffers = buffers
        self.rows_per_unit = len(buffers.observations) // num_units
        self.envs_per_unit = envs_per_unit
        self.units_per_batch = units_per_batch
        self._blocks: dict[int, tuple] = {}  # first unit -> the block's views, env_ids and rows
        self._scattered: dict[bytes, tuple] = {}  # units' bytes -> their rows and env_ids, up to MAX_SCATTERED
        self._staging: tuple[np.ndarray, ...] | None = None  # GATHERED copies, made by the first scattered batch

    def batch(self, units, info: dict) -> Batch:
        """The Batch of `units` (ascending unit indices, a sequence of ints)."""
        first = int(units[0])
        if int(units[-1]) - first == self.units_per_batch - 1:
            # Unpacked, not sliced: this runs once per step, and slices cost as much as the rest.
            obs, rewards, terminals, truncations, env_ids, masks, finals, rows = (
                self._blocks.get(first) or self._block(first))
            batch = tuple.__new__(Batch, (obs, rewards, terminals, truncations, info, env_ids, masks))
            batch.final_observations = finals
            batch.rows = rows
            return batch
        return self._gather(np.asarray(units), info)

    def _block(self, first: int) -> tuple:
        count = self.units_per_batch
        rows = slice(first * self.rows_per_unit, (first + count) * self.rows_per_unit)
        env_ids = np.arange(first * self.envs_per_unit, (first + count) * self.envs_per_unit)
        env_ids.flags.writeable = False  # shared by every batch of this block
        b = self.buffers
        parts = (b.observations[rows], b.rewards[rows], b.terminals[rows], b.truncations[rows], env_ids,
                 b.masks[rows], b.final_observations[rows], rows)
        self._blocks[first] = parts
        return parts

    def _gather(self, units: np.ndarray, info: dict) -> Batch:
        key = units.tobytes()
        rows, env_ids = self._scattered.get(key) or self._indices(units, key)
        if self._staging is None:
            self._staging = tuple(np.empty((len(rows), *getattr(self.buffers, name).shape[1:]),
                                           getattr(self.buffers, name).dtype) for name in GATHERED)
        for name, out in zip(GATHERED, self._staging):
            getattr(self.buffers, name).take(rows, 0, out)  # the method: np.take's dispatch costs more than the copy
        obs, finals, rew, term, trunc, masks = self._staging
        batch = tuple.__new__(Batch, (obs, rew, term, trunc, info, env_ids, masks))
        batch.final_observations, batch.rows = finals, rows
        return batch

    def _indices(self, units: np.ndarray, key: bytes) -> tuple[np.ndarray, np.ndarray]:
        rows = (units[:, None] * self.rows_per_unit + np.arange(self.rows_per_unit)).ravel()
        env_ids = (units[:, None] * self.envs_per_unit + np.arange(self.envs_per_unit)).ravel()
        rows.flags.writeable = env_ids.flags.writeable = False  # shared by every batch of these units
        if len(self._scattered) < MAX_SCATTERED:
            self._scattered[key] = rows, env_ids
        return rows, env_ids


class BatchStepper:
    """Steps consecutive envs of a vector (a serial batch, a worker's envs) on the actions
    already in their rows of `buffers`, which the vector checked once for the whole
    batch, and returns the infos that are not empty.

    Gymnasium adapters get their env actions converted once for the batch
    (`ActionTree.unflatten_batch`) and their results written once for the batch: the
    rewards, terminals and truncations as one assignment each, and the observations as one
    checked copy when the space is a plain Box (each env's own writer otherwise, and to
    name a bad observation). Other envs step on their own rows."""

    def __init__(self, envs: list[PufferEnv], buffers: Buffers):
        self._buffers = buffers
        self.failed = 0
        if all(isinstance(env, GymnasiumEnv) for env in envs):
            self._envs = envs
            self._steps = [env.step_action for env in envs]
            self._action_tree = envs[0].action_tree
            leaf = envs[0].observation_tree.leaves[0]
            # A plain (one leaf, root) space: the batch's observations are one array of this shape.
            self._flat_observations = None
            if not leaf.path:
                self._flat_observations = buffers.observations.view()
                self._flat_observations.shape = (len(envs), *leaf.shape)  # raises rather than copy
        else:
            self._steps = [functools.partial(_step_info, env) for env in envs]
            self._action_tree = None

    def __call__(self) -> list[dict]:
        """Step every env; when one raises, `failed` is its index among ours."""
        if self._action_tree is None:
            try:
                infos = []
                for step in self._steps:
                    infos.append(step())
            except BaseException:
                self.failed = len(infos)
                raise
            return [info for info in infos if info]
        try:
            results = []
            for step, action in zip(self._steps, self._action_tree.unflatten_batch(self._buffers.actions)):
                results.append(step(action))
        except BaseException:
            self.failed = len(results)
            raise
        observations, rewards, terminals, truncations, infos = zip(*results)
        rows = self._buffers
        rows.rewards[:], rows.terminals[:], rows.truncations[:] = rewards, terminals, truncations
        self._write_observations(observations)
        return [info for info in infos if info]

    def _write_observations(self, observations: tuple) -> None:
        out = self._flat_observations
        if out is not None:
            try:
                batch = np.asarray(observations)
                if batch.shape == out.shape:
                    np.copyto(out, batch, casting="same_kind")
                    return
            except (TypeError, ValueError):
                pass  # the writers below name the env and leaf that does not fit
        for env, observation in zip(self._envs, observations):
            env._write_observation(observation)


def _step_info(env: PufferEnv) -> dict:
    """The info of stepping a non-gymnasium env on its own action rows: adapters skip the
    check the vector already made, other PufferEnvs check again in step()."""
    if isinstance(env, Adapter):
        return env.step_written()[4]
    return env.step(env.actions)[4]


# The public calls of a vector env: one runs at a time (see VectorEnv).
EXCLUSIVE_CALLS = ("reset", "step", "async_reset", "send", "recv", "render", "close")


class CallGuard:
    """The public call of one vector env now running. `lock` is reentrant: held by the
    thread that runs the call, it lets that thread's nested calls through."""

    __slots__ = ("lock", "call")

    def __init__(self):
        self.lock = threading.RLock()
        self.call: str | None = None

    def refuse(self, vector: str, name: str, this_thread: bool) -> NoReturn:
        raise RuntimeError(
            f"{vector}.{name}() called while {vector}.{self.call or 'another call'}() is running in "
            f"{'this' if this_thread else 'another'} thread: a vector env serves one call at a time; make "
            "its calls from one thread, or hold a lock around them"
        )


def exclusive(method: Callable) -> Callable:
    """`method` of a vector env, refused with a RuntimeError while another of its public
    calls runs. The engines keep no lock on their hot path (atomics hand the work over),
    so two callers at once would race on the same envs and buffers: the threads engine
    hangs, or frees envs a stepping caller still uses. A call made inside another on
    the same thread (step's send and recv) runs, except close(): a signal handler or
    callback must not free what the interrupted call is stepping. This wrapper runs
    twice per staggered step, so it does as little as it can: one reentrant lock, one
    attribute."""
    name = method.__name__

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        guard = self._call_guard
        if not guard.lock.acquire(False):
            guard.refuse(type(self).__name__, name, this_thread=False)
        try:
            if guard.call is None:
                guard.call = name
                try:
                    return method(self, *args, **kwargs)
                finally:
                    guard.call = None
            if name == "close":
                guard.refuse(type(self).__name__, name, this_thread=True)
            return method(self, *args, **kwargs)
        finally:
            guard.lock.release()

    call.exclusive = True
    return call


class VectorEnv(PufferEnv):
    """What every backend shares: reset/step on top of its async_reset/send/recv, and
    the call-order checks, so all backends fail alike. A backend sets `batch_size` and
    `num_creator_envs` (envs made by the creator; `num_envs` counts their sub-envs).

    Every backend's EXCLUSIVE_CALLS are wrapped in `exclusive` when its class is made:
    one thread at a time; a second caller gets a RuntimeError, never a wait."""

    batch_size: int
    num_creator_envs: int
    _closed = False
    _has_reset = False
    _failure: str | None = None  # what broke the last batch (set by a backend); a reset clears it

    def __new__(cls, *args, **kwargs):
        vector = super().__new__(cls)
        vector._call_guard = CallGuard()  # before __init__, so no call ever finds it missing
        return vector

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in EXCLUSIVE_CALLS:
            method = getattr(cls, name)
            if not getattr(method, "exclusive", False):  # inherited from a class wrapped already
                setattr(cls, name, exclusive(method))

    def _adopt_spaces(self, env: PufferEnv) -> None:
        """Take the per-row spaces (and observation/action trees) and the name of one of
        our envs."""
        self.env_name = env_name(env)
        self.single_observation_space = env.single_observation_space
        self.single_action_space = env.single_action_space
        self.observation_tree = getattr(env, "observation_tree", None)
        self.action_tree = getattr(env, "action_tree", None)
        self.render_mode = env.render_mode
        self.metadata = env.metadata

    def async_reset(self, seed: int | None = None, options: dict | None = None) -> None:
        raise NotImplementedError

    def _reset_seed(self, seed: int | None) -> int | None:
        """The seed a reset uses: the one given, else the vector env's own seed at its
        first reset (later unseeded resets go on from each env's random stream)."""
        seed = check_seed(seed)
        return self._default_seed if seed is None and not self._has_reset else seed

    def send(self, actions) -> None:
        raise NotImplementedError

    def recv(self):
        raise NotImplementedError

    def reset(self, seed: int | None = None, options: dict | None = None):
        self._check_synchronous("reset")
        self.async_reset(seed, options)
        observations, _, _, _, info, _, _ = self.recv()
        return observations, info

    def step(self, actions):
        self._check_synchronous("step")
        self._check_stepping("step")
        self.send(actions)
        return self.recv()[:5]

    def _check_synchronous(self, method: str) -> None:
        self._check_open(method)  # "closed" says more than a batching hint about a closed vector
        if self.batch_size != self.num_creator_envs:
            raise RuntimeError(
                f"{method}() needs batch_size == num_envs; with batch_size={self.batch_size} use "
                "async_reset()/send()/recv()"
            )

    def _check_open(self, method: str) -> None:
        if self._closed:
            raise RuntimeError(f"{method}() called on a closed vector env")

    def _check_not_failed(self, method: str) -> None:
        self._check_open(method)
        if self._failure is not None:
            raise RuntimeError(f"{method}() after {self._failure}: {RESET_AFTER_FAILURE}")

    def _check_stepping(self, method: str) -> None:
        self._check_not_failed(method)
        if not self._has_reset:
            raise RuntimeError(f"{method}() called before reset(); call reset() or async_reset() first")
