"""Playing a policy for evaluation: the episode loop that `ppo.evaluate` (a checkpoint)
and evaluation during training share, and the evaluation during training itself.

    vec = eval_vector(source, config, seed)               # one env, frozen observation statistics
    episodes = play(policy, vec, 10, act, seed, max_steps=10_000)   # returns and lengths

    evaluator = Evaluator(trainer, act, resumed=False)    # config.eval_interval > 0
    result = evaluator(trainer)                           # every eval_interval updates (ppo.train)

Evaluation during training (`PPOConfig.eval_interval`, `eval_episodes`, `capture_video`)
plays `eval_episodes` episodes with deterministic actions on its own env, one env made
apart from the training envs and seeded apart from them: the vector is made with the
run's named seed "eval" (`SEED_NAMES`) and reset, at the evaluation after update U, with
`derive_seed(eval seed, U)` -- reproducible, independent of resumes, and never a seed of
the training envs (those derive from the named seed "envs"). Observations are normalized
with the training statistics at that moment, frozen (copied in; the training
`Normalize` is only read); rewards stay raw, so returns are the env's. The training run
is untouched: its envs, its random streams and its policy's parameters are the same with
evaluation on or off (tested bit for bit on CPU). Only rank 0 of a torchrun job
evaluates. The best evaluation (by mean return) is kept as `best.pt` beside
checkpoint.pt, a whole checkpoint (`puffercore eval --checkpoint RUN/best.pt` plays it)
with an `evaluation` record (mean return, update, step); a resumed run reads the score
to beat from it. With `capture_video`, the first episode of each evaluation is recorded
to `videos/update-NNNNNN.mp4` (one life of an Atari game, which ends the learner's
episode) and logged to TensorBoard and W&B; a video that can't be written (a full disk)
is said in one line and recording stops, while training goes on.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from typing import Any, Callable

import numpy as np
import torch

from puffercore import checkpoint
from puffercore.ppo.parts import make_vector, transformed
from puffercore.ppo.policy import restart_ended
from puffercore.seeding import derive_seed
from puffercore.transforms import Normalize
from puffercore.video import VideoError, VideoRecorder, rendering_env, require_encoder, rgb_frame

BEST_NAME = "best.pt"
VIDEO_FOLDER = "videos"
# Env steps an evaluation may take per episode it asks for; episodes still running then
# count as ended there. Longer than any common time limit (Atari's 27,000 agent steps),
# short enough to end an evaluation of a policy that never ends an episode.
STEPS_PER_EPISODE = 30_000


@dataclasses.dataclass
class Episodes:
    """What `play` saw: each episode's return and length, in the order they ended."""
    returns: list[float]
    lengths: list[float]


@dataclasses.dataclass
class EvalResult:
    """One evaluation during training; `metrics` are the eval/* scalars it logs."""
    update: int
    global_step: int
    episodes: Episodes
    metrics: dict[str, float]
    best: bool  # the best mean return so far: written to best.pt
    video: str | None  # the MP4 of its first episode (capture_video)


def eval_vector(source, config, seed: int):
    """A vector of one env of `source` (an `env_sources.EnvSource`) for evaluation:
    the serial backend (threads for a run on threads), `config`'s frame stack, and
    observation normalization, frozen, when the run normalizes them (give it the
    statistics: `set_observation_statistics`); rewards raw."""
    one_env = dataclasses.replace(config, num_envs=1, batch_size=0, num_workers=0,
                                  backend="serial" if config.backend != "threads" else "threads")
    vec = make_vector(source, one_env, seed=seed)
    try:
        vec = transformed(vec, dataclasses.replace(config, norm_reward=False))
    except BaseException:
        vec.close()
        raise
    if isinstance(vec, Normalize):
        vec.freeze()
    return vec


def set_observation_statistics(vec, statistics: dict[str, Any] | None) -> None:
    """Give an `eval_vector` the observation statistics of a run's Normalize state (its
    `state_dict()["observations"]`); nothing to do for a run that does not normalize them."""
    if isinstance(vec, Normalize):
        vec.load_state_dict({"observations": statistics})


@torch.no_grad()
def play(policy, vec, episodes: int, act: Callable, seed: int, max_steps: int,
         before_step: Callable[[Any, int], None] | None = None,
         on_step: Callable[[np.ndarray, float], None] | None = None) -> Episodes:
    """The first `episodes` episodes that end while `policy` plays `vec` (reset with
    `seed`), taking `act(policy output)`'s actions. Returns are the episodes the env's
    info reports (its `episode_return`, as training logs them: an Atari game over all
    its lives, in raw score), or the per-row reward sums for an env that reports none,
    each row that ends counting as an episode. After `max_steps` steps the rows still
    running count as episodes ended there. `before_step(vec, ended)` runs before each
    step (`ended`: episodes ended so far); `on_step(observation, reward)` after it, with
    row 0's."""
    device = next(policy.parameters()).device
    reported: list[float] = []  # the episodes of the env's info (a mean repeated for each episode of a step)
    reported_lengths: list[float] = []
    summed: list[float] = []  # reward sums of the rows that ended, for an env that reports none
    counted_lengths: list[float] = []
    obs, _ = vec.reset(seed=seed)
    episode_returns = np.zeros(vec.num_agents)
    episode_lengths = np.zeros(vec.num_agents)
    recurrent = policy.initial_state(vec.num_agents, device)
    for _ in range(max_steps):
        if len(reported) >= episodes:
            break
        if before_step is not None:
            before_step(vec, len(reported) if reported else len(summed))
        live = vec.masks.copy()
        out = policy.output(torch.as_tensor(obs, device=device), recurrent)
        obs, rewards, terminals, truncations, info = vec.step(policy.head.to_env(act(out)))
        done = (terminals | truncations) & live
        episode_returns += rewards * live
        episode_lengths += live
        if on_step is not None:
            on_step(vec.final_observations[0] if done[0] else obs[0], float(rewards[0]))
        if "episode_return" in info:
            ended = round(info["episodes"])
            reported += [float(info["episode_return"])] * ended
            if "episode_length" in info:
                reported_lengths += [float(info["episode_length"])] * ended
        summed += episode_returns[done].tolist()
        counted_lengths += episode_lengths[done].tolist()
        episode_returns[done] = episode_lengths[done] = 0.0
        recurrent = restart_ended(out.state, torch.as_tensor(done, device=device))
    else:
        (reported if reported else summed).extend(episode_returns[vec.masks].tolist())
        (reported_lengths if reported else counted_lengths).extend(episode_lengths[vec.masks].tolist())
    returns = reported if reported else summed
    # Lengths as the info reports them when it reports one per episode (an Atari game's), else counted.
    lengths = reported_lengths if reported and len(reported_lengths) == len(reported) else counted_lengths
    return Episodes(returns[:episodes], lengths[:episodes])


class Evaluator:
    """Evaluation during training (the module docstring): made on rank 0 when training
    starts, where everything that could fail later fails at once (an env it can't make
    again, no rgb_array render or no video encoder with capture_video); called after
    each update that is due (`due`). `act(policy output)`: deterministic actions."""

    def __init__(self, trainer, act: Callable, resumed: bool):
        config = self.config = trainer.config
        self.act = act
        source = trainer.source
        if source.vector is not None:
            raise ValueError(f"eval_interval needs an env it can make apart from the training envs: pass the env "
                             f"({source.name}) as a name, class or creator, not a vector env made by the caller")
        self.run_dir = trainer.run_dir
        self.best_path = os.path.join(self.run_dir, BEST_NAME)
        self.video_folder = os.path.join(self.run_dir, VIDEO_FOLDER) if config.capture_video else None
        if self.video_folder is not None:
            require_encoder()
            try:
                source = rendering_env(source, "rgb_array")
            except ValueError as error:
                raise ValueError(f"capture_video: {error}") from None
        self.seed = trainer.seeds["eval"]
        self.vec = eval_vector(source, config, seed=self.seed)
        try:
            if self.video_folder is not None:
                self.vec.reset(seed=self.seed)
                try:  # an env whose render gives no picture fails now, not at the first video
                    rgb_frame(self.vec)
                except ValueError as error:
                    raise ValueError(f"capture_video: {error}") from None
                os.makedirs(self.video_folder, exist_ok=True)
            self.best_return = self._saved_best() if resumed else None
        except BaseException:
            self.vec.close()
            raise
        if not resumed and os.path.exists(self.best_path):
            os.remove(self.best_path)  # an earlier run's, in a directory this run starts over in

    def _saved_best(self) -> float | None:
        """The mean return in best.pt, the score a resumed run has to beat."""
        if not os.path.exists(self.best_path):
            return None
        return float(checkpoint.load(self.best_path, required=("evaluation",))["evaluation"]["mean_return"])

    def due(self, update: int, finished: bool) -> bool:
        """Every eval_interval updates, and after the last one."""
        return update % self.config.eval_interval == 0 or finished

    def __call__(self, trainer) -> EvalResult:
        started = time.perf_counter()
        if isinstance(trainer.vec, Normalize) and trainer.vec.observation_stats is not None:
            set_observation_statistics(self.vec, trainer.vec.state_dict()["observations"])
        video, before_step = None, None
        if self.video_folder is not None:
            video = os.path.join(self.video_folder, f"update-{trainer.update:06d}.mp4")
            recorder = VideoRecorder(video)

            def before_step(vec, ended: int) -> None:
                nonlocal video
                if ended == 0 and video is not None and not self._recorded(lambda: recorder.capture(vec)):
                    video = None
        episodes = self.config.eval_episodes
        try:
            played = play(trainer.policy, self.vec, episodes, self.act, seed=derive_seed(self.seed, trainer.update),
                          max_steps=episodes * STEPS_PER_EPISODE, before_step=before_step)
        finally:
            if video is not None and not self._recorded(recorder.close):
                video = None
        returns = np.asarray(played.returns, np.float64)
        metrics = {"eval/mean_return": float(returns.mean()), "eval/std_return": float(returns.std()),
                   "eval/mean_length": float(np.mean(played.lengths)),
                   "eval/seconds": time.perf_counter() - started}
        mean = metrics["eval/mean_return"]
        best = math.isfinite(mean) and (self.best_return is None or mean > self.best_return)
        if best:
            state = trainer.state_dict()
            state["evaluation"] = {"mean_return": mean, "std_return": metrics["eval/std_return"],
                                   "episodes": episodes, "update": trainer.update, "global_step": trainer.global_step}
            checkpoint.save(self.best_path, state)
            self.best_return = mean
        return EvalResult(trainer.update, trainer.global_step, played, metrics, best, video)

    def _recorded(self, write: Callable[[], None]) -> bool:
        """`write()` of a VideoRecorder; False for a video that could not be written (a
        full disk): said in one line, and no later evaluation records; training goes on."""
        try:
            write()
        except VideoError as error:
            print(f"capture_video: {error}; recording stops, training goes on", file=sys.stderr, flush=True)
            self.video_folder = None
            return False
        return True

    def close(self) -> None:
        self.vec.close()
