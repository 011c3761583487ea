"""Observation and reward normalization: the same numbers as gymnasium's vector wrappers
on the same data, in place on every backend (staggered batches too), final
observations normalized with the batch's statistics, frozen and restored state, and PPO
checkpoints carrying it."""

import copy
import dataclasses
import os
import pickle

import gymnasium
import numpy as np
import pytest
import torch

import puffercore.vector
from puffercore import checkpoint, ppo, run
from puffercore.ocean import CartPole
from puffercore.transforms import Normalize, RunningMeanStd


class Replay(gymnasium.vector.VectorEnv):
    """A gymnasium vector env that replays recorded batches (recorded with same-step
    autoreset), so gymnasium's wrappers see exactly the data puffercore's vector env
    produced. `mode`: the autoreset mode declared to the wrapper (its observation
    wrapper refuses SAME_STEP, and only its reward wrapper reads the mode)."""

    def __init__(self, first_observations, steps, mode):
        self.metadata = {"autoreset_mode": mode}
        self.num_envs = len(first_observations)
        self.single_observation_space = gymnasium.spaces.Box(-np.inf, np.inf, first_observations.shape[1:], np.float32)
        self.observation_space = gymnasium.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.single_action_space = self.action_space = gymnasium.spaces.Box(-1, 1, (self.num_envs,))
        self.first, self.steps = first_observations, iter(steps)

    def reset(self, seed=None, options=None):
        return self.first.copy(), {}

    def step(self, actions):
        return next(self.steps)


def record(vec, actions):
    first, _ = vec.reset(seed=3)
    first = first.copy()
    steps = []
    for action in actions:
        obs, rewards, terminals, truncations, _ = vec.step(action)
        steps.append((obs.copy(), rewards.astype(np.float64), terminals.copy(), truncations.copy(), {}))
    return first, steps


def pendulums(num_envs=4, backend="serial"):
    return puffercore.vector.make(lambda: gymnasium.make("Pendulum-v1"), num_envs, backend=backend, seed=3)


def test_same_numbers_as_gymnasium_wrappers_on_the_same_data():
    """Pendulum: episodes end by truncation only (200 steps), where both define the
    discounted return alike; 450 steps cross two episode ends."""
    actions = np.random.default_rng(0).uniform(-2, 2, (450, 4, 1)).astype(np.float32)
    raw = pendulums()
    first, steps = record(raw, actions)
    raw.close()
    assert any(step[3].any() for step in steps) and not any(step[2].any() for step in steps)

    modes = gymnasium.vector.AutoresetMode
    observation_reference = gymnasium.wrappers.vector.NormalizeObservation(Replay(first, steps, modes.NEXT_STEP))
    reward_reference = gymnasium.wrappers.vector.NormalizeReward(Replay(first, steps, modes.SAME_STEP), gamma=0.97)
    expected_first, _ = observation_reference.reset()
    reward_reference.reset()
    normalized = Normalize(pendulums(), gamma=0.97, clip_observations=None, clip_rewards=None)
    got_first, _ = normalized.reset(seed=3)
    np.testing.assert_allclose(got_first, expected_first, rtol=1e-6, atol=1e-6)
    for action in actions:
        expected_observations = observation_reference.step(None)[0]
        expected_rewards = reward_reference.step(None)[1]
        observations, rewards = normalized.step(action)[:2]
        np.testing.assert_allclose(observations, expected_observations, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(rewards, expected_rewards, rtol=1e-5, atol=1e-6)
    observation_rms = observation_reference.obs_rms  # accumulated in float32 there, float64 here
    np.testing.assert_allclose(normalized.observation_stats.mean, observation_rms.mean, rtol=1e-5)
    np.testing.assert_allclose(normalized.observation_stats.var, observation_rms.var, rtol=1e-5)
    np.testing.assert_allclose(normalized.return_stats.var, reward_reference.return_rms.var, rtol=1e-5)
    normalized.close()


def test_discounted_return_restarts_after_termination_and_truncation():
    vec = Normalize(puffercore.vector.make(CartPole, 2, backend="serial", seed=0), observations=False, gamma=0.5,
                    clip_rewards=None)
    vec.reset(seed=0)
    returns = np.zeros(2)
    samples = []
    for _ in range(60):  # pushing right: every pole falls within about 10 steps
        _, rewards, terminals, truncations, _ = vec.step(np.ones(2, np.int32))
        returns = returns * 0.5 + 1.0  # CartPole's raw reward is 1 per step
        samples.append(returns.copy())
        returns[terminals | truncations] = 0.0
    assert vec.discounted_returns.max() < 2.0  # restarted, never the sum of episodes
    expected = RunningMeanStd()
    expected.update(np.concatenate(samples))
    np.testing.assert_allclose(vec.return_stats.var, expected.var, rtol=1e-9)
    vec.close()


class RawCopies:
    """A vector env proxy that keeps copies of each recv's raw observations and final
    observations, before Normalize rewrites them in place."""

    def __init__(self, vec):
        self.vec = vec

    def __getattr__(self, name):
        return getattr(self.vec, name)

    def recv(self):
        batch = self.vec.recv()
        self.observations, self.final_observations_before = batch[0].copy(), batch.final_observations.copy()
        return batch


@pytest.mark.parametrize("backend, num_workers, batch_size", [("threads", 2, 4), ("processes", 2, 4), ("serial", None, 4)])
def test_staggered_batches_and_final_observations(backend, num_workers, batch_size):
    """Every backend, staggered: a batch's observations are normalized in place with the
    statistics after its update, and so are the final observations of its ended rows."""
    creator = CartPole if backend == "threads" else (lambda: gymnasium.make("CartPole-v1"))
    raw = RawCopies(puffercore.vector.make(creator, 8, backend=backend, num_workers=num_workers,
                                           batch_size=batch_size, seed=5))
    vec = Normalize(raw, rewards=False, clip_observations=None)
    vec.async_reset(seed=5)
    ended = 0
    for step in range(80):
        batch = vec.recv()
        obs, _, terminals, truncations, _, env_ids, _ = batch
        stats = vec.observation_stats
        scale = np.sqrt(stats.var + 1e-8)
        np.testing.assert_allclose(obs, (raw.observations - stats.mean) / scale, rtol=1e-5, atol=1e-5)
        done = terminals | truncations
        ended += done.sum()
        np.testing.assert_allclose(batch.final_observations[done],
                                   (raw.final_observations_before[done] - stats.mean) / scale, rtol=1e-5, atol=1e-5)
        vec.send(np.full(len(env_ids), step % 2, np.int32))
    assert ended > 0
    vec.close()


def test_freeze_state_dict_and_errors():
    vec = Normalize(puffercore.vector.make(CartPole, 4, backend="serial", seed=0))
    vec.reset(seed=0)
    for _ in range(10):
        vec.step(np.zeros(4, np.int32))
    state = vec.state_dict()
    vec.freeze()
    for _ in range(10):
        vec.step(np.zeros(4, np.int32))
    assert vec.state_dict()["observations"]["count"] == state["observations"]["count"]
    other = Normalize(puffercore.vector.make(CartPole, 2, backend="serial", seed=1))
    other.load_state_dict(state)
    np.testing.assert_array_equal(other.observation_stats.var, state["observations"]["var"])
    assert other.return_stats.count == state["returns"]["count"]
    with pytest.raises(ValueError, match="lacks returns statistics"):
        Normalize(other.vec, rewards=True).load_state_dict({"observations": state["observations"]})
    from puffercore.ocean import Snake

    with pytest.raises(ValueError, match="needs float observations, got uint8"):
        Normalize(puffercore.vector.make(Snake, 1, backend="serial"))
    with pytest.raises(ValueError, match="gamma must be in"):
        Normalize(other.vec, gamma=2.0)
    vec.close()
    other.close()


def test_ppo_checkpoints_restore_normalization_bitwise(tmp_path):
    config = ppo.PPOConfig(num_envs=4, horizon=32, minibatch_size=64, update_epochs=1, hidden_size=16,
                           total_timesteps=4 * 32 * 3, quiet=True, tensorboard=False, backend="serial",
                           norm_obs=True, norm_reward=True, run_dir=str(tmp_path / "run"))
    trainer = ppo.train(config, "gymnasium:Pendulum-v1")
    saved = checkpoint.load(tmp_path / "run" / run.CHECKPOINT_NAME)
    assert saved["normalize"]["observations"]["count"] > 4 * 32 * 3
    restored = ppo.Trainer("gymnasium:Pendulum-v1", dataclasses.replace(config, run_dir=str(tmp_path / "probe")))
    restored.load_state_dict(saved)
    for name in ("observations", "returns"):
        for key, value in trainer.vec.state_dict()[name].items():
            np.testing.assert_array_equal(restored.vec.state_dict()[name][key], value)
    restored.close()
    returns = ppo.evaluate(str(tmp_path / "run"), episodes=1)  # evaluation with the frozen statistics
    assert len(returns) == 1 and np.isfinite(returns[0])
    assert torch.isfinite(trainer.rollout["reward"]).all()
    assert os.path.isfile(tmp_path / "run" / "metrics.csv")


def test_synchronize_merges_each_process_once():
    """Two Normalize (as two ranks would hold) fed different data: after synchronize both
    hold the statistics of all the data, and a second synchronize adds only news."""
    ranks = [Normalize(puffercore.vector.make(CartPole, 2, backend="serial", seed=seed), rewards=False)
             for seed in (0, 1)]
    everything = RunningMeanStd((4,))
    for vec in ranks:
        vec.vec.reset(seed=None)
    for _ in range(2):
        for vec in ranks:
            for _ in range(7):
                obs = vec.vec.step(np.ones(2, np.int32))[0]  # raw, fed to this rank's statistics
                vec.observation_stats.update(obs)
                everything.update(obs)
        deltas = [vec.observation_stats.moments() - vec._synced["observations"] for vec in ranks]
        for vec in ranks:  # an all-reduce: every rank gets the sum of every rank's news
            vec.synchronize(lambda _: deltas[0] + deltas[1])
        for vec in ranks:
            np.testing.assert_allclose(vec.observation_stats.mean, everything.mean, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(vec.observation_stats.var, everything.var, rtol=1e-7, atol=1e-12)
            assert vec.observation_stats.count == pytest.approx(everything.count)
    for vec in ranks:
        vec.close()


# ---- frame stacking -------------------------------------------------------------------------
def test_frame_stack_matches_gymnasium_frame_stack_observation():
    from puffercore.seeding import derive_seed
    from puffercore.transforms import FrameStack

    vec = FrameStack(puffercore.vector.make(lambda: gymnasium.make("CartPole-v1"), 1, backend="serial", seed=0), 3)
    reference = gymnasium.wrappers.FrameStackObservation(gymnasium.make("CartPole-v1"), 3, padding_type="reset")
    obs, _ = vec.reset(seed=5)
    expected, _ = reference.reset(seed=derive_seed(5, 0))  # sub-env 0's seed
    assert vec.single_observation_space.shape == (12,)
    np.testing.assert_array_equal(obs[0], expected.ravel())
    ends = 0
    for step in range(200):
        obs, _, terminals, truncations, _ = vec.step(np.array([step % 2]))
        expected, _, terminated, truncated, _ = reference.step(step % 2)
        if terminated or truncated:  # our final stack is the wrapper's last observation
            ends += 1
            np.testing.assert_array_equal(vec.final_stacks[0], expected.ravel())
            expected, _ = reference.reset()
        np.testing.assert_array_equal(obs[0], expected.ravel())
    assert ends >= 3
    vec.close()


def test_frame_stack_staggered_batches_match_the_synchronous_stacks():
    """Each env's sequence of stacks (and of final stacks) is the same whether its
    batches come synchronously or staggered from the threads backend: envs step in
    their own order, with actions that depend only on the env and its step count."""
    from puffercore.transforms import FrameStack

    def sequences(batch_size):
        vec = FrameStack(puffercore.vector.make(CartPole, 8, backend="threads", num_workers=2, batch_size=batch_size,
                                                seed=7), 4)
        vec.async_reset(seed=7)
        counts = np.zeros(8, np.int64)
        seen = {env: [] for env in range(8)}
        while counts.min() < 40:
            batch = vec.recv()
            ended = batch.terminals | batch.truncations
            for position, env in enumerate(batch.env_ids):
                final = batch.final_observations[position].copy() if ended[position] else None
                seen[env].append((batch.observations[position].copy(), final))
            counts[batch.env_ids] += 1
            vec.send(((counts[batch.env_ids] + batch.env_ids) % 2).astype(np.int32))
        vec.close()
        return {env: steps[:40] for env, steps in seen.items()}

    synchronous, staggered = sequences(None), sequences(4)
    for env in range(8):
        for (obs_a, final_a), (obs_b, final_b) in zip(synchronous[env], staggered[env]):
            np.testing.assert_array_equal(obs_a, obs_b)
            assert (final_a is None) == (final_b is None)
            if final_a is not None:
                np.testing.assert_array_equal(final_a, final_b)
                assert not np.array_equal(final_a, obs_a)


def test_frame_stack_errors_and_ppo(tmp_path):
    from puffercore.transforms import FrameStack

    with pytest.raises(ValueError, match="frames must be an int >= 2"):
        FrameStack(puffercore.vector.make(CartPole, 2, backend="serial"), 1)
    with pytest.raises(ValueError, match="frame stacking needs flat observation rows of one dtype"):
        FrameStack(puffercore.vector.make(ByteRowsWithMask, 2, backend="serial"), 2)
    config = ppo.PPOConfig(num_envs=4, horizon=16, minibatch_size=32, hidden_size=16, total_timesteps=4 * 16 * 2,
                           quiet=True, tensorboard=False, backend="threads", frame_stack=3, norm_obs=True,
                           run_dir=str(tmp_path))
    trainer = ppo.train(config, "cartpole")
    assert trainer.rollout["obs"].shape == (4, 17, 12) and trainer.global_step == 128
    assert len(ppo.evaluate(str(tmp_path), episodes=2)) == 2  # evaluation stacks frames the same way


class MaskInTheMiddle(gymnasium.Env):
    """Random float observations whose action mask lies between two other leaves
    (Dict keys sort "a" < "action_mask" < "b"), so its columns are neither the row's
    first nor its last; episodes end every 5 steps."""

    observation_space = gymnasium.spaces.Dict({
        "a": gymnasium.spaces.Box(-5, 5, (2,), np.float32), "action_mask": gymnasium.spaces.Box(0, 1, (3,), np.float32),
        "b": gymnasium.spaces.Box(-5, 5, (2,), np.float32)})
    action_space = gymnasium.spaces.Discrete(3)

    def observation(self):
        values = {key: (self.np_random.uniform(-5, 5, (2,)) * [1, 3] + 2).astype(np.float32) for key in "ab"}
        mask = (self.np_random.random(3) < 0.5).astype(self.observation_space["action_mask"].dtype)
        mask[self.np_random.integers(3)] = 1
        return {**values, "action_mask": mask}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return self.observation(), {}

    def step(self, action):
        self.steps += 1
        return self.observation(), 1.0, self.steps == 5, False, {}


class ByteRowsWithMask(MaskInTheMiddle):
    """A MultiBinary (int8) mask beside float32 leaves: rows of raw bytes."""

    observation_space = gymnasium.spaces.Dict({**MaskInTheMiddle.observation_space.spaces,
                                               "action_mask": gymnasium.spaces.MultiBinary(3)})


def test_normalize_leaves_the_action_mask_bit_identical_and_normalizes_the_rest():
    """The same episodes with and without Normalize: the mask's columns (in the middle of
    the row) keep the env's bits, in observations and final observations, and the other
    columns are normalized by statistics of those columns alone."""
    actions = np.random.default_rng(0).integers(0, 3, (12, 4)).astype(np.int32)
    raw, normalized = (puffercore.vector.make(MaskInTheMiddle, 4, backend="serial", seed=3) for _ in range(2))
    normalized = Normalize(normalized, rewards=False)
    mask, others = np.arange(2, 5), np.r_[0:2, 5:7]
    stats = RunningMeanStd((4,))
    for step, action in enumerate([None, *actions]):
        if action is None:
            expected, got = raw.reset(seed=1)[0], normalized.reset(seed=1)[0]
        else:
            expected, got = raw.step(action)[0], normalized.step(action)[0]
            ended = raw.terminals
            assert ended.any() == (step % 5 == 0)
            np.testing.assert_array_equal(normalized.final_observations[ended][:, mask].view(np.uint32),
                                          raw.final_observations[ended][:, mask].view(np.uint32))
        np.testing.assert_array_equal(got[:, mask].view(np.uint32), expected[:, mask].view(np.uint32))
        stats.update(expected[:, others])
        np.testing.assert_allclose(got[:, others], (expected[:, others] - stats.mean) / np.sqrt(stats.var + 1e-8),
                                   rtol=1e-5, atol=1e-6)
    assert normalized.observation_stats.mean.shape == (4,)
    with pytest.raises(ValueError, match="statistics of 7 values do not fit these of 4"):  # a whole row's
        normalized.load_state_dict({"observations": RunningMeanStd((7,)).state_dict()})
    raw.close()
    normalized.close()


def test_frame_stack_stacks_the_observations_and_keeps_the_newest_action_mask():
    from puffercore.transforms import FrameStack

    raw = puffercore.vector.make(MaskInTheMiddle, 2, backend="serial", seed=3)
    stacked = FrameStack(puffercore.vector.make(MaskInTheMiddle, 2, backend="serial", seed=3), 3)
    assert [leaf.path for leaf in stacked.observation_tree.leaves] == [("action_mask",), ("frames",)]
    assert stacked.single_observation_space.shape == (3 + 3 * 4,)
    history = [raw.reset(seed=0)[0][:, [0, 1, 5, 6]].copy()] * 3
    observations, _ = stacked.reset(seed=0)
    for step in range(8):
        views = stacked.observation_tree.unflatten(observations)
        np.testing.assert_array_equal(views["action_mask"], raw.observations[:, 2:5])
        np.testing.assert_array_equal(views["frames"], np.concatenate(history[-3:], axis=1))
        action = np.full(2, step % 3, np.int32)
        raw.step(action)
        observations = stacked.step(action)[0]
        if raw.terminals.any():  # a new episode starts from its first observation, repeated
            final = stacked.observation_tree.unflatten(stacked.final_stacks)
            np.testing.assert_array_equal(final["action_mask"], raw.final_observations[:, 2:5])
            np.testing.assert_array_equal(final["frames"][:, -4:], raw.final_observations[:, [0, 1, 5, 6]])
            history = [raw.observations[:, [0, 1, 5, 6]].copy()] * 3
        else:
            history.append(raw.observations[:, [0, 1, 5, 6]].copy())
    raw.close()
    stacked.close()


@pytest.mark.parametrize("frame_stack", [1, 2])
def test_ppo_trains_connect4_with_normalized_observations_and_legal_moves_only(tmp_path, frame_stack):
    """`puffercore train connect4 --train.norm-obs`: the policy masks with the env's mask
    (an illegal move would raise), through frame stacking too."""
    config = ppo.PPOConfig.for_env("connect4", num_envs=64, horizon=16, minibatch_size=256, update_epochs=1,
                                   total_timesteps=64 * 16 * 4, norm_obs=True, frame_stack=frame_stack, quiet=True,
                                   tensorboard=False, run_dir=str(tmp_path))
    trainer = ppo.train(config, "connect4")
    assert trainer.global_step == 64 * 16 * 4
    mask = trainer.vec.observation_tree.leaf("action_mask")
    assert trainer.vec.observation_stats.mean.size == trainer.vec.single_observation_space.shape[0] - 7
    masks = trainer.rollout["obs"][..., mask.start:mask.stop]
    assert set(torch.unique(masks).tolist()) <= {0.0, 1.0}


@pytest.mark.parametrize("transform, hint", [("Normalize", "state_dict"), ("FrameStack", "new FrameStack")])
def test_transforms_refuse_copies_and_pickles_by_name(transform, hint):
    """A transform wraps a running vector env (its workers, its buffers): copy.copy,
    copy.deepcopy and pickle raise a TypeError saying what to do, not a RecursionError."""
    from puffercore import transforms

    vec = puffercore.vector.make(lambda: gymnasium.make("CartPole-v1"), 2, backend="serial", seed=0)
    wrapped = transforms.Normalize(vec) if transform == "Normalize" else transforms.FrameStack(vec, 2)
    for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match=f"a {transform} cannot be copied or pickled.*{hint}"):
            attempt(wrapped)
    wrapped.reset(seed=0)  # still works
    wrapped.close()
