"""CartPole against gymnasium's CartPole-v1: every transition, and episode statistics."""

import gymnasium
import numpy as np
import pytest

from puffercore.ocean import CartPole

THETA_THRESHOLD = 12 * 2 * np.pi / 360


def gymnasium_next(reference, state, force):
    """gymnasium's dynamics applied to `state` with a push of `force` newtons."""
    reference.state = np.asarray(state, dtype=np.float64)
    reference.steps_beyond_terminated = None
    reference.force_mag = abs(float(force))
    obs, reward, terminated, _, _ = reference.step(1 if force > 0 else 0)
    return obs, reward, terminated


def near_threshold(state):
    return abs(abs(state[0]) - 2.4) < 1e-5 or abs(abs(state[2]) - THETA_THRESHOLD) < 1e-5


@pytest.mark.parametrize("continuous, balance", [(False, False), (True, False), (False, True)])
def test_every_transition_matches_gymnasium(continuous, balance):
    """Random pushes end episodes by termination; the balancing policy runs them into
    the 500-step truncation."""
    num_envs, steps = 16, 520 if balance else 300
    env = CartPole(num_envs=num_envs, seed=0, continuous=continuous)
    reference = gymnasium.make("CartPole-v1").unwrapped
    reference.reset(seed=0)
    rng = np.random.default_rng(0)
    obs, _ = env.reset()
    episode_steps = np.zeros(num_envs, dtype=np.int64)
    checked = ended = truncated = 0
    for _ in range(steps):
        if continuous:
            actions = rng.uniform(-1.5, 1.5, (num_envs, 1)).astype(np.float32)
            forces = 10.0 * np.clip(actions[:, 0], -1, 1)
        else:
            actions = lean_policy(obs, rng) if balance else random_policy(obs, rng)
            forces = np.where(actions == 1, 10.0, -10.0)
        previous = obs.copy()
        obs, rewards, terminals, truncations, _ = env.step(actions)
        episode_steps += 1
        np.testing.assert_array_equal(rewards, 1.0)
        np.testing.assert_array_equal(truncations, episode_steps == 500)
        for i in range(num_envs):
            done = terminals[i] or truncations[i]
            # the transition's next state: the kept final observation when the episode ended
            ours = env.final_observations[i] if done else obs[i]
            expected, reward, terminated = gymnasium_next(reference, previous[i], forces[i])
            np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)
            assert reward == 1.0
            if not near_threshold(expected):
                assert bool(terminals[i]) == terminated
            if done:
                assert np.all(np.abs(obs[i]) <= 0.05), "the new episode starts in U(-0.05, 0.05)"
                ended += 1
            checked += 1
        episode_steps[terminals | truncations] = 0
        truncated += int(truncations.sum())
    assert checked == num_envs * steps
    assert ended >= 100 or (balance and truncated > num_envs // 2)


def episode_lengths(policy, episodes, num_envs=256):
    """Lengths of the first `episodes` episodes puffercore's CartPole ends under `policy`."""
    env = CartPole(num_envs=num_envs, seed=1)
    obs, _ = env.reset()
    current = np.zeros(num_envs, dtype=np.int64)
    lengths = []
    rng = np.random.default_rng(1)
    while len(lengths) < episodes:
        obs, _, terminals, truncations, _ = env.step(policy(obs, rng))
        current += 1
        done = terminals | truncations
        lengths.extend(current[done])
        current[done] = 0
    return np.array(lengths[:episodes])


def gymnasium_episode_lengths(policy, episodes):
    env = gymnasium.make("CartPole-v1")
    rng = np.random.default_rng(2)
    lengths = []
    obs, _ = env.reset(seed=2)
    for _ in range(episodes):
        length, done = 0, False
        while not done:
            obs, _, terminated, truncated, _ = env.step(int(policy(obs[None], rng)[0]))
            length += 1
            done = terminated or truncated
        lengths.append(length)
        obs, _ = env.reset()
    return np.array(lengths)


def random_policy(obs, rng):
    return rng.integers(0, 2, len(obs), dtype=np.int32)


def lean_policy(obs, rng):
    """Push toward the side the pole falls to: episodes run to the 500-step limit."""
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int32)


def test_random_policy_episode_lengths_match_gymnasium():
    ours, theirs = episode_lengths(random_policy, 3000), gymnasium_episode_lengths(random_policy, 3000)
    standard_error = np.sqrt(ours.var() / len(ours) + theirs.var() / len(theirs))
    assert abs(ours.mean() - theirs.mean()) < 4 * standard_error, (ours.mean(), theirs.mean())
    assert abs(np.median(ours) - np.median(theirs)) <= 2
    assert ours.min() >= 8 and theirs.min() >= 8


def test_balancing_policy_is_truncated_at_500_like_gymnasium():
    ours, theirs = episode_lengths(lean_policy, 64, num_envs=64), gymnasium_episode_lengths(lean_policy, 8)
    assert ours.max() == theirs.max() == 500
    assert np.mean(ours == 500) > 0.9 and np.mean(theirs == 500) > 0.9
