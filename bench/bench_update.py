"""PPO updates on CPU (or `--device cuda`), side by side in alternating rounds, medians and ratios printed.

Default: the trainer's whole update (`Trainer.learn()` on one collected rollout: every
epoch's minibatches, loss, backward, clipping, fused Adam) with the loss eager against
compiled (`--compile false` / `true`), or with `--compare precision` in float32 against
bf16 autocast (`--train.precision`), or with `--compare backward` autograd against the
hand-derived gradients of the default MLP policy (`--train.backward`; CartPole and
Snake: the presets it covers), for the presets whose updates bound training:

- cartpole: the CartPole preset (32-wide tanh MLPs, minibatches of 2048).
- snake: the Snake preset (128-wide MLPs on 121 uint8 cells, minibatches of 8192).
- mujoco: the MuJoCo preset (64 x 64 tanh actor and critic, minibatches of 64) on a
  stand-in env with HalfCheetah's spaces (17 floats, 6 Box actions).
- atari: the Atari preset (the Nature CNN on uint8 [4, 84, 84] frames, minibatches of
  256) on a stand-in env with Atari's spaces.

An update's cost does not depend on what the env computes, so the stand-ins change
nothing but the time to collect. The compiled side compiles before timing (its compile
time is printed; Inductor caches it for the next run).

`--optimizer`: the step after the gradients (each parameter group clipped, then Adam),
`FlatAdam.clipped_step` (one native call on the CPU) against the torch ops it replaced.

`--cleanrl`: one minibatch step (forward, a stand-in loss, backward, optimizer), puffercore's
way against CleanRL's, for the Nature CNN (puffercore keeps filters and inputs
channels-last; CleanRL's ppo_atari runs PyTorch's default layout) and the MuJoCo MLP;
puffercore steps fused Adam (`ppo.make_optimizer`), CleanRL torch's default Adam, which
on CPU updates the parameters tensor by tensor. Both sides start from the same weights.

    python bench/bench_update.py                                   # 4 presets, 3 rounds of ~3 s a side
    python bench/bench_update.py --presets mujoco atari --rounds 5
    python bench/bench_update.py --compare precision               # float32 vs bf16 autocast (train.precision)
    python bench/bench_update.py --compare backward --presets cartpole snake   # autograd vs by hand (train.backward)
    python bench/bench_update.py --device cuda --compare precision # on a GPU
    python bench/bench_update.py --cleanrl                         # atari and mujoco, 3 rounds of 5 s
    python bench/bench_update.py --optimizer                       # FlatAdam.clipped_step vs torch's ops
    python bench/bench_update.py --cleanrl --policies atari --batch 1024 --threads 1

Trainer updates run on the torch threads the trainer picks (`torch_threads` 0: the
cores its env workers leave); `--threads` sets them (and CleanRL rows' threads, default
torch's default, every core).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import statistics
import tempfile
import time

import gymnasium
import numpy as np
import torch

from puffercore.ppo.default_policy import DefaultPolicy
from puffercore.ppo import PPOConfig, Trainer, make_optimizer
from puffercore.ppo.config import ATARI_PRESET, MUJOCO_PRESET
from puffercore.ppo.flat_adam import clip_grad_norm
from puffercore.results import add_record_flag, record

LEARNING_RATE = 2.5e-4


class StandInEnv(gymnasium.Env):
    """Random observations of the given spaces; 1000-step episodes."""

    def __init__(self, observation_space, action_space):
        self.observation_space, self.action_space = observation_space, action_space
        self.steps = 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.steps += 1
        return self.observation_space.sample(), 1.0, False, self.steps >= 1000, {}


def mujoco_env():
    return StandInEnv(gymnasium.spaces.Box(-np.inf, np.inf, (17,), np.float32),
                      gymnasium.spaces.Box(-1, 1, (6,), np.float32))


def atari_env():
    return StandInEnv(gymnasium.spaces.Box(0, 255, (4, 84, 84), np.uint8), gymnasium.spaces.Discrete(4))


# name: (env, config); Atari's stand-in steps in this process (serial backend).
PRESETS = {
    "cartpole": ("cartpole", PPOConfig.for_env("cartpole")),
    "snake": ("snake", PPOConfig.for_env("snake")),
    "mujoco": (mujoco_env, PPOConfig(**MUJOCO_PRESET)),
    "atari": (atari_env, PPOConfig(**{**ATARI_PRESET, "backend": "serial"})),
}


def preset_trainer(name: str, compile_setting: str, threads: int = 0, precision: str = "float32",
                   backward: str = "autograd", device: str = "cpu") -> Trainer:
    """A trainer of preset `name` holding one collected rollout, compiled (when asked)
    and warmed up by one update."""
    env, config = PRESETS[name]
    config = dataclasses.replace(config, compile=compile_setting, precision=precision, backward=backward,
                                 torch_threads=threads, device=device, quiet=True, tensorboard=False,
                                 run_dir=tempfile.mkdtemp(prefix="bench-update-"))
    trainer = Trainer(env, config)
    trainer.reset_envs()
    trainer.collect()
    trainer.learn()
    return trainer


def timed_learn(trainer: Trainer, seconds: float) -> tuple[float, float]:
    """Milliseconds per update, wall-clock and CPU time of this process: `learn()` again
    on the same rollout until `seconds` pass. On a machine shared with other jobs the CPU
    time is the steadier measure of the work (with one torch thread: wall time minus
    the time the process waited for a core)."""
    synchronize = torch.cuda.synchronize if trainer.device.type == "cuda" else lambda: None
    synchronize()
    count, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while count == 0 or time.perf_counter() - start < seconds:
        trainer.learn()
        count += 1
    synchronize()
    return (time.perf_counter() - start) / count * 1e3, (time.process_time() - cpu_start) / count * 1e3


# --compare: the two sides, (label, compile setting, precision, backward) each.
COMPARISONS = {"compile": (("eager", "false", "float32", "autograd"), ("compiled", "true", "float32", "autograd")),
               "precision": (("float32", "false", "float32", "autograd"), ("bfloat16", "false", "bfloat16", "autograd")),
               "backward": (("autograd", "false", "float32", "autograd"), ("by hand", "false", "float32", "auto"))}
PRESET_NAMES = {"cartpole": "CartPole", "snake": "Snake", "mujoco": "MuJoCo", "atari": "Atari"}
# --compare -> the measure its records name, after the preset
MEASURES = {"compile": "ppo_update_compiled", "precision": "ppo_update_bf16", "backward": "ppo_update"}


def compare_updates(names: list[str], comparison: str, rounds: int, seconds: float, threads: int,
                    device: str, record_path: str | None = None) -> None:
    for name in names:
        trainers = {label: preset_trainer(name, compile_setting, threads, precision, backward, device)
                    for label, compile_setting, precision, backward in COMPARISONS[comparison]}
        try:
            results = {label: [] for label in trainers}
            for _ in range(rounds):
                for label, trainer in trainers.items():
                    results[label].append(timed_learn(trainer, seconds))
            (first, first_cpu), (second, second_cpu) = (
                [statistics.median(times) for times in zip(*results[label])] for label in trainers)
            (first_label, first_trainer), (second_label, second_trainer) = trainers.items()
            minibatches = first_trainer.losses["loss/minibatches"]
            print(f"{name}: one update ({minibatches:g} minibatches of {first_trainer.config.minibatch_size}), "
                  f"{torch.get_num_threads()} torch threads, {device}, median of {rounds} rounds; load average "
                  f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
            compiled = second_trainer.update_step.compile_seconds
            print(f"  {first_label:10s} {first:9.2f} ms, {first_cpu:9.2f} ms CPU ({first_cpu / minibatches:.3f} per "
                  f"minibatch)")
            print(f"  {second_label:10s} {second:9.2f} ms, {second_cpu:9.2f} ms CPU ({second_cpu / minibatches:.3f} per "
                  f"minibatch{f'; compiled in {compiled:.1f} s' if compiled else ''})")
            print(f"  {first_label} / {second_label}: {first / second:.2f}x wall, {first_cpu / second_cpu:.2f}x CPU",
                  flush=True)
            record(record_path, measure=f"{MEASURES[comparison]}_{name}",
                   title=f"PPO update, {PRESET_NAMES[name]} preset ({minibatches:g} minibatches of "
                         f"{first_trainer.config.minibatch_size}), {second_label}, {torch.get_num_threads()} torch "
                         f"threads, {device}",
                   value=round(second, 2), unit="ms", peer=first_label, peer_value=round(first, 2),
                   ratio=first / second)
        finally:
            for trainer in trainers.values():
                trainer.close()


def timed_updates(model: torch.nn.Module, optimizer: torch.optim.Optimizer, observations: torch.Tensor,
                  seconds: float) -> float:
    """Milliseconds per update of `model` (observations -> action params and value)."""

    def update():
        out = model(observations)
        loss = out.params.square().mean() + out.value.square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    update()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        update()
        count += 1
    return (time.perf_counter() - start) / count * 1e3


def atari_pair(batch: int):
    """(puffercore's policy, CleanRL's layout of the same weights, a minibatch of frames)."""
    observation_space = gymnasium.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    ours = DefaultPolicy(observation_space, gymnasium.spaces.Discrete(4), shared_trunk=True)
    theirs = DefaultPolicy(observation_space, gymnasium.spaces.Discrete(4), shared_trunk=True)
    theirs.load_state_dict(ours.state_dict())
    theirs.encoder.to(memory_format=torch.contiguous_format)
    # Frames as stored, NCHW, as CleanRL's `x / 255.0`.
    theirs.features = lambda observations: observations.reshape(-1, 4, 84, 84).float().div_(255.0)
    return ours, theirs, torch.randint(0, 256, (batch, 4 * 84 * 84), dtype=torch.uint8)


def mujoco_pair(batch: int):
    """(puffercore's policy, the same weights for CleanRL's side, a minibatch of observations)."""
    observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (17,), np.float32)
    action_space = gymnasium.spaces.Box(-1, 1, (6,), np.float32)
    ours = DefaultPolicy(observation_space, action_space)
    theirs = DefaultPolicy(observation_space, action_space)
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs, torch.randn(batch, 17)


POLICIES = {"atari": (atari_pair, 256), "mujoco": (mujoco_pair, 64)}


def compare_cleanrl(names: list[str], batch: int, rounds: int, seconds: float, record_path: str | None = None) -> None:
    for name in names:
        make_pair, preset_batch = POLICIES[name]
        torch.manual_seed(0)
        ours, theirs, observations = make_pair(batch or preset_batch)
        optimizers = (make_optimizer(ours, LEARNING_RATE, torch.device("cpu")),
                      torch.optim.Adam(theirs.parameters(), lr=LEARNING_RATE, eps=1e-5))
        results = {"puffercore": [], "CleanRL's way": []}
        for _ in range(rounds):
            for side, model, optimizer in zip(results, (ours, theirs), optimizers):
                results[side].append(timed_updates(model, optimizer, observations, seconds))
        median = {side: statistics.median(values) for side, values in results.items()}
        print(f"{name}: one update, minibatch {len(observations)}, {torch.get_num_threads()} torch threads, "
              f"median of {rounds} rounds")
        for side, value in median.items():
            print(f"  {side:14s} {value:8.2f} ms")
        ours_ms, theirs_ms = median.values()
        print(f"  CleanRL's way / puffercore: {theirs_ms / ours_ms:.2f}x")
        record(record_path, measure=f"cleanrl_update_{name}",
               title=f"one {PRESET_NAMES[name]} minibatch step ({len(observations)} rows), "
                     f"{torch.get_num_threads()} torch threads",
               value=round(ours_ms, 2), unit="ms", peer="CleanRL's way (default layout, torch's Adam)",
               peer_value=round(theirs_ms, 2), ratio=theirs_ms / ours_ms)


def timed_steps(step, seconds: float) -> float:
    """Microseconds per call of `step` until `seconds` pass."""
    count, start = 0, time.perf_counter()
    while count == 0 or time.perf_counter() - start < seconds:
        step()
        count += 1
    return (time.perf_counter() - start) / count * 1e6


def compare_optimizer(names: list[str], rounds: int, seconds: float, record_path: str | None = None) -> None:
    """FlatAdam.clipped_step (on the CPU one native call: puffercore._adam) against the
    torch ops the update ran before (flat_adam.clip_grad_norm per parameter group, then
    the fused Adam kernel), on copies of each preset's policy with the same gradients."""
    for name in names:
        trainer = preset_trainer(name, "false")
        optimizers = [make_optimizer(copy.deepcopy(trainer.policy), LEARNING_RATE, torch.device("cpu"))
                      for _ in range(2)]
        trainer.close()
        gradients = torch.randn(optimizers[0].flat.numel(), generator=torch.Generator().manual_seed(0))
        for optimizer in optimizers:
            optimizer.flat.grad.copy_(gradients)

        def native(optimizer=optimizers[0]):
            optimizer.clipped_step(0.5)

        def torch_ops(optimizer=optimizers[1]):
            for group in optimizer.gradients.values():
                clip_grad_norm(group, 0.5)
            optimizer.fused_step()

        results = {"clipped_step": [], "torch ops": []}
        for _ in range(rounds):
            for side, step in zip(results, (native, torch_ops)):
                results[side].append(timed_steps(step, seconds))
        median = {side: statistics.median(values) for side, values in results.items()}
        print(f"{name}: clip each group and step Adam, {optimizers[0].flat.numel()} parameters in "
              f"{len(optimizers[0].gradients)} groups, median of {rounds} rounds")
        for side, value in median.items():
            print(f"  {side:14s} {value:8.1f} us")
        print(f"  torch ops / clipped_step: {median['torch ops'] / median['clipped_step']:.2f}x")
        record(record_path, measure=f"clipped_step_{name}",
               title=f"clip and Adam step (`FlatAdam.clipped_step`), {PRESET_NAMES[name]} preset",
               value=round(median["clipped_step"], 1), unit="us", peer="torch's clip and fused Adam",
               peer_value=round(median["torch ops"], 1), ratio=median["torch ops"] / median["clipped_step"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", choices=sorted(PRESETS), default=list(PRESETS))
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="compile",
                        help="the two sides of a preset's update: eager vs compiled loss, float32 vs bfloat16 "
                             "autocast, or autograd vs the hand-derived gradients (train.backward)")
    parser.add_argument("--cleanrl", action="store_true", help="puffercore's minibatch step against CleanRL's")
    parser.add_argument("--optimizer", action="store_true",
                        help="FlatAdam.clipped_step against the torch clip and fused Adam, per preset")
    parser.add_argument("--policies", nargs="+", choices=sorted(POLICIES), default=list(POLICIES),
                        help="with --cleanrl")
    parser.add_argument("--batch", type=int, default=0, help="with --cleanrl: minibatch size (default: the preset's)")
    parser.add_argument("--seconds", type=float, default=0.0, help="per side and round (default 3, --cleanrl 5)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: see above)")
    parser.add_argument("--device", default="cpu", help="the trainers' device (cuda: the policy and rollout there)")
    add_record_flag(parser)
    args = parser.parse_args()
    if args.batch < 0 or args.seconds < 0 or args.rounds < 1 or args.threads < 0:
        parser.error("--batch must be >= 0, --seconds >= 0, --rounds >= 1, --threads >= 0")
    if args.optimizer:
        compare_optimizer(args.presets, args.rounds, args.seconds or 1.0, args.record)
    elif args.cleanrl:
        if args.threads:
            torch.set_num_threads(args.threads)
        compare_cleanrl(args.policies, args.batch, args.rounds, args.seconds or 5.0, args.record)
    else:
        compare_updates(args.presets, args.compare, args.rounds, args.seconds or 3.0, args.threads, args.device,
                        args.record)


if __name__ == "__main__":
    main()
