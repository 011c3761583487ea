"""The `ale` backend: Atari games on ale-py's own vector env (`ale_py.ALEVectorInterface`,
EnvPool-derived: the emulators, frame skip, max-pool, resize and frame stack run on its
C++ threads, without the GIL), behind puffercore's batch contract.

    vec = puffercore.vector.make(functools.partial(AtariEnv, "Breakout"), 64, backend="ale", num_workers=16)
    puffercore train atari:Breakout --vec.backend ale

The creator must be `puffercore.atari.AtariEnv` (or a functools.partial of it, what
`atari:GAME` resolves to): its keywords become ale-py's options. The preprocessing is
CleanRL's, as AtariEnv's, with these differences (tests/test_atari.py checks the rest):
- resize: OpenCV's INTER_AREA in C++ (AtariEnv's C kernel gives the same bytes as
  OpenCV; frames here are not compared bit for bit with AtariEnv's);
- a lost life (episodic_life) ends the learner's episode and the game goes on, as in
  AtariEnv, but without AtariEnv's NOOP and FIRE steps before the next observation: the
  policy presses FIRE itself (ale-py fires only at a new game);
- seeds: sub-env j is seeded with (seed + j) mod 2^31, so a seed fixes the run, but not the
  same games as AtariEnv's on the processes backend.
Rewards come back raw and are clipped here (`clip_rewards`), so the info reports each
game's raw score (`episode_return`) and length in steps (`episode_length`), as AtariEnv
does through the gymnasium adapter.

All envs step at once (batch_size = num_envs); ale-py's own asynchronous batches
return envs in the order they finish, which this backend does not offer yet.
"""

from __future__ import annotations

import functools
import os
import re

import numpy as np

from puffercore.checks import check_int
from puffercore.env import EpisodeMeans, check_actions, check_seed
from puffercore.vector.common import Batcher, VectorEnv, check_batching

# AtariEnv's keywords and the ALEVectorInterface options they set.
OPTIONS = {"noop_max": "noop_max", "frame_skip": "frame_skip", "screen_size": ("img_height", "img_width"),
           "stack": "stack_num", "fire_reset": "use_fire_reset",
           "repeat_action_probability": "repeat_action_probability", "max_episode_frames": "max_episode_steps"}
SEED_BOUND = 2**31  # sub-env seeds are taken modulo this
# Handled here rather than by ale-py (raw rewards for the scores; the game goes on after a lost life).
OWN_OPTIONS = ("game", "episodic_life", "clip_rewards")


def game_options(env_creator, env_kwargs: dict) -> tuple[str, dict]:
    """The gymnasium id and AtariEnv keywords that `env_creator` (AtariEnv or a partial of
    it) and `env_kwargs` give; TypeError naming what else was passed."""
    from puffercore.atari import AtariEnv, ale_id

    args, keywords, function = (), {}, env_creator
    if isinstance(env_creator, functools.partial):
        args, keywords, function = env_creator.args, env_creator.keywords, env_creator.func
    if function is not AtariEnv or len(args) > 1:
        raise TypeError("the ale backend steps Atari games: env_creator must be puffercore.atari.AtariEnv or "
                        f"functools.partial(AtariEnv, GAME, ...), got {env_creator!r:.100}; use backend='processes'")
    options = {**keywords, **env_kwargs}
    if args:
        options["game"] = args[0]
    unknown = sorted(set(options) - set(OPTIONS) - set(OWN_OPTIONS))
    if unknown:
        raise TypeError(f"the ale backend does not take {', '.join(unknown)} (AtariEnv options it takes: "
                        f"{', '.join(sorted({*OPTIONS, *OWN_OPTIONS}))})")
    return ale_id(options.pop("game", "Breakout")), options


class Ale(VectorEnv):
    def __init__(self, env_creator, num_envs, num_workers=None, batch_size=None, seed=0, **env_kwargs):
        num_envs, batch_size = check_batching(num_envs, batch_size)
        if batch_size != num_envs:
            raise ValueError(f"batch_size must equal num_envs={num_envs} on the ale backend (it steps all envs at "
                             f"once), got {batch_size}; backend 'processes' steps staggered batches")
        if num_workers is None:
            num_workers = min(num_envs, len(os.sched_getaffinity(0)))
        num_workers = check_int(num_workers, "num_workers", 1)
        self._default_seed = check_seed(seed)
        env_id, options = game_options(env_creator, env_kwargs)
        self.clip_rewards = options.pop("clip_rewards", True)
        episodic_life = options.pop("episodic_life", True)
        ale_options = {}
        for name, value in options.items():
            for key in (OPTIONS[name],) if isinstance(OPTIONS[name], str) else OPTIONS[name]:
                ale_options[key] = value
        from ale_py import ALEVectorInterface, roms

        game = env_id.removeprefix("ALE/").rsplit("-", 1)[0]
        rom = roms.get_rom_path(re.sub(r"(?<!^)(?=[A-Z])", "_", game).lower())
        if rom is None:
            raise ValueError(f"game {game!r}: ale-py's vector env finds no ROM for it; use backend='processes'")
        self._ale = ALEVectorInterface(
            rom_path=rom, num_envs=num_envs,
            num_threads=num_workers, autoreset_mode="SameStep", reward_clipping=False, episodic_life=False,
            life_loss_info=episodic_life, grayscale=True, maxpool=True, **ale_options)
        import gymnasium

        stack, size = options.get("stack", 4), options.get("screen_size", 84)
        self.env_name = env_id
        self.single_observation_space = gymnasium.spaces.Box(0, 255, (stack, size, size), np.uint8)
        self.single_action_space = gymnasium.spaces.Discrete(len(self._ale.get_action_set()))
        self.observation_tree = self.action_tree = None
        self.render_mode, self.metadata = None, {"render_modes": []}
        self.num_envs = self.num_agents = self.batch_size = self.num_creator_envs = num_envs
        self.num_workers = num_workers
        self._init_buffers(None)
        self._batcher = Batcher(self.buffers, 1, num_envs, 1)
        self._all = np.arange(num_envs)
        self._paddle = np.ones(num_envs, np.float32)
        self._lives = np.zeros(num_envs, np.int64)
        self._game_return = np.zeros(num_envs, np.float64)
        self._game_length = np.zeros(num_envs, np.int64)
        self._seeds = np.random.default_rng(self._default_seed)  # the seeds of unseeded resets
        self._info: dict = {}
        self._state = "idle"  # "ready": a recv is due; "held": actions are due; "stepping": ale-py steps

    def async_reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self._check_open("async_reset")
        seed = self._reset_seed(seed)
        self._drain()
        if seed is None:
            seeds = self._seeds.integers(0, SEED_BOUND, self.num_envs).tolist()
        else:  # ale-py takes C ints
            seeds = [(seed + env) % SEED_BOUND for env in range(self.num_envs)]
        observations, info = self._ale.reset(self._all, seeds)
        self._write(observations, info["env_id"])
        self.rewards[:], self.terminals[:], self.truncations[:] = 0.0, False, False
        self._lives[:] = info["lives"]
        self._game_return[:], self._game_length[:] = 0.0, 0
        self._info, self._state, self._has_reset = {}, "ready", True

    def send(self, actions) -> None:
        self._check_stepping("send")
        if self._state != "held":
            raise RuntimeError("send() needs a recv() first: send the actions for the rows the last recv() returned")
        np.copyto(self.actions, check_actions(actions, self.single_action_space, self.num_agents))
        self._ale.send(self.actions, self._paddle)
        self._state = "stepping"

    def recv(self):
        self._check_open("recv")
        if self._state == "stepping":
            self._receive()
        elif self._state != "ready":
            raise RuntimeError("recv() called with nothing pending; call async_reset() or send() first")
        self._state = "held"
        return self._batcher.batch((0,), self._info)

    def render(self):
        return None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._drain()
            self._ale = None  # its threads stop when it is freed

    def _receive(self) -> None:
        observations, rewards, terminals, truncations, info = self._ale.recv()
        env_ids = info["env_id"]
        self._write(observations, env_ids)
        raw = np.empty(self.num_envs, np.float64)
        raw[env_ids], self.terminals[env_ids], self.truncations[env_ids] = rewards, terminals, truncations
        self.rewards[:] = np.sign(raw) if self.clip_rewards else raw
        lives = np.empty_like(self._lives)
        lives[env_ids] = info["lives"]
        self._game_return += raw
        self._game_length += 1
        ended = self.terminals | self.truncations
        if ended.any():
            self.final_observations[env_ids[ended[env_ids]]] = info["final_obs"][ended[env_ids]]
        # A lost life leaves the game going on with fewer lives; a new game (autoreset) has as many or more.
        game_over = self.truncations | (self.terminals & ~(lives < self._lives))
        self._lives = lives
        self._info = {}
        if game_over.any():
            means = EpisodeMeans()
            for score, length in zip(self._game_return[game_over], self._game_length[game_over]):
                means.add_episode({"episode_return": float(score), "episode_length": float(length)})
            self._info = means.drain()
            self._game_return[game_over], self._game_length[game_over] = 0.0, 0

    def _write(self, observations: np.ndarray, env_ids: np.ndarray) -> None:
        if np.array_equal(env_ids, self._all):
            np.copyto(self.observations, observations)
        else:
            self.observations[env_ids] = observations

    def _drain(self) -> None:
        """Take the step ale-py is still running, so a reset or close finds it idle."""
        if self._state == "stepping":
            self._ale.recv()
            self._state = "idle"
