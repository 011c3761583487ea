"""pytest-benchmark suite for the ocean envs, with gymnasium's CartPoleVectorEnv beside
CartPole: `pytest bench/test_bench_ocean.py`. One benchmark round is 64 steps of every
env with actions from a pool drawn beforehand; compare the rounds' times per group."""

import numpy as np
import pytest
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

from puffercore.ocean import CartPole, Connect4Env, Snake, Squared

pytest.importorskip("pytest_benchmark")

STEPS = 64
# Random columns include full ones, which Connect4 must be told to accept (as losses).
ENVS = {"CartPole": (CartPole, {}), "Squared": (Squared, {}), "Snake": (Snake, {}),
        "Connect4": (Connect4Env, {"illegal_move": "lose"})}


def run_steps(step, actions):
    for action in actions:
        step(action)


@pytest.mark.parametrize("num_envs", [1, 256, 4096])
@pytest.mark.parametrize("name", ENVS)
def test_ocean_step(benchmark, name, num_envs):
    benchmark.group = f"ocean {num_envs} envs"
    cls, kwargs = ENVS[name]
    env = cls(num_envs=num_envs, seed=0, **kwargs)
    env.reset()
    n = env.single_action_space.n
    actions = np.random.default_rng(0).integers(0, n, (STEPS, env.num_agents), dtype=np.int32)
    benchmark(run_steps, env.step, actions)
    benchmark.extra_info["agent_steps_per_round"] = STEPS * env.num_agents


@pytest.mark.parametrize("num_envs", [256, 4096])
def test_gymnasium_cartpole_vector_step(benchmark, num_envs):
    benchmark.group = f"ocean {num_envs} envs"
    env = CartPoleVectorEnv(num_envs=num_envs)
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 2, (STEPS, num_envs))
    benchmark(run_steps, env.step, actions)
    benchmark.extra_info["agent_steps_per_round"] = STEPS * num_envs
