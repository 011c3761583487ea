"""Collection with the rollout on the device (puffercore.ppo.device_rollout): on CPU
tensors, uncaptured, it fills the rollout exactly as the trainer's host path does for the
same seed (observations, actions, log-probabilities, values, truncation bootstraps,
advantages, episode statistics), without a new tensor per step; where capture fails it
says so in one line. On CUDA (`gpu` tests) the graphed collection matches the host path
within float tolerance, replays its graph and allocates nothing per step."""

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces

from puffercore import ppo
from puffercore.ppo import PPOConfig
from puffercore.ppo.device_rollout import DeviceCollection
from puffercore.ppo.policy import ActionHead

FAILED = "CUDA graph capture of collection's forward failed"
# Short time limits: every rollout has truncations to bootstrap (and CartPole terminations).
ENVS = {"cartpole": lambda: gymnasium.make("CartPole-v1", max_episode_steps=12),
        "pendulum": lambda: gymnasium.make("Pendulum-v1", max_episode_steps=10)}
COMPARED = ("obs", "value", "mask", "action", "log_prob", "reward", "terminal", "truncation", "advantage", "return")


def config(**overrides) -> PPOConfig:
    values = dict(num_envs=8, horizon=16, minibatch_size=64, update_epochs=1, hidden_size=16, backend="serial",
                  total_timesteps=8 * 16 * 4, quiet=True, tensorboard=False, checkpoint_interval=0,
                  inference="torch", compile="false", seed=3)
    return PPOConfig(**{**values, **overrides})


def trainer_pair(env: str, device: str = "cpu", capture: bool = False, **overrides):
    """(host path, device path): two trainers of one config and seed."""
    host = ppo.Trainer(ENVS[env], config(device=device, **overrides))
    on_device = ppo.Trainer(ENVS[env], config(device=device, **overrides))
    if on_device.device_collection is None:  # on the CPU the plan keeps the host path: swap it in
        values = None if on_device.popart is None else on_device._values
        on_device.device_collection = DeviceCollection(on_device.policy, on_device.rollout, on_device.action_rng,
                                                       values, capture=capture)
    return host, on_device


def rounds(trainer, count: int = 3) -> list[dict]:
    """Each rollout's fields (with advantages), its truncation bootstraps and episode
    statistics, an update after each."""
    trainer.reset_envs()
    seen = []
    for _ in range(count):
        trainer.collect()
        trainer.compute_advantages()
        rollout = trainer.rollout
        fields = {name: rollout[name].detach().cpu().clone() for name in COMPARED}
        truncated = rollout["truncation"].cpu()
        fields["final_value"] = rollout["final_value"].cpu()[truncated]
        fields["truncations"] = int(truncated.sum())
        fields["episodes"] = trainer.episodes.take_means()
        seen.append(fields)
        trainer.learn()
        trainer.update += 1
    return seen


def assert_same_rollouts(host: list[dict], device: list[dict], exact: bool) -> None:
    """Equal rollouts; with `exact`, the first to the bit but for V(final observation)
    and what GAE derives from it (the host path's critic runs on the truncated rows
    alone, the device's on the whole batch: another matmul shape, another rounding),
    and the later ones, collected after updates on those advantages, to rounding."""
    for round_, (expected, got) in enumerate(zip(host, device)):
        assert expected["truncations"] > 0 and got["truncations"] == expected["truncations"]
        assert got["episodes"].keys() == expected["episodes"].keys() and expected["episodes"]
        for name in got["episodes"]:
            assert got["episodes"][name] == pytest.approx(expected["episodes"][name]), name
        for name in (*COMPARED, "final_value"):
            rounded = name in ("final_value", "advantage", "return") or not exact or round_ > 0
            if not (rounded and got[name].is_floating_point()) or name in ("obs", "reward"):
                assert torch.equal(got[name], expected[name]), name
            else:
                torch.testing.assert_close(got[name], expected[name], rtol=1e-4, atol=1e-5, msg=name)


def close(*trainers) -> None:
    for trainer in trainers:
        trainer.close()


@pytest.mark.parametrize("env", list(ENVS))
@pytest.mark.parametrize("batches", [1, 2], ids=["sync", "staggered"])
def test_device_collection_on_cpu_tensors_fills_the_host_paths_rollout(env, batches):
    host, device = trainer_pair(env, batch_size=8 // batches)
    try:
        assert host.device_collection is None
        assert_same_rollouts(rounds(host), rounds(device), exact=True)
        assert device.device_collection.mode == "eager"
    finally:
        close(host, device)


def test_popart_values_reach_the_rollout_in_return_units():
    host, device = trainer_pair("pendulum", value_norm=True)
    try:
        assert_same_rollouts(rounds(host), rounds(device), exact=True)
    finally:
        close(host, device)


def buffer_pointers(collection: DeviceCollection) -> list[int]:
    tensors = [tensor for buffers in collection.sizes.values()
               for tensor in (*buffers.device.values(), *buffers.host.values(), *buffers.noise)]
    tensors += [tensor for name, tensor in collection.rollout.fields.items() if name not in ("advantage", "return")]
    tensors += list(collection.gae_outputs().values())  # the advantages and returns GAE writes
    return [tensor.data_ptr() for tensor in tensors]


def watch_steps(collection: DeviceCollection) -> list:
    """Record the buffers' addresses and the returned actions' after every step."""
    seen, step = [], collection.step

    def recording(batch):
        actions = step(batch)
        seen.append((buffer_pointers(collection), actions.ctypes.data))
        return actions

    collection.step = recording
    return seen


def test_each_step_writes_into_the_same_tensors():
    _, trainer = trainer_pair("pendulum")
    try:
        seen = watch_steps(trainer.device_collection)
        rounds(trainer, 2)
        assert len(seen) > 30 and len(trainer.device_collection.sizes) == 1
        assert all(step == seen[0] for step in seen)
        advantages = trainer.device_collection.gae_outputs()["advantages"]
        assert trainer.rollout["advantage"] is advantages  # GAE wrote into the static outputs
    finally:
        trainer.close()


def test_capture_that_fails_says_so_once_and_collects_as_eager(capsys):
    host, device = trainer_pair("cartpole", capture=True)  # this CPU has no CUDA graphs
    try:
        expected, got = rounds(host, 2), rounds(device, 2)
        lines = [line for line in capsys.readouterr().err.splitlines() if FAILED in line]
        assert len(lines) == 1 and lines[0].startswith("puffercore: ") and lines[0].endswith("collection runs eagerly")
        assert device.device_collection.mode == "eager"
        assert_same_rollouts(expected, got, exact=True)
    finally:
        close(host, device)


@pytest.mark.parametrize("space", [spaces.Discrete(5, start=2), spaces.MultiDiscrete([3, 4]),
                                   spaces.Box(-1, 1, (3,), np.float32)], ids=["discrete", "multi", "box"])
def test_sampling_from_drawn_noise_is_torchs_own_sampling(space):
    head = ActionHead(space)
    params = torch.randn(64, head.size, generator=torch.Generator().manual_seed(1))
    log_std = torch.full((head.size,), -0.5) if head.is_continuous else None
    generator = torch.Generator().manual_seed(2)
    actions, log_prob = head.sample(params, log_std, generator)
    reference = torch.Generator().manual_seed(2)
    if head.is_continuous:  # the draws torch.randn and torch.multinomial make on the same generator
        expected = params + log_std.exp() * torch.randn(params.shape, generator=reference)
    else:
        blocks = [torch.multinomial(torch.softmax(logits, -1), 1, generator=reference).squeeze(-1)
                  for logits in params.split(head.nvec, dim=-1)]
        expected = (torch.stack(blocks, -1) + head.start).reshape(actions.shape)
    assert torch.equal(actions, expected)
    torch.testing.assert_close(log_prob, head.evaluate(params, log_std, actions)[0])
    assert torch.equal(generator.get_state(), reference.get_state())


# ---- on a CUDA device ---------------------------------------------------------------------
def on_cuda(test):
    return pytest.mark.gpu(pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")(test))


@on_cuda
@pytest.mark.parametrize("env", list(ENVS))
def test_graphed_collection_on_cuda_matches_the_host_path(env):
    host = ppo.Trainer(ENVS[env], config(device="cuda"))
    device = ppo.Trainer(ENVS[env], config(device="cuda", inference="auto"))
    try:
        assert host.device_collection is None and device.plan.collection.name == "device"
        assert_same_rollouts(rounds(host), rounds(device), exact=False)
        assert device.device_collection.mode == "graphed"
        assert device.rollout["advantage"].is_cuda
    finally:
        close(host, device)


@on_cuda
def test_graphed_collection_replays_and_allocates_nothing_per_step():
    trainer = ppo.Trainer(ENVS["cartpole"], config(device="cuda", inference="auto", num_envs=64,
                                                   minibatch_size=256))
    try:
        collection = trainer.device_collection
        seen = watch_steps(collection)
        trainer.reset_envs()
        trainer.collect()  # the first step captures
        replays, step = [], collection.sizes[64].graphs[0]
        collection.sizes[64].graphs = (lambda buffers: (replays.append(1), step(buffers)),
                                       collection.sizes[64].graphs[1])
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats()["allocation.all.allocated"]
        trainer.collect()
        torch.cuda.synchronize()
        assert torch.cuda.memory_stats()["allocation.all.allocated"] == before
        assert len(replays) == trainer.config.horizon and collection.mode == "graphed"
        assert all(pointers == seen[0] for pointers in seen)
    finally:
        trainer.close()
