"""Test helpers for envs with the legal-action mask in the observation (Connect4, Azul):
read the masks, play random legal moves, record and compare trajectories."""

import numpy as np


def masks_of(env, observations):
    """The action masks of an observation batch, [rows, num_actions] (a copy)."""
    return env.observation_tree.unflatten(observations)["action_mask"].copy()


def random_legal_actions(masks, rng):
    """A uniformly random legal action per row."""
    return np.argmax(rng.random(masks.shape) * masks, axis=1).astype(np.int32)


def rollout(env, steps, seed):
    """Frames of `steps` steps of random legal moves drawn from `seed`: the first
    observations, then per step observations, rewards, terminals, final observations
    and info."""
    rng = np.random.default_rng(seed)
    observations, _ = env.reset(seed=seed)
    frames = [observations.copy()]
    for _ in range(steps):
        observations, rewards, terminals, _, info = env.step(random_legal_actions(masks_of(env, observations), rng))
        frames += [observations.copy(), rewards.copy(), terminals.copy(), env.final_observations.copy(), info]
    return frames


def assert_same_frames(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if isinstance(x, dict):
            assert x.keys() == y.keys() and all(np.isclose(x[k], y[k]) for k in x)
        else:
            np.testing.assert_array_equal(x, y)
