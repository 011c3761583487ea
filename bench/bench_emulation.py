"""SpaceTree flatten/unflatten against gymnasium.spaces.flatten/unflatten on one nested
observation space.

    pytest bench/bench_emulation.py --benchmark-only     # pytest-benchmark tables
    python bench/bench_emulation.py                      # side by side, with ratios

gymnasium one-hot encodes Discrete leaves and promotes everything to one float dtype,
while SpaceTree copies leaves into a byte row unchanged; both do the job a vector env
needs (structure -> one row -> structure). Batched unflatten has no gymnasium
counterpart but a loop over rows, which is what a policy would otherwise do.
"""

import timeit

import numpy as np
from gymnasium import spaces

from puffercore.emulation import SpaceTree

SPACE = spaces.Dict(
    {
        "image": spaces.Box(0, 255, (16, 16, 3), np.uint8),
        "agent": spaces.Dict(
            {
                "position": spaces.Box(-10, 10, (3,), np.float32),
                "velocity": spaces.Box(-1, 1, (3,), np.float64),
                "heading": spaces.Discrete(8),
            }
        ),
        "inventory": spaces.Tuple((spaces.MultiDiscrete([5, 5, 5]), spaces.MultiBinary(6))),
        "action_mask": spaces.MultiBinary(10),
    }
)
TREE = SpaceTree(SPACE)
SPACE.seed(0)
SAMPLE = SPACE.sample()
ROW = TREE.flatten(SAMPLE)
OUT = np.zeros_like(ROW)
WRITE = TREE.writer(OUT)
GYM_ROW = spaces.flatten(SPACE, SAMPLE)
BATCH = 256
ROWS = np.tile(ROW, (BATCH, 1))
GYM_ROWS = np.tile(GYM_ROW, (BATCH, 1))

CASES = {
    "flatten one observation": (
        lambda: TREE.flatten(SAMPLE, OUT),
        lambda: spaces.flatten(SPACE, SAMPLE),
    ),
    "flatten, prepared row": (
        lambda: WRITE(SAMPLE),
        lambda: spaces.flatten(SPACE, SAMPLE),
    ),
    "unflatten one row": (
        lambda: TREE.unflatten(ROW),
        lambda: spaces.unflatten(SPACE, GYM_ROW),
    ),
    f"unflatten {BATCH} rows": (
        lambda: TREE.unflatten(ROWS),
        lambda: [spaces.unflatten(SPACE, row) for row in GYM_ROWS],
    ),
}


def test_puffercore_flatten(benchmark):
    benchmark(CASES["flatten one observation"][0])


def test_gymnasium_flatten(benchmark):
    benchmark(CASES["flatten one observation"][1])


def test_puffercore_flatten_prepared_row(benchmark):
    benchmark(CASES["flatten, prepared row"][0])


def test_puffercore_unflatten(benchmark):
    benchmark(CASES["unflatten one row"][0])


def test_gymnasium_unflatten(benchmark):
    benchmark(CASES["unflatten one row"][1])


def test_puffercore_unflatten_batch(benchmark):
    benchmark(CASES[f"unflatten {BATCH} rows"][0])


def test_gymnasium_unflatten_batch(benchmark):
    benchmark(CASES[f"unflatten {BATCH} rows"][1])


def best_time(function, repeat=5) -> float:
    """Best per-call time over `repeat` runs of about 0.2 s each."""
    calls, _ = timeit.Timer(function).autorange()
    return min(timeit.repeat(function, number=calls, repeat=repeat)) / calls


def main():
    print(f"space: {len(TREE.leaves)} leaves, puffercore row {TREE.size} {TREE.dtype}, gymnasium row {GYM_ROW.size} {GYM_ROW.dtype}")
    print(f"{'case':28} {'puffercore':>12} {'gymnasium':>12} {'speedup':>8}")
    for name, (ours, theirs) in CASES.items():
        ours_s, theirs_s = best_time(ours), best_time(theirs)
        print(f"{name:28} {ours_s * 1e6:10.2f}us {theirs_s * 1e6:10.2f}us {theirs_s / ours_s:7.1f}x")


if __name__ == "__main__":
    main()
