"""Throughput of the ocean envs, single thread, side by side with gymnasium.

    python bench/bench_ocean.py [--seconds 1.0] [--repeats 3]

Actions come from Python every step, from a pool generated beforehand so that drawing
random numbers is not what gets measured. Prints steps per second (agent steps for
multi-agent Snake) for every env at 1, 256 and 4096 envs, then CartPole against
gymnasium's NumPy CartPoleVectorEnv (and CartPole-v1 for one env) with the ratio, and
Connect4 against PettingZoo's connect_four_v3 (when it and pygame are installed).
Connect4's pooled actions are random columns, full ones included, so it runs with
illegal_move="lose"; its comparison instead draws each legal move from the action mask
on both sides. Azul is measured only that way (random actions would be illegal moves,
each ending an episode), against random opponents, with 2 and 4 players.
Each number is the best of --repeats runs; the median is shown beside it, since the
machine may be shared.
"""

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # keep idle BLAS threads off the cores

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv  # noqa: E402

from puffercore.ocean import AzulEnv, CartPole, Connect4Env, Snake, Squared  # noqa: E402

POOL = 64
ENVS = {
    "CartPole": (CartPole, {}),
    "CartPole continuous": (CartPole, {"continuous": True}),
    "Squared": (Squared, {}),
    "Snake (4 snakes/env)": (Snake, {}),
    "Connect4 (heuristic)": (Connect4Env, {"illegal_move": "lose"}),
    "Connect4 (random)": (Connect4Env, {"opponent": "random", "illegal_move": "lose"}),
}


def action_pool(space, rows, rng):
    if isinstance(space, gymnasium.spaces.Discrete):
        return [rng.integers(0, space.n, rows, dtype=np.int32) for _ in range(POOL)]
    return [rng.uniform(-1, 1, (rows, *space.shape)).astype(np.float32) for _ in range(POOL)]


def steps_per_second(step, actions, rows, seconds):
    """Run `step` over the action pool for about `seconds`; return agent steps/s."""
    calls = 0
    start = time.perf_counter()
    while True:
        for action in actions:
            step(action)
        calls += len(actions)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls * rows / elapsed


def measure(step, actions, rows, seconds, repeats):
    rates = [steps_per_second(step, actions, rows, seconds) for _ in range(repeats)]
    return max(rates), float(np.median(rates))


def puffercore_rate(cls, kwargs, num_envs, seconds, repeats):
    env = cls(num_envs=num_envs, seed=0, **kwargs)
    env.reset()
    actions = action_pool(env.single_action_space, env.num_agents, np.random.default_rng(0))
    steps_per_second(env.step, actions, env.num_agents, 0.1)  # warm-up
    rate = measure(env.step, actions, env.num_agents, seconds, repeats)
    env.close()
    return rate


def gymnasium_vector_rate(num_envs, seconds, repeats):
    env = CartPoleVectorEnv(num_envs=num_envs)
    env.reset(seed=0)
    actions = [a.astype(np.int64) for a in action_pool(gymnasium.spaces.Discrete(2), num_envs, np.random.default_rng(0))]
    return measure(env.step, actions, num_envs, seconds, repeats)


def gymnasium_single_rate(seconds, repeats):
    env = gymnasium.make("CartPole-v1")
    env.reset(seed=0)

    def step(action):
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()

    actions = [int(a) for a in np.random.default_rng(0).integers(0, 2, POOL)]
    return measure(step, actions, 1, seconds, repeats)


def masked_rate(cls, kwargs, num_envs, seconds, repeats):
    """Agent moves/s of an env with an action mask in its observation (Connect4, Azul)
    against its random opponent; each move a random legal action: the argmax of pooled
    noise times the action mask."""
    env = cls(num_envs=num_envs, seed=0, opponent="random", **kwargs)
    env.reset()
    masks = env.observation_tree.unflatten(env.observations)["action_mask"]  # a view: always current
    pool = max(1, min(POOL, 2**23 // masks.size))  # at most 32 MB of noise
    noise = np.random.default_rng(0).random((pool, *masks.shape), dtype=np.float32)

    def move(k):
        env.step(np.argmax(noise[k % pool] * masks, axis=1).astype(np.int32))

    return measure(move, range(POOL), num_envs, seconds, repeats)


def pettingzoo_connect4_rate(seconds, repeats):
    """The same game in PettingZoo's connect_four_v3: player_0 (the agent) and player_1
    (the random opponent) each pick a random legal column the same way; one agent move
    and the reply count as one step, as in Connect4."""
    from pettingzoo.classic import connect_four_v3

    env = connect_four_v3.env()
    env.reset(seed=0)
    noise = np.random.default_rng(0).random((POOL, 2, 7), dtype=np.float32)

    def move(k):
        for player in range(2):
            masks = env.observe(env.agent_selection)["action_mask"]
            env.step(int(np.argmax(noise[k, player] * masks)))
            if any(env.terminations.values()):
                env.reset()
                return

    return measure(move, range(POOL), 1, seconds, repeats)


def fmt(rate):
    best, median = rate
    return f"{best / 1e6:8.2f} M/s (median {median / 1e6:6.2f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per number (best is reported)")
    args = parser.parse_args()

    print("puffercore ocean envs, single thread, steps/s (agent rows):")
    for name, (cls, kwargs) in ENVS.items():
        for num_envs in (1, 256, 4096):
            print(f"  {name:22s} {num_envs:5d} envs  {fmt(puffercore_rate(cls, kwargs, num_envs, args.seconds, args.repeats))}")

    print("\nCartPole: puffercore vs gymnasium, same action pools:")
    ours = puffercore_rate(CartPole, {}, 1, args.seconds, args.repeats)
    theirs = gymnasium_single_rate(args.seconds, args.repeats)
    print(f"     1 env   puffercore {fmt(ours)}   gymnasium CartPole-v1 {fmt(theirs)}   ratio {ours[0] / theirs[0]:6.1f}x")
    for num_envs in (256, 4096):
        ours = puffercore_rate(CartPole, {}, num_envs, args.seconds, args.repeats)
        theirs = gymnasium_vector_rate(num_envs, args.seconds, args.repeats)
        print(f"  {num_envs:4d} envs  puffercore {fmt(ours)}   gymnasium CartPoleVectorEnv {fmt(theirs)}   "
              f"ratio {ours[0] / theirs[0]:6.1f}x")

    print("\nConnect4 vs a random opponent, legal moves from the action mask: puffercore vs PettingZoo:")
    try:
        theirs = pettingzoo_connect4_rate(args.seconds, args.repeats)
    except ImportError as error:  # connect_four_v3 imports pygame
        print(f"  PettingZoo connect_four_v3 unavailable ({error}); puffercore alone:")
        theirs = None
    for num_envs in (1, 4096):
        ours = masked_rate(Connect4Env, {"agent_first": True}, num_envs, args.seconds, args.repeats)
        line = f"  {num_envs:4d} envs  puffercore {fmt(ours)}"
        if theirs is not None:
            line += f"   PettingZoo connect_four_v3 (1 env) {fmt(theirs)}   ratio {ours[0] / theirs[0]:8.1f}x"
        print(line)

    print("\nAzul vs random opponents, legal moves from the action mask (agent moves/s; no peer here,"
          " see bench/bench_azul.py):")
    for num_players in (2, 4):
        for num_envs in (1, 256, 4096):
            rate = masked_rate(AzulEnv, {"num_players": num_players}, num_envs, args.seconds, args.repeats)
            print(f"  {num_players} players {num_envs:4d} envs  puffercore {fmt(rate)}")


if __name__ == "__main__":
    main()
