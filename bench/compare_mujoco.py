"""PPO on MuJoCo: puffercore's MuJoCo preset, puffercore with rl-zoo's tuned
hyperparameters and stable-baselines3 with the same, on HalfCheetah-v5 and Hopper-v5,
1M env steps, 2 seeds, next to the PPO paper's results at 1M steps.

    python bench/compare_mujoco.py                             # both tasks, 2 seeds, 3 sides: hours
    python bench/compare_mujoco.py --tasks Hopper-v5 --seeds 1 --sides puffercore
    python bench/compare_mujoco.py --sides puffercore-rl-zoo sb3 --jobs 2   # runs in pairs, one core each
    python bench/compare_mujoco.py --steps 5000                # a quick check that everything runs

Needs `pip install "puffercore[mujoco,bench]"`. puffercore runs `puffercore train
Hopper-v5` as a user would: the MuJoCo preset (CleanRL's ppo_continuous_action
settings: 1 env x 2048 steps, 10 epochs of 64-sample minibatches, lr 3e-4 annealed,
observation and reward normalization); HalfCheetah's preset is rl-zoo's settings, so
there its two puffercore sides are the same run. stable-baselines3 runs rl-zoo's hyperparameters
for HalfCheetah-v4 and Hopper-v4 (the v5 tasks have the same dynamics and rewards), and
so does the side "puffercore-rl-zoo" (compare_learning.rl_zoo_overrides: the same
settings as PPOConfig flags), which compares the two implementations on equal terms.
Each run is its own subprocess; reported per run and per task: the final return (mean of
the last 20 episodes at the end of the budget) and the wall time, as in
compare_learning.py, whose runners and report this script shares. The reference is the
PPO paper's clipped objective at 1M steps (Schulman et al. 2017, figure 3, read off the
curves; MuJoCo 1.x "-v1" tasks, so a rough bar, not a like-for-like number).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_learning import Task, compare  # noqa: E402

# rl-zoo's MuJoCo policy: separate 256 x 256 ReLU actor and critic, log std starting at -2.
RL_ZOO_POLICY = dict(log_std_init=-2, ortho_init=False, activation_fn="ReLU", net_arch=dict(pi=[256, 256], vf=[256, 256]))
TASKS = {
    "HalfCheetah-v5": Task(1_000_000, {}, dict(
        n_envs=1, normalize=True, batch_size=64, n_steps=512, gamma=0.98, learning_rate=2.0633e-05,
        ent_coef=0.000401762, clip_range=0.1, n_epochs=20, gae_lambda=0.92, max_grad_norm=0.8, vf_coef=0.58096,
        policy_kwargs=RL_ZOO_POLICY)),
    "Hopper-v5": Task(1_000_000, {}, dict(
        n_envs=1, normalize=True, batch_size=32, n_steps=512, gamma=0.999, learning_rate=9.80828e-05,
        ent_coef=0.00229519, clip_range=0.2, n_epochs=5, gae_lambda=0.99, max_grad_norm=0.7, vf_coef=0.835671,
        policy_kwargs=RL_ZOO_POLICY)),
}
PPO_PAPER = ("PPO paper at 1M steps (Schulman et al. 2017, fig. 3)", {"HalfCheetah-v5": "about 1800",
                                                                       "Hopper-v5": "about 2200"})

if __name__ == "__main__":
    compare(os.path.abspath(__file__), TASKS, PPO_PAPER, seeds=2, png="compare_mujoco.png",
            description=__doc__.split("\n\n")[0], sides=("puffercore", "puffercore-rl-zoo", "sb3"))
