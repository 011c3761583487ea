"""AVX2 mode (PUFFERCORE_ISA=avx2, puffercore.info): a short pipeline runs in it, in a
fresh interpreter, and every path it names is the AVX2 one. On an AVX-512 or AMX CPU
this tests the fallbacks other CPUs take; on an AVX2 CPU, that the switch changes nothing
it should not."""

import json
import os

import pytest


@pytest.mark.skipif(not os.path.isfile("/proc/cpuinfo") or "avx2" not in open("/proc/cpuinfo").read(),
                    reason="AVX2 mode needs an x86-64 CPU with AVX2")
def test_pipeline_runs_in_avx2_mode(run_python, tmp_path):
    result = run_python(f"""
        import contextlib, io, json, os
        import puffercore  # first: the switch sets torch's and oneDNN's variables before torch runs
        import torch
        from puffercore.__main__ import main

        main(["train", "cartpole", "--total-timesteps", "4096", "--seed", "1", "--run-dir", {str(tmp_path / "ppo")!r}])
        main(["alphazero", "tictactoe", "--run-dir", {str(tmp_path / "az")!r}, "--iterations", "1",
              "--channels", "8", "--blocks", "1", "--games-per-iteration", "8", "--parallel-games", "8",
              "--simulations", "8", "--train-steps", "3", "--batch-size", "16", "--eval-interval", "0"])
        # oneDNN names the ISA it runs at its first primitive
        with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
            conv = torch.nn.Conv2d(32, 32, 3).to(memory_format=torch.channels_last)
            conv(torch.randn(8, 32, 16, 16).to(memory_format=torch.channels_last))
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            main(["info", "--json"])
        print("INFO " + json.dumps(json.loads(text.getvalue())))
        """, timeout=900, env={**os.environ, "PUFFERCORE_ISA": "avx2"})
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(next(line[5:] for line in result.stdout.splitlines() if line.startswith("INFO ")))
    cpu, native, presets = found["cpu"], found["native"], found["presets"]
    assert cpu["isa"] == "AVX2" or cpu["isa"].startswith("AVX2 (forced on "), cpu["isa"]
    assert cpu["torch_cpu_capability"] == "AVX2" and cpu["onednn_max_cpu_isa"] == "AVX2"
    assert "isa:Intel AVX2" in result.stdout + result.stderr  # not AVX-512 nor AMX
    assert native["mlp_lanes"] == 8 and native["native_bf16"] is False
    assert all(choice["chosen"] == "float32" for choice in presets["ppo"].values())
    assert all(game["inference_precision"] == game["train_precision"] == "float32"
               for game in presets["alphazero"].values())
    assert os.path.isfile(tmp_path / "ppo" / "metrics.csv")
    assert os.path.isfile(tmp_path / "az" / "metrics.csv")
