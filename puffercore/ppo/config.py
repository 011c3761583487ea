"""PPO's hyperparameters in one dataclass, and presets for the ocean envs.

    config = PPOConfig.for_env("cartpole", total_timesteps=200_000)   # preset + overrides
    config = PPOConfig(learning_rate=1e-3)                            # defaults: gymnasium tasks
    config.validate()                                                 # ValueError naming the field

Every field is a command-line flag (--GROUP.NAME; the run group's have no prefix).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from puffercore.flags import check_fields, field_docs, option, suggestion


@dataclasses.dataclass
class PPOConfig:
    """PPO's settings: CleanRL's ppo.py defaults; `PPOConfig.for_env(env)` applies an env's
    preset. Each field is the flag --GROUP.NAME of `puffercore train` (the run group's have
    no prefix); `validate()` raises ValueError naming a bad field."""

    # run
    seed: int = option(1, "run", "run seed; spawns the named seeds for envs, torch and sampling")
    total_timesteps: int = option(500_000, "run", "env transitions to train on")
    device: str = option("cpu", "run", "torch device of the policy and the rollout storage (cpu, cuda, cuda:1)")
    torch_threads: int = option(0, "run", "torch CPU threads; 0: the cores the env workers leave free")
    run_dir: str = option("", "run", "where metrics and checkpoints go; default runs/<env>-<seed>-<time>")
    checkpoint_interval: int = option(100, "run", "updates between checkpoints; 0: only at the end")
    log_interval: float = option(0.5, "run", "seconds between metric rows and console refreshes")
    log_steps: int = option(0, "run", "a metric row at every multiple of this many env steps too (0: by time "
                            "alone); the seeds of a config then log at the same steps")
    tensorboard: bool = option(True, "run", "write TensorBoard event files (needs tensorboard)")
    wandb_project: str = option("", "run", "log to this Weights & Biases project (needs wandb)")
    quiet: bool = option(False, "run", "no console view")
    eval_interval: int = option(0, "run", "updates between evaluations (deterministic actions on a separate env, "
                                 "frozen normalization; eval/* metrics, the best policy in best.pt); 0: none")
    eval_episodes: int = option(10, "run", "episodes per evaluation")
    capture_video: bool = option(False, "run", "record the first episode of each evaluation to videos/ in the run "
                                  "directory (MP4; TensorBoard, W&B); needs eval_interval and an rgb_array render")
    # vec
    backend: str = option("auto", "vec", "vector backend; auto: threads for native envs, processes for Python envs; "
                          "ale: Atari games on ale-py's C++ vector env", ("auto", "serial", "threads", "processes", "ale"))
    num_envs: int = option(8, "vec", "envs stepped in parallel")
    num_workers: int = option(0, "vec", "env worker threads/processes; 0: the backend's default")
    batch_size: int = option(0, "vec", "envs per staggered batch (divides num_envs); 0: all envs at once")
    # train
    horizon: int = option(128, "train", "steps per env per rollout (T)")
    learning_rate: float = option(2.5e-4, "train", "Adam learning rate")
    anneal_lr: bool = option(True, "train", "decay the learning rate linearly to 0")
    gamma: float = option(0.99, "train", "discount")
    gae_lambda: float = option(0.95, "train", "GAE lambda")
    minibatch_size: int = option(256, "train", "transitions per minibatch (whole rows for LSTM/prioritized)")
    update_epochs: int = option(4, "train", "passes over each rollout")
    norm_adv: bool = option(True, "train", "normalise advantages per minibatch")
    clip_coef: float = option(0.2, "train", "policy ratio clip")
    clip_vloss: bool = option(True, "train", "clip the value loss around the old values")
    ent_coef: float = option(0.01, "train", "entropy bonus")
    vf_coef: float = option(0.5, "train", "value loss weight")
    max_grad_norm: float = option(0.5, "train", "gradient norm clip, of actor and critic apart (of all with a shared trunk)")
    target_kl: float = option(0.0, "train", "stop the update when approx KL exceeds it; 0: never")
    norm_obs: bool = option(False, "train", "normalize observations by their running mean and std (float32 rows)")
    norm_reward: bool = option(False, "train", "divide rewards by the running std of the discounted return")
    clip_obs: float = option(10.0, "train", "clip normalized observations to [-clip_obs, clip_obs]")
    clip_reward: float = option(10.0, "train", "clip normalized rewards to [-clip_reward, clip_reward]")
    frame_stack: int = option(1, "train", "observations of the last N steps as one row (1: off)")
    value_norm: bool = option(False, "train", "PopArt: the critic learns returns normalized by running statistics")
    prio_alpha: float = option(0.0, "train", "prioritized rows: p ~ (sum |A|)^alpha; 0: uniform (off)")
    prio_beta0: float = option(0.4, "train", "initial importance-weight exponent, annealed to 1")
    compile: str = option("auto", "train", "torch.compile the update's loss; auto: on cuda the minibatch step as "
                           "one CUDA graph (puffercore.ppo.graphed), on the CPU compiled when the eager update, "
                           "projected over the run, takes 2 minutes or more, kept if faster (puffercore.ppo.update); "
                           "false: eager",
                           ("auto", "true", "false"))
    backward: str = option("auto", "train", "the update's gradients: auto (written out by hand, in C, for the default "
                            "MLP policy with separate actor and critic and one Discrete or Box action, in float32 "
                            "without --train.compile true: puffercore.ppo.mlp_gradients) or "
                            "autograd (always torch autograd)", ("auto", "autograd"))
    inference: str = option("auto", "train", "collection's policy forward and action sampling: auto (in C for the "
                             "default MLP policy with separate actor and critic, one Discrete or Box action, float32 on "
                             "the CPU: puffercore.ppo.native_mlp; on CUDA the rollout on the device and the forward a CUDA "
                             "graph: puffercore.ppo.device_rollout) or torch (always the policy's torch forward, the "
                             "rollout written from the host)",
                             ("auto", "torch"))
    precision: str = option("float32", "train", "the update's forward and backward: float32, bfloat16 (autocast: "
                             "matmuls and convolutions in bf16, the loss and the weights in float32), or auto (bfloat16 "
                             "where the CPU computes it natively, else float32); collection stays float32",
                             ("float32", "bfloat16", "auto"))
    # policy
    hidden_size: int = option(64, "policy", "width of the MLP (and LSTM)")
    num_layers: int = option(2, "policy", "hidden layers of the MLP")
    activation: str = option("tanh", "policy", "hidden activation", ("tanh", "relu", "gelu"))
    shared_trunk: bool = option(False, "policy", "one MLP trunk for actor and critic instead of two (always with lstm)")
    lstm: bool = option(False, "policy", "recurrent policy: an LSTM cell after the MLP")
    forget_bias: float = option(1.0, "policy", "initial LSTM forget-gate bias")
    log_std_init: float = option(0.0, "policy", "initial log std of the Gaussian for Box actions (SB3's log_std_init)")
    ortho_init: bool = option(True, "policy", "orthogonal init (CleanRL); false: torch's default init (SB3's ortho_init)")

    @classmethod
    def for_env(cls, env: Any, **overrides) -> "PPOConfig":
        """The config for `env`: defaults, then the preset of an ocean env's name (or of
        gymnasium's MuJoCo tasks), then its GPU preset where `overrides` name a cuda
        device, then `overrides`."""
        preset = preset_for(env)
        values = {**preset, **gpu_preset_for(env, overrides.get("device", "cpu")), **overrides}
        fields = [field.name for field in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ValueError(f"unknown PPOConfig fields: {unknown}{suggestion(unknown[0], fields)}")
        return cls(**values)

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        def require(ok: bool, name: str, expected: str) -> None:
            if not ok:
                raise ValueError(f"{name} must be {expected}, got {getattr(self, name)!r}")

        check_fields(self)
        for name in ("total_timesteps", "num_envs", "horizon", "minibatch_size", "update_epochs", "hidden_size",
                     "num_layers", "frame_stack", "eval_episodes"):
            require(getattr(self, name) >= 1, name, "a positive int")
        for name in ("seed", "torch_threads", "checkpoint_interval", "num_workers", "batch_size", "eval_interval",
                     "log_steps"):
            require(getattr(self, name) >= 0, name, "a non-negative int")
        for name in ("gamma", "gae_lambda", "prio_beta0"):
            require(0.0 <= getattr(self, name) <= 1.0, name, "in [0, 1]")
        for name in ("learning_rate", "clip_coef", "max_grad_norm", "clip_obs", "clip_reward"):
            require(getattr(self, name) > 0, name, "a positive number")
        for name in ("ent_coef", "vf_coef", "target_kl", "prio_alpha", "log_interval"):
            require(getattr(self, name) >= 0, name, "a non-negative number")
        require(self.batch_size == 0 or self.num_envs % self.batch_size == 0, "batch_size",
                f"0 or a divisor of num_envs={self.num_envs}")
        require(not self.capture_video or self.eval_interval > 0, "capture_video",
                "False when eval_interval is 0 (the video is the first episode of each evaluation: give eval_interval "
                "too, e.g. --eval-interval 10)")
        check_device(self.device)


def check_device(name: str) -> None:
    """ValueError in one line unless `name` is a torch device this machine has (torch
    itself fails much later, with a long traceback, for CUDA on a machine without it)."""
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"device must be a torch device such as 'cpu' or 'cuda', got {name!r}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else \
                f"built for CUDA {torch.version.cuda}, which sees no GPU"
            raise ValueError(f"device={name!r}, but CUDA is not available here (torch {torch.__version__}, {build}); "
                             f"use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device={name!r}, but this machine has {torch.cuda.device_count()} CUDA device(s): "
                             f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device={name!r}, but MPS (Apple GPUs) is not available here; use --device cpu")


PPOConfig.__doc__ += field_docs(PPOConfig)

# Per-env overrides of the defaults, by the names of ocean envs (a preset, not a
# registry: any env can be trained, see puffercore.env_sources). CartPole is tuned for
# wall-clock time to solve on a small CPU (an Optuna search over seeds 1-5): short
# rollouts of many envs, several cheap updates of a small MLP per rollout, and it stays
# solved to the end (the runs that chose it: docs/experiments/2026-11-ppo-presets.md). Connect4 and Azul play
# their built-in opponents; the action mask in their observations is applied by the policy.
PRESETS: dict[str, dict[str, Any]] = {
    "cartpole": dict(
        total_timesteps=500_000, backend="serial", num_envs=128, horizon=8, minibatch_size=512, update_epochs=4,
        learning_rate=1.86e-2, clip_coef=0.3, hidden_size=32, ent_coef=0.0, gamma=0.99, gae_lambda=0.95,
    ),
    "memory": dict(
        total_timesteps=150_000, backend="serial", num_envs=64, horizon=20, minibatch_size=320, update_epochs=4,
        learning_rate=3e-3, hidden_size=32, ent_coef=0.01, gamma=0.9, lstm=True,
    ),
    "snake": dict(
        total_timesteps=5_000_000, num_envs=512, horizon=64, minibatch_size=8192,
        # Its big matmuls bound the update, which compiling does not speed up enough to repay
        # a cold compile in a default run's 38 updates (bench_update.py).
        learning_rate=3e-3, hidden_size=128, compile="false",
        # bf16 autocast where native: faster end to end and learns as well over 5M steps
        # (bench_update.py --compare precision; docs/experiments/2026-11-ppo-presets.md).
        precision="auto",
    ),
    "squared": dict(
        total_timesteps=1_000_000, num_envs=256, horizon=32, minibatch_size=4096,
        learning_rate=3e-3, hidden_size=64,
    ),
    "connect4": dict(
        total_timesteps=2_000_000, num_envs=256, horizon=32, minibatch_size=2048,
        learning_rate=1e-3, hidden_size=128, gamma=0.99,
    ),
    "azul": dict(
        total_timesteps=5_000_000, num_envs=256, horizon=64, minibatch_size=4096,
        learning_rate=1e-3, hidden_size=256, gamma=0.995,
    ),
}

# What `--device cuda` trains the ocean envs with, over their CPU preset: PufferLib's
# shape of a GPU run (thousands of native envs on the threads engine, every core; few,
# large minibatches), where the CPU presets' hundred-odd envs leave a GPU idle between
# kernel launches (cartpole's CPU preset on an H200: 14 k steps/s on cuda, 172 k on its
# CPU). Bigger rollouts take more steps to learn as much, hence the longer runs. Fields a
# user gives (flags, --config) win, as over any preset; `ppo.gpu_settings` prints the choice.
GPU_PRESETS: dict[str, dict[str, Any]] = {
    "cartpole": dict(total_timesteps=5_000_000, backend="threads", num_envs=4096, horizon=32, minibatch_size=32768),
    "squared": dict(total_timesteps=4_000_000, backend="threads", num_envs=4096, horizon=64, minibatch_size=65536),
    "snake": dict(total_timesteps=20_000_000, backend="threads", num_envs=4096, minibatch_size=32768,
                  compile="auto"),  # on cuda "auto" captures the update as a CUDA graph (ppo.plan)
}


def gpu_preset_for(env: Any, device: str) -> dict[str, Any]:
    """The GPU preset of `env` (an ocean env's name) when `device` is a cuda device; {}
    otherwise (a device name torch rejects is validate's to report)."""
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError):
        return {}
    return GPU_PRESETS.get(env, {}) if kind == "cuda" and isinstance(env, str) else {}


# gymnasium's MuJoCo tasks (HalfCheetah, Hopper, Walker2d, Ant, ...): CleanRL's
# ppo_continuous_action.py settings: one env, 2048-step rollouts, 10 epochs of
# 64-transition minibatches, no entropy bonus, observations and rewards normalized.
MUJOCO_PRESET: dict[str, Any] = dict(
    total_timesteps=1_000_000, backend="serial", num_envs=1, horizon=2048, minibatch_size=64, update_epochs=10,
    learning_rate=3e-4, ent_coef=0.0, norm_obs=True, norm_reward=True,
)

# MuJoCo tasks whose tuned settings beat that preset, by gymnasium env name, over it.
# HalfCheetah: rl-zoo's tuned PPO (512-step rollouts, 20 epochs, lr 2.06e-5 constant,
# 256 x 256 ReLU nets with torch's init and log std -2, no value clipping). Hopper keeps
# the preset: rl-zoo's settings stall there with the hopper standing still. The returns
# that decided both are the README's MuJoCo table (bench/compare_mujoco.py).
MUJOCO_TASK_PRESETS: dict[str, dict[str, Any]] = {
    "HalfCheetah": dict(
        horizon=512, minibatch_size=64, update_epochs=20, learning_rate=2.0633e-05, anneal_lr=False, gamma=0.98,
        gae_lambda=0.92, clip_coef=0.1, clip_vloss=False, ent_coef=0.000401762, vf_coef=0.58096, max_grad_norm=0.8,
        hidden_size=256, activation="relu", ortho_init=False, log_std_init=-2.0,
    ),
}


# Atari games (atari:Breakout, ALE/Breakout-v5; puffercore.atari): CleanRL's
# ppo_atari.py settings: 8 envs x 128 steps, 4 epochs of 4 minibatches (256), lr 2.5e-4
# annealed, clip 0.1, the Nature CNN shared by actor and critic (ppo.DefaultPolicy picks the
# CNN for the uint8 frame stack), 10M steps. The ale backend (ale-py's C++ vector env):
# it stepped Breakout faster than the processes backend (AtariEnv in worker processes)
# and learned it no worse (design.md, `ale`; docs/experiments/2026-11-gpu.md).
# precision "auto": bf16 autocast where the CPU computes it natively, which runs the
# convolutions' update faster and learned Breakout no worse than float32
# (bench_update.py --compare precision; docs/experiments/2026-11-ppo-presets.md).
ATARI_PRESET: dict[str, Any] = dict(
    total_timesteps=10_000_000, backend="ale", num_envs=8, horizon=128, minibatch_size=256, update_epochs=4,
    learning_rate=2.5e-4, anneal_lr=True, clip_coef=0.1, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5,
    gamma=0.99, gae_lambda=0.95, shared_trunk=True, precision="auto",
)


def preset_for(env: Any) -> dict[str, Any]:
    """The preset of `env`: by ocean env name, the Atari preset for atari:GAME and ALE
    ids, or the MuJoCo preset (with the task's own settings, if it has any) for a
    gymnasium id whose env lives in gymnasium.envs.mujoco; {} for anything else."""
    if not isinstance(env, str):
        return {}
    if env in PRESETS:
        return PRESETS[env]
    if env.startswith(("atari:", "ALE/")):
        return ATARI_PRESET
    import gymnasium

    spec = gymnasium.registry.get(env.removeprefix("gymnasium:"))
    entry_point = spec.entry_point if spec is not None and isinstance(spec.entry_point, str) else ""
    if not entry_point.startswith("gymnasium.envs.mujoco"):
        return {}
    return {**MUJOCO_PRESET, **MUJOCO_TASK_PRESETS.get(spec.name, {})}
