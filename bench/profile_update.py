"""Where one PPO update's time goes, preset by preset: torch.profiler's op launches of
`Trainer.learn()` sorted into what the update does (the table of issue 29).

    python bench/profile_update.py                          # cartpole snake mujoco atari
    python bench/profile_update.py --presets cartpole --compile false true
    python bench/profile_update.py --presets cartpole --backward autograd auto   # the by-hand gradients

Each preset's trainer (bench_update.preset_trainer) collects one rollout, learns once
untimed (warm-up; a compiled update compiles here), then collects and learns once under
the profiler. Rows: ops launched per minibatch (every aten call, nested ones included) and their
time, by category, and "python" = the update's wall time that no op covers (the
interpreter between launches). MuJoCo and Atari run on bench_update's stand-in envs.
The profiler slows each op down; compare the shares, and time with bench_update.py.
"""

from __future__ import annotations

import argparse
import collections
import time

import torch
from torch.autograd import DeviceType

from bench_update import PRESETS, preset_trainer

# aten op name -> category; anything else is "other math" (forward, loss, clipping).
CATEGORIES = {
    "gather": ("aten::index", "aten::index_select", "aten::take", "aten::floor_divide", "aten::remainder",
               "aten::randperm", "aten::slice", "aten::select", "aten::reshape", "aten::view", "aten::contiguous"),
    "host sync": ("aten::item", "aten::_local_scalar_dense"),
    "distribution": ("aten::log_softmax", "aten::_log_softmax", "aten::gather", "aten::exp", "aten::multinomial",
                     "aten::split", "aten::split_with_sizes"),
    "grad clip, statistics": ("aten::_foreach_norm", "aten::_foreach_mul_", "aten::clamp", "aten::linalg_vector_norm",
                  "aten::stack", "aten::reciprocal"),
}
CATEGORY_OF = {name: category for category, names in CATEGORIES.items() for name in names}


def categorize(event) -> str:
    name = event.name
    if name.startswith("autograd::engine::evaluate_function"):
        return "autograd (backward)"
    if name.startswith("Optimizer.step"):
        return "optimizer step"
    if name.startswith("Optimizer.zero_grad"):
        return "optimizer step"
    if name.startswith(("Torch-Compiled Region", "CompiledFunction", "## Call CompiledFxGraph")):
        return "compiled region"
    return CATEGORY_OF.get(name, "other math")


def profile(name: str, compile_setting: str, backward: str = "autograd") -> None:
    trainer = preset_trainer(name, compile_setting, backward=backward)
    try:
        trainer.collect()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            trainer.learn()
            wall = time.perf_counter() - start
        minibatches = trainer.losses["loss/minibatches"]
    finally:
        trainer.close()

    counts, times = collections.Counter(), collections.Counter()
    for event in prof.events():
        if event.cpu_parent is not None or event.device_type != DeviceType.CPU:
            continue  # top-level ops only: their children are the same work
        category = categorize(event)
        counts[category] += 1 + sum(1 for _ in _descendants(event))
        times[category] += event.cpu_time_total / 1e3
    profiled_ms = sum(times.values())
    python_ms = max(wall * 1e3 - profiled_ms, 0.0)
    print(f"\n{name} (compile {compile_setting}, backward {backward}): learn() {wall * 1e3:.1f} ms under the profiler, "
          f"{minibatches:g} minibatches; per minibatch: {wall * 1e3 / minibatches:.3f} ms, "
          f"{sum(counts.values()) / minibatches:.0f} op launches")
    print(f"  {'category':22s} {'ops/minibatch':>14s} {'ms/minibatch':>13s} {'share':>6s}")
    for category, ms in sorted(times.items(), key=lambda item: -item[1]) + [("python (between ops)", python_ms)]:
        print(f"  {category:22s} {counts[category] / minibatches:14.1f} {ms / minibatches:13.3f} "
              f"{ms / (wall * 1e3):6.0%}")


def _descendants(event):
    for child in event.cpu_children:
        yield child
        yield from _descendants(child)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", choices=sorted(PRESETS), default=list(PRESETS))
    parser.add_argument("--compile", nargs="+", choices=("false", "true"), default=["false"],
                        help="train.compile settings to profile (default false: eager)")
    parser.add_argument("--backward", nargs="+", choices=("autograd", "auto"), default=["autograd"],
                        help="train.backward settings to profile (auto: the by-hand MLP gradients where they "
                             "apply, what a CartPole run takes)")
    args = parser.parse_args()
    for name in args.presets:
        for mode in args.compile:
            for backward in args.backward:
                profile(name, mode, backward)


if __name__ == "__main__":
    main()
