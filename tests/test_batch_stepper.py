"""The vectors' batch path for gymnasium envs (BatchStepper): actions converted once per
batch into the space's own scalars, results written once per batch, and the same
guarantees as stepping each adapter alone: bad observations are named, an env that
raises is located, image-shaped rows land where the per-env writer puts them."""

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

import puffercore.vector
from puffercore.emulation import GymnasiumEnv
from puffercore.env import Buffers
from puffercore.vector.common import BatchStepper


class Recorder(gymnasium.Env):
    """Observations of `shape` and `dtype` filled with the step count; records the actions
    it gets; `bad_at` returns a wrong observation at that step; `fail_at` raises."""

    def __init__(self, shape=(2,), dtype=np.float32, action_dtype=np.int64, bad_at=None, bad=None, fail_at=None):
        self.observation_space = spaces.Box(0, 255, shape, dtype)
        self.action_space = spaces.Discrete(3, dtype=action_dtype)
        self.bad_at, self.bad, self.fail_at = bad_at, bad, fail_at
        self.actions, self.t = [], 0

    def _obs(self):
        return np.full(self.observation_space.shape, self.t, self.observation_space.dtype)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.actions.append(action)
        self.t += 1
        if self.t == self.fail_at:
            raise RuntimeError("failed on purpose")
        if self.t == self.bad_at:
            return self.bad, 1.0, False, False, {}
        return self._obs(), 1.0, self.t >= 4, False, {}


@pytest.mark.parametrize("action_dtype", [np.int64, np.int8])
def test_envs_get_numpy_scalars_of_their_action_space_dtype(action_dtype):
    with puffercore.vector.make(lambda: Recorder(action_dtype=action_dtype), 3) as vec:
        vec.reset(seed=0)
        vec.step(np.array([0, 1, 2], np.int32))
        got = [env.env.actions[0] for env in vec.envs]
    assert got == [0, 1, 2] and all(type(action) is np.dtype(action_dtype).type for action in got)


@pytest.mark.parametrize("bad,match", [
    (np.zeros(3, np.float32), r"observation does not fit Box"),
    (np.full(2, 0.5, np.float64), r"observation does not fit Box\(0, 255, \(2,\), uint8\)"),
    ("text", r"observation does not fit"),
])
def test_a_bad_observation_in_a_batch_is_named(bad, match):
    # The float64 one only misfits uint8 rows (same_kind casting refuses float -> uint8).
    dtype = np.uint8 if isinstance(bad, np.ndarray) and bad.dtype == np.float64 else np.float32
    creators = [lambda: Recorder(dtype=dtype), lambda: Recorder(dtype=dtype, bad_at=2, bad=bad)]
    with puffercore.vector.make(lambda: creators.pop(0)() if creators else Recorder(dtype=dtype), 2) as vec:
        vec.reset(seed=0)
        vec.step(np.zeros(2, np.int32))
        with pytest.raises(ValueError, match=match):
            vec.step(np.zeros(2, np.int32))


def test_the_env_that_raised_is_located():
    envs = [GymnasiumEnv(Recorder(fail_at=None if i != 2 else 1)) for i in range(4)]
    buffers = Buffers.allocate(4, envs[0].single_observation_space, envs[0].single_action_space)
    envs = [GymnasiumEnv(env.env, buffers=buffers.rows(i, i + 1)) for i, env in enumerate(envs)]
    for env in envs:
        env.reset(seed=0)
    step = BatchStepper(envs, buffers)
    with pytest.raises(RuntimeError, match="failed on purpose"):
        step()
    assert step.failed == 2


def test_image_rows_match_stepping_each_adapter_alone():
    def creator():
        return Recorder(shape=(3, 2), dtype=np.uint8)

    with puffercore.vector.make(creator, 3) as vec:
        singles = [GymnasiumEnv(creator()) for _ in range(3)]
        vec.reset(seed=0)
        for env in singles:
            env.reset(seed=0)
        ended = 0
        for step in range(9):
            actions = np.array([step % 3, 1, 2], np.int32)
            obs, rew, term, trunc, _ = vec.step(actions)
            for k, env in enumerate(singles):
                want = env.step(actions[k : k + 1])
                for got, expected in zip((obs, rew, term, trunc), want[:4]):
                    np.testing.assert_array_equal(got[k : k + 1], expected)
                np.testing.assert_array_equal(vec.final_observations[k : k + 1], env.final_observations)
            ended += term.sum()
        assert ended == 6  # every env ended two episodes of 4 steps
