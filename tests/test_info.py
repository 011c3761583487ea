"""puffercore.info and `puffercore info`: the machine's terms, the report, and the
PUFFERCORE_ISA switch's checks (the switch running a pipeline: test_avx2_mode.py)."""

import json
import os

import pytest
import torch

from puffercore import info
from puffercore.__main__ import main
from puffercore.precision import native_bf16


@pytest.fixture
def clean_isa(monkeypatch):
    """No forced ISA, torch's and oneDNN's variables restored after the test."""
    for name in (info.ISA_VARIABLE, "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(info, "_torch_ran_first", False)
    return monkeypatch


def test_info_json_reports_versions_cpu_native_paths_and_presets(capsys, clean_isa):
    main(["info", "--json"])
    found = json.loads(capsys.readouterr().out)
    assert found["versions"]["torch"] == torch.__version__
    assert found["versions"]["python"].split()[0].count(".") == 2
    cpu = found["cpu"]
    assert {"cpu", "isa", "cores", "gpu"} <= set(cpu) and cpu["isa"] == info.cpu_isa()
    assert cpu["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    if info._x86():
        assert set(cpu["features"]) == {"avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"}
        assert cpu["features"]["avx2"] == ("avx2" in info.cpu_flags())
    native = found["native"]
    assert native["mlp_lanes"] == (16 if cpu["isa"].startswith("AVX-512") else 8)
    assert native["native_bf16"] == native_bf16()
    assert native["cuda_gae"].startswith(("not built", "built"))
    chosen = "bfloat16" if native_bf16() else "float32"
    assert set(found["presets"]["ppo"]) == {"snake", "atari"}
    assert all(choice["chosen"] == chosen for choice in found["presets"]["ppo"].values())
    games = found["presets"]["alphazero"]
    assert set(games) == {"tictactoe", "connect4", "azul"}
    assert games["connect4"]["inference_precision"] == chosen
    assert games["azul"]["inference_precision"] == "float32"  # an MLP: auto keeps float32 everywhere
    assert all(game["train_precision"] == chosen for game in games.values())
    assert games["azul"]["self_play_threads"] == 1


def test_info_text_names_every_part(capsys, clean_isa):
    main(["info"])
    text = capsys.readouterr().out
    for part in ("puffercore", "torch", "CPU", "ISA", "cores", "MLP kernels", "bf16", "CUDA GAE kernel",
                 "PPO snake", "PPO atari", "AlphaZero connect4", "AlphaZero azul"):
        assert part in text, part
    assert info.machine()["cpu"] in text


def test_forced_isa_names_the_mode_and_the_cpu(clean_isa):
    clean_isa.setenv(info.ISA_VARIABLE, "avx2")
    clean_isa.setattr(info, "cpu_isa", lambda: "AVX-512 + AMX")
    assert info.forced_isa() == "avx2"
    assert info.machine()["isa"] == "AVX2 (forced on AVX-512 + AMX)"
    assert "(AVX2 (forced on AVX-512 + AMX))" in info.machine_label(info.machine())
    clean_isa.setattr(info, "cpu_isa", lambda: "AVX2")  # an AVX2 CPU runs as itself
    assert info.machine()["isa"] == "AVX2"


def test_forced_isa_keeps_bf16_off(clean_isa):
    clean_isa.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    assert native_bf16()
    clean_isa.setenv(info.ISA_VARIABLE, "avx2")
    assert info.forced_isa() == "avx2"
    assert not native_bf16()


def test_apply_forced_isa_sets_torch_and_onednn_variables(clean_isa):
    clean_isa.setenv(info.ISA_VARIABLE, "avx2")
    info.apply_forced_isa()
    assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2" and os.environ["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    # torch is imported and has run here: the switch holds only where torch already ran AVX2
    if torch.backends.cpu.get_cpu_capability() == "AVX2":
        assert info.forced_isa() == "avx2"
    else:
        with pytest.raises(ValueError, match="import puffercore first"):
            info.forced_isa()


@pytest.mark.parametrize("value, machine, message", [
    ("avx512", "x86_64", "PUFFERCORE_ISA='avx512': expected avx2"),
    ("AVX2", "x86_64", "expected avx2"),
    ("avx2", "aarch64", "needs an x86-64 CPU with AVX2; this one is NEON"),
])
def test_forced_isa_refuses_what_it_cannot_apply(clean_isa, value, machine, message):
    clean_isa.setenv(info.ISA_VARIABLE, value)
    clean_isa.setattr(info.platform, "machine", lambda: machine)
    with pytest.raises(ValueError, match=message):
        info.forced_isa()
    info.apply_forced_isa()  # sets nothing, raises nothing: the error is forced_isa()'s
    assert "ATEN_CPU_CAPABILITY" not in os.environ


def test_cli_refuses_a_bad_switch_in_one_line(capsys, clean_isa):
    clean_isa.setenv(info.ISA_VARIABLE, "sse")
    with pytest.raises(SystemExit) as stop:
        main(["info"])
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert "PUFFERCORE_ISA='sse': expected avx2" in error and "Traceback" not in error


def test_cpu_facts_are_consistent():
    assert info.cores() >= 1
    physical = info.physical_cores()
    assert physical is None or 1 <= physical <= (os.cpu_count() or physical)
    assert info.cpu_isa() in ("AVX-512 + AMX", "AVX-512", "AVX2", "x86-64 (no AVX2)", "NEON") or not info._x86()
