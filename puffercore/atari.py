"""Atari games with the standard DQN/PPO preprocessing, as one gymnasium env.

    env = AtariEnv("Breakout")                  # or "ALE/Breakout-v5"; needs `pip install ale-py`
    obs, info = env.reset(seed=0)               # uint8 [4, 84, 84]: the last 4 frames, oldest first
    obs, reward, terminal, truncation, info = env.step(1)
    puffercore train atari:Breakout             # the CleanRL ppo_atari preset, on the ale backend (vector/ale.py)

What one step does (the preprocessing of Machado et al. 2018 and CleanRL's ppo_atari,
bit for bit the observations and raw rewards of gymnasium's `AtariPreprocessing` +
`FrameStackObservation` on the same seed and actions; tests/test_atari.py):

- reset: the ALE game is reset, then 1..`noop_max` single-frame NOOPs (the count drawn
  from the ALE env's own `np_random`, as gymnasium does), then FIRE for games that wait
  for it (`fire_reset`); the frame stack is filled with the first frame.
- step: the action is repeated for `frame_skip` frames; the observation is the
  pixel-wise max of the grayscale screens of the last two frames (Atari sprites
  flicker), resized to 84x84 by area averaging, pushed onto the stack.
- `episodic_life`: losing a life is terminal for the learner, but the game goes on:
  the next `reset()` (without a seed) continues it with a NOOP step (and FIRE), as
  DeepMind's agents did. A seeded reset, or a reset after the game ended, starts a new
  game.
- `clip_rewards`: the reward is its sign. The raw game score is not lost: at the end of
  each game the info has `episode_return` (the score of the whole game, every life);
  at a life lost mid-game it has `episode_continues`, which puffercore's gymnasium
  adapter reads as "the learner's episode ended, the game's did not", so the logged
  `episode_return` and `episode_length` are per game, in raw score.

The ALE is driven through the gymnasium ALE env (`ale_py.env.AtariEnv`, frameskip=1,
repeat_action_probability=0) for what it sets up -- the ROM, the minimal action set,
seeding (`seed_game`, so a seed means the same game as in gymnasium) and the
108,000-frame truncation -- while frames are stepped on its `ale` (the ALEInterface)
directly: the gymnasium env's step copies a full RGB screen every frame, of which the
preprocessing keeps two grayscale screens in four.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from puffercore import _image
from puffercore.checks import check_int

# No-frameskip ALE ids in their gymnasium form; "Breakout" means ALE/Breakout-v5.
ALE_PREFIX = "ALE/"


def ale_id(game: str) -> str:
    """The gymnasium id of `game` ("Breakout", "ALE/Breakout-v5"); ValueError naming
    `game` when ale-py is missing or has no such game."""
    if not isinstance(game, str) or not game:
        raise ValueError(f"game must be an Atari game name such as 'Breakout' or 'ALE/Breakout-v5', got {game!r}")
    try:
        import ale_py
    except ImportError:
        raise ValueError(f"game={game!r} needs ale-py: pip install 'puffercore[atari]'") from None
    gymnasium.register_envs(ale_py)
    env_id = game if game.startswith(ALE_PREFIX) else f"{ALE_PREFIX}{game}-v5"
    if env_id not in gymnasium.registry:
        raise ValueError(f"game={game!r}: ale-py has no {env_id!r} (games are CamelCase, e.g. 'Breakout', 'SpaceInvaders')")
    return env_id


def area_taps(size_in: int, size_out: int) -> tuple[np.ndarray, np.ndarray]:
    """Area-averaging resize of one axis as taps: output i is sum_k weight[i, k] *
    input[index[i, k]], where the weights are the overlaps of output cell i (size_in /
    size_out input pixels wide) with the input pixels, divided by the cell width. This is
    OpenCV's INTER_AREA for downscaling, which gymnasium's AtariPreprocessing uses; summed
    in float32 in OpenCV's order (across, then down) it gives OpenCV's bytes exactly
    (tested against cv2). Padding taps have weight 0."""
    if size_out > size_in:
        raise ValueError(f"area resize only shrinks: {size_in} -> {size_out}")
    scale = size_in / size_out
    spans = [(i * scale, (i + 1) * scale) for i in range(size_out)]
    width = max(int(np.ceil(hi)) - int(np.floor(lo)) for lo, hi in spans)
    index = np.zeros((size_out, width), np.intp)
    weight = np.zeros((size_out, width), np.float32)
    for i, (lo, hi) in enumerate(spans):
        for k, pixel in enumerate(range(int(np.floor(lo)), min(int(np.ceil(hi)), size_in))):
            index[i, k] = pixel
            weight[i, k] = (min(hi, pixel + 1) - max(lo, pixel)) / scale
    return index, weight


class AreaResize:
    """A [H, W] uint8 image to [h, w] by area averaging (see `area_taps`), in C
    (`puffercore._image`), without the GIL."""

    def __init__(self, shape_in: tuple[int, int], shape_out: tuple[int, int]):
        self.shape_in = tuple(shape_in)
        self.rows, self.row_weights = area_taps(shape_in[0], shape_out[0])
        self.cols, self.col_weights = area_taps(shape_in[1], shape_out[1])

    def __call__(self, image: np.ndarray, out: np.ndarray) -> None:
        if image.shape != self.shape_in:  # the taps index the image: a smaller one would be read past its end
            raise ValueError(f"image must have shape {self.shape_in}, got {image.shape}")
        _image.area_resize(image, out, self.rows, self.row_weights, self.cols, self.col_weights)


class AtariEnv(gymnasium.Env):
    """One Atari game with the standard preprocessing (see the module docstring).
    Observations are uint8 [stack, screen_size, screen_size] views of the env's frame
    ring, valid until the next step or reset (puffercore's adapter copies them into its
    rows; copy them yourself to keep them)."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, game: str = "Breakout", noop_max: int = 30, frame_skip: int = 4, screen_size: int = 84,
                 stack: int = 4, episodic_life: bool = True, fire_reset: bool = True, clip_rewards: bool = True,
                 repeat_action_probability: float = 0.0, max_episode_frames: int = 108_000,
                 render_mode: str | None = None):
        for name, value, least in (("noop_max", noop_max, 0), ("frame_skip", frame_skip, 1),
                                   ("screen_size", screen_size, 1), ("stack", stack, 1),
                                   ("max_episode_frames", max_episode_frames, 1)):
            check_int(value, name, least)
        if not 0.0 <= repeat_action_probability <= 1.0:
            raise ValueError(f"repeat_action_probability must be in [0, 1], got {repeat_action_probability!r}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.game = ale_id(game)
        self.ale_env = gymnasium.make(self.game, frameskip=1, repeat_action_probability=repeat_action_probability,
                                      max_num_frames_per_episode=max_episode_frames).unwrapped
        self.ale = self.ale_env.ale
        self.actions = self.ale_env._action_set  # action index -> ALE action (the minimal set)
        meanings = self.ale_env.get_action_meanings()
        if noop_max > 0 and meanings[0] != "NOOP":
            raise ValueError(f"noop_max={noop_max} needs action 0 to be NOOP; {self.game} has {meanings[0]}")
        self.noop_max, self.frame_skip, self.stack = int(noop_max), int(frame_skip), int(stack)
        self.episodic_life, self.clip_rewards = episodic_life, clip_rewards
        # Games that sit still until FIRE (Breakout's ball); FIRE then action 2, as DeepMind's and CleanRL's.
        self.fire_reset = fire_reset and len(meanings) >= 3 and meanings[1] == "FIRE"
        self.render_mode = render_mode
        # The ALE runs at 60 frames a second and a step shows one frame in frame_skip: videos play in real time.
        self.metadata = {**self.metadata, "render_fps": 60 / self.frame_skip}
        height, width = self.ale.getScreenDims()
        self._screens = np.zeros((2, height, width), np.uint8)  # the last two frames of a skip: max-pooled
        self._resize = AreaResize((height, width), (screen_size, screen_size))
        # The stack as a ring stored twice over: frame t goes to slots t % stack and
        # t % stack + stack, so the last `stack` frames, oldest first, are always one
        # contiguous window (a view): one frame written per step, never a whole stack.
        self._ring = np.zeros((2 * stack, screen_size, screen_size), np.uint8)
        self._head = 0  # slot of the newest frame, in [0, stack)
        self.observation_space = spaces.Box(0, 255, (stack, screen_size, screen_size), np.uint8)
        self.action_space = spaces.Discrete(len(self.actions))
        self._lives = 0
        self._life_lost = False  # the last step lost a life and the game goes on: reset() continues it
        self._game_return, self._game_length = 0.0, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if self._life_lost and seed is None:
            self._life_lost = False
            self._skip(0)  # the game continues from where the life was lost
        else:
            self._new_game(seed)
        if self.fire_reset:
            for action in (1, 2):
                if self._skip(action)[1]:  # the game ended already: start another (no seed: next stream)
                    self._new_game(None)
        self._fill_stack()
        return self._observation(), {}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action must be in {self.action_space} for {self.game}, got {action!r}")
        reward, game_over, truncated, life_lost = self._skip(action)
        self._push(self._pooled_frame())
        self._game_return += reward
        self._game_length += 1
        info: dict[str, Any] = {}
        if game_over or truncated:
            info["episode_return"] = self._game_return
            self._game_return, self._game_length = 0.0, 0
        elif life_lost:
            self._life_lost = True
            info["episode_continues"] = True
        terminal = game_over or life_lost
        return self._observation(), float(np.sign(reward)) if self.clip_rewards else reward, terminal, truncated, info

    def render(self):
        return self.ale.getScreenRGB() if self.render_mode == "rgb_array" else None

    def close(self):
        self.ale_env.close()

    def _new_game(self, seed: int | None) -> None:
        """A new game: reset (seeded: the ALE env reseeds its RNGs and reloads the ROM),
        then the no-op start, whose length comes from the ALE env's np_random."""
        self.ale_env.reset(seed=seed)
        noops = int(self.ale_env.np_random.integers(1, self.noop_max + 1)) if self.noop_max > 0 else 0
        for _ in range(noops):
            self.ale.act(self.actions[0])
            if self.ale.game_over():
                self.ale_env.reset()
        self._lives = self.ale.lives()
        self._life_lost = False
        self._game_return, self._game_length = 0.0, 0
        # A reset's frame is the current screen alone (the other pooled screen is black).
        self.ale.getScreenGrayscale(self._screens[0])
        self._screens[1].fill(0)

    def _skip(self, action: int) -> tuple[float, bool, bool, bool]:
        """Repeat `action` for frame_skip frames, stopping at the end of the game or (with
        episodic_life) of a life; the screens of the last two frames go to `_screens`.
        Returns (raw reward, game over, truncated, life lost)."""
        ale_action, reward = self.actions[action], 0.0
        game_over = truncated = life_lost = False
        for frame in range(self.frame_skip):
            reward += self.ale.act(ale_action)
            game_over, truncated = self.ale.game_over(with_truncation=False), self.ale.game_truncated()
            lives = self.ale.lives()
            life_lost, self._lives = self.episodic_life and lives < self._lives, lives
            if game_over or truncated or life_lost:
                # As gymnasium (and baselines' MaxAndSkip) do: the pooled screens keep
                # what they held; only the learner's bootstrap could read this frame.
                break
            if frame >= self.frame_skip - 2:
                self.ale.getScreenGrayscale(self._screens[self.frame_skip - 1 - frame])
        return reward, game_over, truncated, life_lost

    def _pooled_frame(self) -> np.ndarray:
        if self.frame_skip > 1:
            # In place, as gymnasium does: a skip cut short pools against this result.
            np.maximum(self._screens[0], self._screens[1], out=self._screens[0])
        return self._screens[0]

    def _push(self, screen: np.ndarray) -> None:
        self._head = (self._head + 1) % self.stack
        self._resize(screen, self._ring[self._head])
        self._ring[self._head + self.stack] = self._ring[self._head]

    def _fill_stack(self) -> None:
        self._push(self._pooled_frame())
        self._ring[:] = self._ring[self._head]

    def _observation(self) -> np.ndarray:
        return self._ring[self._head + 1 : self._head + 1 + self.stack]
