"""Deployment: `ppo.Policy.load(run).act` against the trainer's own greedy actions (one
observation and a batch, normalization and action masks included, a recurrent policy's
state), and `puffercore export`'s ONNX and TorchScript files against the checkpoint."""

import dataclasses
import sys

import numpy as np
import pytest
import torch

from puffercore import checkpoint, env_sources, ppo, run
from puffercore.__main__ import main
from puffercore.ppo.parts import make_vector, saved_policy
from puffercore.transforms import Normalize

onnxruntime = pytest.importorskip("onnxruntime")

RUNS = {  # name: (env, PPOConfig overrides)
    "cartpole-normalized": ("cartpole", dict(norm_obs=True, norm_reward=True)),
    "connect4-masked-normalized": ("connect4", dict(norm_obs=True, num_envs=32, horizon=8, minibatch_size=128)),
    "memory-lstm": ("memory", dict(num_envs=16, minibatch_size=80)),
    "pendulum-box": ("gymnasium:Pendulum-v1", dict(backend="serial", num_envs=4, horizon=32, minibatch_size=64,
                                                   norm_obs=True)),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A run directory per RUNS entry, two updates each."""
    directories = {}
    for name, (env, overrides) in RUNS.items():
        run_dir = tmp_path_factory.mktemp(name)
        config = ppo.PPOConfig.for_env(env, quiet=True, tensorboard=False, run_dir=str(run_dir), compile="false",
                                       **overrides)
        vec_rows = config.num_envs * config.horizon
        ppo.train(dataclasses.replace(config, total_timesteps=2 * vec_rows), env)
        directories[name] = str(run_dir)
    return directories


def env_observations(run_dir: str, steps: int = 3, seed: int = 5):
    """Raw observations of a few steps of the run's env (4 rows, before normalization) and
    what the checkpoint's policy does on them the way evaluation runs it (the training
    path's NumPy normalization with the frozen statistics, `policy.output`,
    `head.greedy`): [(raw, actions, params, value)]."""
    state = checkpoint.load(run.checkpoint_path(run_dir))
    config = ppo.PPOConfig(**state["config"])
    vec = make_vector(env_sources.resolve(state["env"]), dataclasses.replace(config, num_envs=4, batch_size=0, num_workers=0,
                                                         backend="serial"), seed=seed)
    normalize = None
    if config.norm_obs:
        normalize = Normalize(vec, observations=True, rewards=False, clip_observations=config.clip_obs)
        normalize.load_state_dict({"observations": state["normalize"]["observations"]})
    policy = saved_policy(state, None, run_dir, vec)
    seen, recurrent = [], policy.initial_state(4, "cpu")
    try:
        raw, _ = vec.reset(seed=seed)
        for _ in range(steps):
            raw, observations = raw.copy(), raw.copy()
            if normalize is not None:
                normalize._normalize(observations)
            with torch.no_grad():
                out = policy.output(torch.as_tensor(observations), recurrent)
            actions = policy.head.greedy(out.params)
            seen.append((raw, actions.numpy(), out.params.numpy(), out.value.numpy()))
            recurrent = out.state
            raw, *_ = vec.step(policy.head.to_env(actions))
    finally:
        vec.close()
    return seen


@pytest.mark.parametrize("name", list(RUNS))
def test_act_equals_the_trainers_greedy_actions_one_or_a_batch(runs, name):
    steps = env_observations(runs[name])
    policy = ppo.Policy.load(runs[name])
    space = policy.action_space
    for raw, actions, params, value in steps:
        if not policy.recurrent:  # the network under act: the same distribution and value (normalization folded in)
            with torch.no_grad():
                _, network_params, network_value = policy.network(torch.as_tensor(raw))
            np.testing.assert_allclose(network_params.numpy(), params, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(network_value.numpy(), value, rtol=1e-6, atol=1e-6)
        expected = np.clip(actions, space.low, space.high) if policy.policy.head.is_continuous else actions
        np.testing.assert_allclose(policy.act(raw), expected, rtol=0, atol=1e-5)
    if policy.recurrent:
        policy.reset()
    else:  # one observation at a time gives each row's action
        raw, actions, _, _ = steps[-1]
        for row in range(len(raw)):
            one = policy.act(raw[row])
            assert np.shape(one) == np.shape(actions[row])
            np.testing.assert_allclose(one, policy.act(raw[row:row + 1])[0], rtol=0, atol=0)
    sampled = policy.act(steps[0][0], deterministic=False)
    assert len(sampled) == 4 and all(space.contains(action) for action in sampled)


@pytest.mark.parametrize("name", list(RUNS))
@pytest.mark.parametrize("format", ["onnx", "torchscript"])
def test_exported_files_give_the_checkpoints_actions(runs, name, format, tmp_path):
    path = ppo.export_policy(runs[name], format, output=str(tmp_path / f"policy.{format}"))
    steps = env_observations(runs[name])
    recurrent = ppo.Policy.load(runs[name]).policy.initial_state(4, "cpu")
    state = [part.numpy() for part in recurrent or ()]
    if format == "onnx":
        session = onnxruntime.InferenceSession(path)
        assert [output.name for output in session.get_outputs()][:3] == ["actions", "params", "value"]
        run_file = lambda observations, *state: session.run(None, {  # noqa: E731
            "observations": observations, **{f"state_{index}": part for index, part in enumerate(state)}})
    else:
        module = torch.jit.load(path)
        run_file = lambda observations, *state: [tensor.numpy() for tensor in module(  # noqa: E731
            torch.as_tensor(observations), *map(torch.as_tensor, state))]
    for raw, actions, params, value in steps:
        outputs = run_file(raw, *state)
        np.testing.assert_allclose(outputs[0], actions, rtol=0, atol=1e-5)
        np.testing.assert_allclose(outputs[1], params, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(outputs[2], value, rtol=1e-5, atol=1e-5)
        state = outputs[3:]
    if not recurrent:  # another batch size than the trace's 2
        np.testing.assert_allclose(run_file(steps[0][0][:1])[0], steps[0][1][:1], rtol=0, atol=1e-5)


def test_masked_actions_stay_illegal_everywhere(runs, tmp_path):
    """Connect4 with one legal column: act, ONNX and TorchScript all take it."""
    run_dir = runs["connect4-masked-normalized"]
    policy = ppo.Policy.load(run_dir)
    rows = np.zeros((7, *policy.observation_space.shape), np.float32)
    mask = policy.observation_tree.leaf("action_mask")
    rows[:, mask.start:mask.stop][np.arange(7), np.arange(7)] = 1.0  # row i: only column i is legal
    np.testing.assert_array_equal(policy.act(rows), np.arange(7))
    session = onnxruntime.InferenceSession(ppo.export_policy(run_dir, "onnx", output=str(tmp_path / "p.onnx")))
    actions, params, _ = session.run(None, {"observations": rows})
    np.testing.assert_array_equal(actions, np.arange(7))
    assert (params[~np.eye(7, dtype=bool)] == np.finfo(np.float32).min).all()
    module = torch.jit.load(ppo.export_policy(run_dir, "torchscript", output=str(tmp_path / "p.pt")))
    np.testing.assert_array_equal(module(torch.as_tensor(rows))[0].numpy(), np.arange(7))


def test_a_recurrent_policy_carries_its_state_until_reset(runs):
    policy = ppo.Policy.load(runs["memory-lstm"])
    rows = np.random.default_rng(0).random((3, 3)).astype(np.float32)
    policy.act(rows)
    carried = [part.clone() for part in policy.state]
    policy.act(rows)
    assert not torch.equal(carried[0], policy.state[0])  # the state moved on
    policy.reset(np.array([True, False, False]))
    assert policy.state[0][0].eq(0).all() and policy.state[0][1].ne(0).any()
    with pytest.raises(ValueError, match="call reset\\(\\) before acting on a batch of another size"):
        policy.act(rows[:2])
    with pytest.raises(ValueError, match="ended must be one bool per row"):
        policy.reset(np.array([1, 0, 0]))
    policy.reset()
    first = policy.act(rows)
    policy.reset()
    np.testing.assert_array_equal(policy.act(rows), first)  # reset: the same start again


def test_bad_input_is_named(runs, tmp_path, capsys, monkeypatch):
    policy = ppo.Policy.load(runs["cartpole-normalized"])
    with pytest.raises(ValueError, match=r"observations must have shape \(4,\) \(one observation\) or \(batch, 4\)"):
        policy.act(np.zeros((2, 5), np.float32))
    with pytest.raises(ValueError, match="observations must have shape"):
        policy.act(np.zeros((0, 4), np.float32))
    with pytest.raises(ValueError, match="observations must be numbers castable to the observation space's float32"):
        policy.act(np.array(["a", "b", "c", "d"]))
    with pytest.raises(TypeError, match="deterministic must be True or False"):
        policy.act(np.zeros(4, np.float32), deterministic="yes")
    with pytest.raises(ValueError, match=r"format must be one of \['onnx', 'torchscript'\], got 'tflite'"):
        ppo.export_policy(runs["cartpole-normalized"], "tflite")
    monkeypatch.setitem(sys.modules, "onnx", None)  # not installed
    with pytest.raises(ImportError, match=r'exporting to ONNX needs the onnx package: pip install "puffercore\[onnx\]"'):
        ppo.export_policy(runs["cartpole-normalized"], "onnx")
    monkeypatch.undo()
    with pytest.raises(SystemExit):
        main(["export", runs["cartpole-normalized"], "--format", "tflite"])
    assert "invalid choice: 'tflite'" in capsys.readouterr().err
    state = checkpoint.load(run.checkpoint_path(runs["cartpole-normalized"]))
    state["policy"] = {"name": "builtin"}  # as an earlier puffercore wrote it: no spaces
    checkpoint.save(tmp_path / "old.pt", state)
    with pytest.raises(ValueError, match="records no spaces for its policy"):
        ppo.Policy.load(str(tmp_path / "old.pt"))


def test_cli_export_writes_beside_the_checkpoint(runs, capsys):
    main(["export", runs["cartpole-normalized"], "--format", "torchscript"])
    out = capsys.readouterr().out.strip()
    assert out == f"wrote {runs['cartpole-normalized']}/policy.pt"
    module = torch.jit.load(out.removeprefix("wrote "))
    observation = np.array([[0.01, -0.02, 0.03, 0.04]], np.float32)
    assert int(module(torch.as_tensor(observation))[0][0]) == int(ppo.Policy.load(runs["cartpole-normalized"])
                                                                   .act(observation[0]))
