"""Checkpoints: atomic, round-trip NumPy and torch state, never unpickle code, and name
the file and the problem when one is corrupt; the CLI says so in one line."""

import os

import numpy as np
import pytest
import torch

from puffercore import checkpoint, ppo
from puffercore.__main__ import main
from puffercore.checkpoint import CheckpointError


class Payload:
    """What an attacker pickles: unpickling it calls os.system."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_round_trip_of_numpy_and_torch_state(tmp_path):
    np.random.seed(3)
    state = {"numpy_rng": np.random.get_state(), "array": np.arange(6, dtype=np.int16).reshape(2, 3),
             "scalar": np.float32(0.5), "tensor": torch.ones(2), "torch_rng": torch.get_rng_state(),
             "nested": [{"pair": (1, "a", None)}], "flags": np.array([True, False])}
    checkpoint.save(tmp_path / "state.pt", state)
    back = checkpoint.load(tmp_path / "state.pt")
    assert back["numpy_rng"][0] == "MT19937" and np.array_equal(back["numpy_rng"][1], state["numpy_rng"][1])
    assert back["array"].dtype == np.int16 and np.array_equal(back["array"], state["array"])
    assert back["scalar"] == 0.5 and back["nested"] == [{"pair": (1, "a", None)}] and back["flags"].dtype == bool
    np.random.set_state(back["numpy_rng"])
    assert np.random.rand() == pytest.approx(np.random.RandomState(3).rand())  # the stream goes on from there
    with pytest.raises(TypeError, match="object arrays can't be checkpointed"):
        checkpoint.save(tmp_path / "bad.pt", {"x": np.array([object()])})


@pytest.mark.parametrize("via", ["load", "eval", "resume"])
def test_a_pickled_payload_is_refused_and_never_runs(tmp_path, via, capsys):
    marker = tmp_path / "pwned"
    path = tmp_path / "run" / "checkpoint.pt"
    path.parent.mkdir()
    torch.save({"model": Payload(str(marker)), "config": {}}, path)  # torch.save pickles it as it is
    if via == "load":
        with pytest.raises(CheckpointError, match="pickled objects other than tensors"):
            checkpoint.load(path)
    else:
        with pytest.raises(SystemExit):
            main(["eval", "--checkpoint", str(path)] if via == "eval" else ["train", "--resume", str(path.parent)])
        assert "is not a puffercore checkpoint" in capsys.readouterr().err
    assert not marker.exists()


@pytest.mark.parametrize("content, message", [
    (b"", "not a readable checkpoint"),
    (b"\x00garbage\xff" * 10, "not a readable checkpoint"),
    (None, "lacks \\['env', 'config', 'optimizer', 'rng', 'counters'\\]"),
    ("truncated", "not a readable checkpoint"),
])
def test_corrupt_checkpoints_name_the_file_and_the_problem(tmp_path, content, message, capsys):
    path = tmp_path / "checkpoint.pt"
    if content is None:
        checkpoint.save(path, {"model": {}})
    elif content == "truncated":
        checkpoint.save(path, {"model": {"w": torch.zeros(1000)}})
        path.write_bytes(path.read_bytes()[:500])
    else:
        path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        ppo.evaluate(str(path))
    with pytest.raises(SystemExit):
        main(["eval", "--checkpoint", str(path)])
    err = capsys.readouterr().err
    assert str(path) in err and "Traceback" not in err and len(err.splitlines()) == 2

