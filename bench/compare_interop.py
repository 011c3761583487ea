"""Users' own training code on puffercore vector envs: the same CleanRL-style PPO loop and
the same stable-baselines3 PPO, with only the env line changed, side by side.

    python bench/compare_interop.py                    # 100k steps each
    python bench/compare_interop.py --steps 50000 --envs 16

CleanRL-style loop (CleanRL ppo.py's algorithm written out here, 128 steps, 4 epochs,
4 minibatches, torch on one thread) on CartPole-v1 with:
  gymnasium SyncVectorEnv / AsyncVectorEnv   vs   puffercore processes (the Python env)
  and the native CartPole on puffercore threads (the env line a user swaps in).
stable-baselines3 PPO (default hyperparameters, n_steps 128) with DummyVecEnv vs
puffercore's SB3VecEnv over the same two puffercore vectors. Reported: env steps per
second of the whole run (policy and updates included) and the ratio to the framework's
own vector env.
"""

from __future__ import annotations

import argparse
import time

import gymnasium
import numpy as np
import torch
from torch import nn

import puffercore.vector
from puffercore.interop.gymnasium_vector import GymnasiumVectorEnv
from puffercore.ocean import CartPole


def make_envs(kind: str, num_envs: int):
    if kind == "gymnasium SyncVectorEnv":
        return gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * num_envs,
                                              autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)
    if kind == "gymnasium AsyncVectorEnv":
        return gymnasium.vector.AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * num_envs,
                                               autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)
    return GymnasiumVectorEnv(puffercore_vector(kind, num_envs))


def puffercore_vector(kind: str, num_envs: int):
    if kind == "puffercore processes (CartPole-v1)":
        return puffercore.vector.make(lambda: gymnasium.make("CartPole-v1"), num_envs, backend="processes", seed=0)
    return puffercore.vector.make(CartPole, num_envs, backend="threads", seed=0)


def cleanrl_style_ppo(envs, total_steps: int, num_steps: int = 128, epochs: int = 4, minibatches: int = 4) -> float:
    """CleanRL ppo.py's loop (separate actor and critic, GAE, clipped surrogate); returns
    seconds for `total_steps` env steps."""
    torch.manual_seed(0)
    n, obs_size = envs.num_envs, envs.single_observation_space.shape[0]
    actions_n = envs.single_action_space.n

    def mlp(out: int, gain: float) -> nn.Sequential:
        layers = [nn.Linear(obs_size, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, out)]
        for layer in layers[::2]:
            nn.init.orthogonal_(layer.weight, np.sqrt(2) if layer is not layers[-1] else gain)
            nn.init.zeros_(layer.bias)
        return nn.Sequential(*layers)

    actor, critic = mlp(actions_n, 0.01), mlp(1, 1.0)
    optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=2.5e-4, eps=1e-5)
    obs_buf, act_buf = torch.zeros(num_steps, n, obs_size), torch.zeros(num_steps, n, dtype=torch.long)
    logp_buf, rew_buf, done_buf, val_buf = (torch.zeros(num_steps, n) for _ in range(4))
    start = time.perf_counter()
    obs, _ = envs.reset(seed=0)
    obs, done = torch.as_tensor(obs, dtype=torch.float32), torch.zeros(n)
    for _ in range(max(1, total_steps // (n * num_steps))):
        for t in range(num_steps):
            obs_buf[t], done_buf[t] = obs, done
            with torch.no_grad():
                dist = torch.distributions.Categorical(logits=actor(obs))
                action = dist.sample()
                logp_buf[t], val_buf[t] = dist.log_prob(action), critic(obs).squeeze(-1)
            act_buf[t] = action
            next_obs, reward, terminated, truncated, _ = envs.step(action.numpy())
            rew_buf[t] = torch.as_tensor(reward, dtype=torch.float32)
            obs = torch.as_tensor(next_obs, dtype=torch.float32)
            done = torch.as_tensor(terminated | truncated, dtype=torch.float32)
        with torch.no_grad():
            next_value, advantages, last = critic(obs).squeeze(-1), torch.zeros(num_steps, n), 0.0
            for t in reversed(range(num_steps)):
                not_done = 1.0 - (done if t == num_steps - 1 else done_buf[t + 1])
                following = next_value if t == num_steps - 1 else val_buf[t + 1]
                delta = rew_buf[t] + 0.99 * following * not_done - val_buf[t]
                advantages[t] = last = delta + 0.99 * 0.95 * not_done * last
            returns = advantages + val_buf
        flat = [x.reshape(n * num_steps, *x.shape[2:]) for x in (obs_buf, act_buf, logp_buf, advantages, returns)]
        for _ in range(epochs):
            for index in torch.randperm(n * num_steps).chunk(minibatches):
                b_obs, b_act, b_logp, b_adv, b_ret = (x[index] for x in flat)
                dist = torch.distributions.Categorical(logits=actor(b_obs))
                ratio = (dist.log_prob(b_act) - b_logp).exp()
                b_adv = (b_adv - b_adv.mean()) / (b_adv.std() + 1e-8)
                policy_loss = torch.max(-b_adv * ratio, -b_adv * ratio.clamp(0.8, 1.2)).mean()
                value_loss = 0.5 * ((critic(b_obs).squeeze(-1) - b_ret) ** 2).mean()
                loss = policy_loss - 0.01 * dist.entropy().mean() + 0.5 * value_loss
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    return time.perf_counter() - start


def sb3_ppo(kind: str, num_envs: int, total_steps: int) -> float:
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from puffercore.interop.sb3 import SB3VecEnv

    venv = make_vec_env("CartPole-v1", n_envs=num_envs, seed=0) if kind == "SB3 DummyVecEnv" else \
        SB3VecEnv(puffercore_vector(kind, num_envs))
    start = time.perf_counter()
    PPO("MlpPolicy", venv, n_steps=128, seed=0, device="cpu").learn(total_timesteps=total_steps)
    seconds = time.perf_counter() - start
    venv.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100_000, help="env steps per run (default 100k)")
    parser.add_argument("--envs", type=int, default=8, help="envs per vector (default 8)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    puffercore_kinds = ["puffercore processes (CartPole-v1)", "puffercore threads (native CartPole)"]
    print(f"{args.steps:,} env steps, {args.envs} envs, CartPole")
    cleanrl: dict[str, float] = {}
    for kind in ["gymnasium SyncVectorEnv", "gymnasium AsyncVectorEnv", *puffercore_kinds]:
        envs = make_envs(kind, args.envs)
        cleanrl[kind] = cleanrl_style_ppo(envs, args.steps)
        envs.close()
        ratio = cleanrl["gymnasium SyncVectorEnv"] / cleanrl[kind]
        print(f"CleanRL-style PPO, {kind:<38} {args.steps / cleanrl[kind]:9,.0f} steps/s "
              f"({cleanrl[kind]:6.1f} s)  {ratio:5.2f}x SyncVectorEnv", flush=True)
    sb3: dict[str, float] = {}
    for kind in ["SB3 DummyVecEnv", *puffercore_kinds]:
        sb3[kind] = sb3_ppo(kind, args.envs, args.steps)
        print(f"stable-baselines3 PPO, {kind:<38} {args.steps / sb3[kind]:9,.0f} steps/s ({sb3[kind]:6.1f} s)  "
              f"{sb3['SB3 DummyVecEnv'] / sb3[kind]:5.2f}x DummyVecEnv", flush=True)


if __name__ == "__main__":
    main()
