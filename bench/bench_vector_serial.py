"""Serial vector env overhead: puffercore's serial backend against gymnasium's
SyncVectorEnv on the same gymnasium envs, same-step autoreset in both.

    python bench/bench_vector_serial.py [--num-envs 8] [--steps 2000]

Both step the very same Python envs, so the ratio measures the wrapping: puffercore
writes each observation straight into the shared buffers through precomputed leaf
views; gymnasium copies per env and concatenates (and, for Dict observations, keeps one
array per leaf).
"""

import argparse
import time

import gymnasium
import numpy as np

import puffercore.vector

ENVS = {
    "CartPole-v1": lambda: gymnasium.make("CartPole-v1"),
    "CartPole-v1 + Dict obs": lambda: gymnasium.wrappers.TimeAwareObservation(gymnasium.make("CartPole-v1"), flatten=False),
}


def steps_per_second(step, actions, num_steps) -> float:
    start = time.perf_counter()
    for t in range(num_steps):
        step(actions[t % len(actions)])
    return num_steps * len(actions[0]) / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    actions = np.random.default_rng(0).integers(0, 2, (64, args.num_envs)).astype(np.int32)
    print(f"{'env':26} {'puffercore':>14} {'gymnasium':>14} {'ratio':>6}")
    for name, creator in ENVS.items():
        with puffercore.vector.make(creator, args.num_envs, seed=0) as ours:
            ours.reset()
            ours_sps = steps_per_second(ours.step, actions, args.steps)
        theirs = gymnasium.vector.SyncVectorEnv(
            [creator] * args.num_envs, autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP
        )
        theirs.reset(seed=0)
        theirs_sps = steps_per_second(theirs.step, actions, args.steps)
        theirs.close()
        print(f"{name:26} {ours_sps:10.0f} sps {theirs_sps:10.0f} sps {ours_sps / theirs_sps:5.2f}x")


if __name__ == "__main__":
    main()
