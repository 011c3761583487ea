"""The contract every vector backend meets. Later backends join by adding their name to
CONTRACT_BACKENDS; the serial backend is the reference the others are compared with."""

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

import puffercore.vector
from puffercore.emulation import GymnasiumEnv
from puffercore.env import Buffers, PufferEnv, check_seed, derive_seed
from puffercore.testing import CountingEnv
from puffercore.vector import merge_infos

CONTRACT_BACKENDS = ["serial", "processes"]


@pytest.fixture(params=CONTRACT_BACKENDS)
def backend(request, monkeypatch):
    # The envs of this suite are lambdas and test-module classes, which only "fork"
    # hands to worker processes (spawn pickles the creator).
    monkeypatch.setattr(puffercore.vector.processes, "DEFAULT_START_METHOD", "fork")
    return request.param


class Walkers(PufferEnv):
    """A PufferEnv of `num_envs` sub-envs with two agents (rows) each: both walk on a line
    (actions -1/0/+1 as 0/1/2), reward -|position|/10; a sub-env terminates when either
    agent is 4 away from the origin and truncates after 15 steps. Seeded per sub-env."""

    def __init__(self, num_envs=2, buffers=None):
        self.num_envs, self.num_agents = num_envs, 2 * num_envs
        self.single_observation_space = spaces.Box(-20, 20, (3,), np.float32)
        self.single_action_space = spaces.Discrete(3)
        self._init_buffers(buffers)
        self.rngs = [None] * num_envs
        self.closed = 0

    def reset(self, seed=None, options=None):
        seed = check_seed(seed)
        for j in range(self.num_envs):
            if seed is not None or self.rngs[j] is None:
                self.rngs[j] = np.random.default_rng(None if seed is None else derive_seed(seed, self.env_index_base + j))
            self._start(j)
        self.rewards[:], self.terminals[:], self.truncations[:] = 0, False, False
        self.episodes = []
        return self.observations, {}

    def _start(self, j):
        self.positions = getattr(self, "positions", np.zeros(self.num_agents))
        self.steps = getattr(self, "steps", np.zeros(self.num_envs, int))
        self.positions[2 * j : 2 * j + 2] = self.rngs[j].integers(-2, 3, 2)
        self.steps[j] = 0
        self._observe(j, self.observations)

    def _observe(self, j, out):
        rows = slice(2 * j, 2 * j + 2)
        out[rows, 0] = self.positions[rows]
        out[rows, 1] = self.positions[rows][::-1]
        out[rows, 2] = self.steps[j]

    def step(self, actions):
        self._write_actions(actions)
        self.positions += self.actions - 1
        self.rewards[:] = -np.abs(self.positions) / 10
        self.steps += 1
        info = {}
        for j in range(self.num_envs):
            rows = slice(2 * j, 2 * j + 2)
            self.terminals[rows] = np.abs(self.positions[rows]).max() >= 4
            self.truncations[rows] = not self.terminals[2 * j] and self.steps[j] >= 15
            if self.terminals[2 * j] or self.truncations[2 * j]:
                self._observe(j, self.final_observations)
                info = merge_infos([info, {"episode_length": float(self.steps[j]), "episodes": 1.0}])
                self._start(j)
            else:
                self._observe(j, self.observations)
        return self.observations, self.rewards, self.terminals, self.truncations, info

    def close(self):
        self.closed += 1


CREATORS = {
    "cartpole": lambda: gymnasium.make("CartPole-v1", max_episode_steps=20),
    "dict_obs": lambda: gymnasium.wrappers.TimeAwareObservation(
        gymnasium.make("CartPole-v1", max_episode_steps=20), flatten=False
    ),
    "walkers": Walkers,
}


@pytest.fixture(params=CREATORS)
def creator(request):
    return CREATORS[request.param]


def policy(env_ids, steps, rows_per_env, action_space):
    """Deterministic actions from (env id, that env's step count), whatever the batching."""
    ids = np.repeat(env_ids, rows_per_env)
    counts = np.repeat(steps[env_ids], rows_per_env)
    rows = np.tile(np.arange(rows_per_env), len(env_ids))
    return ((ids * 7 + counts * 3 + rows) % action_space.n).astype(np.int32)


def rollout(vec, num_envs, num_steps):
    """Per-env lists of (obs, reward, terminal, truncation) copies, via send/recv."""
    rows_per_env = vec.num_agents // num_envs
    steps = np.zeros(num_envs, int)
    trajectories = [[] for _ in range(num_envs)]
    vec.async_reset(seed=5)
    for _ in range(num_steps * num_envs // vec.batch_size):
        obs, rew, term, trunc, _, env_ids, _ = vec.recv()
        for k, env_id in enumerate(env_ids):
            rows = slice(k * rows_per_env, (k + 1) * rows_per_env)
            trajectories[env_id].append((obs[rows].copy(), rew[rows].copy(), term[rows].copy(), trunc[rows].copy()))
        vec.send(policy(env_ids, steps, rows_per_env, vec.single_action_space))
        steps[env_ids] += 1
    return trajectories


def test_shapes_dtypes_and_views(backend, creator):
    with puffercore.vector.make(creator, 4, backend=backend, batch_size=2) as vec:
        rows = vec.num_agents
        assert rows == 4 * (4 if creator is Walkers else 1)
        assert vec.num_envs == 4 * (2 if creator is Walkers else 1)
        vec.async_reset(seed=0)
        obs, rew, term, trunc, info, env_ids, masks = vec.recv()
        assert obs.shape == (rows // 2, *vec.single_observation_space.shape)
        assert obs.dtype == vec.single_observation_space.dtype
        assert (rew.dtype, term.dtype, trunc.dtype, masks.dtype) == (np.float32, np.bool_, np.bool_, np.bool_)
        assert rew.shape == term.shape == trunc.shape == masks.shape == (rows // 2,)
        assert env_ids.tolist() == [0, 1] and info == {} and masks.all()
        for result, buffer in [(obs, vec.observations), (rew, vec.rewards), (term, vec.terminals), (masks, vec.masks)]:
            assert np.shares_memory(result, buffer)
        vec.observations[0] = 0
        assert not obs[0].any()


def test_sub_envs_write_straight_into_the_vector_buffers(creator):
    with puffercore.vector.make(creator, 3) as vec:
        rows_per_env = vec.num_agents // 3
        for index, env in enumerate(vec.envs):
            assert isinstance(env, PufferEnv)
            for name in ("observations", "final_observations", "actions", "rewards", "terminals", "truncations"):
                sub, whole = getattr(env, name), getattr(vec, name)
                assert np.shares_memory(sub, whole[index * rows_per_env : (index + 1) * rows_per_env])


def test_matches_independent_envs_step_for_step(backend):
    """Vector rows equal single GymnasiumEnvs given the same per-index seeds and actions,
    including same-step autoreset and final observations."""
    make_env = CREATORS["cartpole"]
    singles = [GymnasiumEnv(make_env) for _ in range(3)]
    for index, env in enumerate(singles):
        env.env_index_base = index
        env.reset(seed=9)
    with puffercore.vector.make(make_env, 3, backend=backend, seed=9) as vec:
        obs, _ = vec.reset()
        np.testing.assert_array_equal(obs, np.concatenate([env.observations for env in singles]))
        rng = np.random.default_rng(0)
        episodes = 0
        for _ in range(60):
            actions = rng.integers(0, 2, 3).astype(np.int32)
            obs, rew, term, trunc, info = vec.step(actions)
            expected = [env.step(actions[i : i + 1]) for i, env in enumerate(singles)]
            for part, index in [(obs, 0), (rew, 1), (term, 2), (trunc, 3)]:
                np.testing.assert_array_equal(part, np.concatenate([result[index] for result in expected]))
            done = term | trunc
            np.testing.assert_array_equal(
                vec.final_observations[done], np.concatenate([env.final_observations for env in singles])[done]
            )
            assert info.get("episodes", 0) == done.sum()
            episodes += done.sum()
        assert episodes > 3 and vec.truncations.dtype == np.bool_


def test_autoreset_keeps_final_observations(backend):
    with puffercore.vector.make(CREATORS["walkers"], 2, backend=backend) as vec:
        obs, _ = vec.reset(seed=1)
        for _ in range(30):
            obs, rew, term, trunc, info = vec.step(np.full(vec.num_agents, 2, np.int32))
            done = term | trunc
            if done.any():
                # Fresh episodes start at step 0 near the origin; finals show the walk's end.
                assert (obs[done, 2] == 0).all() and (np.abs(vec.final_observations[done, :2]).max(axis=1) >= 4).all()
                assert info["episodes"] == done.sum() / 2
                return
    pytest.fail("no episode ended")


def test_same_seed_same_trajectories(backend, creator):
    runs = []
    for _ in range(2):
        with puffercore.vector.make(creator, 4, backend=backend) as vec:
            runs.append(rollout(vec, 4, 30))
    for first, second in zip(*runs):
        for a, b in zip(first, second):
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x, y)


def test_sub_env_indices_get_different_episodes(backend, creator):
    with puffercore.vector.make(creator, 4, backend=backend) as vec:
        obs, _ = vec.reset(seed=3)
        rows = obs.reshape(4, -1)
        assert len({row.tobytes() for row in rows}) == 4


def test_trajectories_do_not_depend_on_batch_size(backend, creator):
    by_batch = {}
    for batch_size in (4, 2, 1):
        with puffercore.vector.make(creator, 4, backend=backend, batch_size=batch_size) as vec:
            by_batch[batch_size] = rollout(vec, 4, 25)
    for batch_size in (2, 1):
        for env_id in range(4):
            for a, b in zip(by_batch[4][env_id], by_batch[batch_size][env_id]):
                for x, y in zip(a, b):
                    np.testing.assert_array_equal(x, y)


def test_nested_vectors_match_a_flat_one(backend):
    """Seeding by global sub-env index: 3 serial vectors of 2 envs inside one vector step
    exactly like one vector of 6 envs."""

    def inner(buffers=None):
        return puffercore.vector.Serial(CREATORS["cartpole"], 2, buffers=buffers)

    with puffercore.vector.make(inner, 3, backend=backend) as nested, puffercore.vector.make(
        CREATORS["cartpole"], 6, backend=backend
    ) as flat:
        assert (nested.num_envs, nested.num_agents) == (6, 6)
        np.testing.assert_array_equal(nested.reset(seed=2)[0], flat.reset(seed=2)[0])
        for step in range(40):
            actions = (np.arange(6) + step) % 2
            for got, want in zip(nested.step(actions), flat.step(actions)):
                if isinstance(want, dict):
                    assert got == pytest.approx(want)
                else:
                    np.testing.assert_array_equal(got, want)


def test_send_recv_order(backend):
    with puffercore.vector.make(CREATORS["cartpole"], 6, backend=backend, batch_size=2) as vec:
        vec.async_reset(seed=0)
        order = []
        for step in range(9):
            obs, rew, *_, env_ids, _ = vec.recv()
            order.append(env_ids.tolist())
            # The first recv of each batch after a reset carries reset rows.
            assert (rew == 0).all() if step < 3 else (rew == 1).all()
            vec.send(np.zeros(2, np.int32))
        if backend == "serial":
            assert order == [[0, 1], [2, 3], [4, 5]] * 3
        else:  # parallel backends return whichever batch is ready first
            assert order[:3] == [[0, 1], [2, 3], [4, 5]]
            assert all(batch in ([0, 1], [2, 3], [4, 5]) for batch in order)


def test_reset_info_and_merged_infos(backend):
    assert merge_infos([]) == {}
    merged = merge_infos([{"r": 1.0, "episodes": 1.0}, {}, {"r": 4.0, "x": 2.0, "episodes": 3.0}])
    assert merged == {"r": (1.0 + 12.0) / 4, "x": 2.0, "episodes": 4.0}
    with puffercore.vector.make(CREATORS["cartpole"], 2, backend=backend) as vec:
        assert vec.reset(seed=0)[1] == {}


def test_close_is_idempotent(backend):
    vec = puffercore.vector.make(CREATORS["walkers"], 2, backend=backend)
    vec.reset()
    vec.close()
    vec.close()
    if backend == "serial":
        assert [env.closed for env in vec.envs] == [1, 1]
    with pytest.raises(RuntimeError, match=r"step\(\) called on a closed vector env"):
        vec.step(np.zeros(vec.num_agents, np.int32))


# ------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "actions, error, match",
    [
        (np.zeros(3, np.int32), ValueError, r"actions must have shape \(4,\), got \(3,\)"),
        (np.zeros((4, 1), np.int32), ValueError, r"actions must have shape \(4,\), got \(4, 1\)"),
        (np.zeros(4, np.float32), TypeError, "actions must be integers for Discrete"),
        (np.array([0, 1, 2, 0], np.int32), ValueError, r"actions out of range for Discrete\(2\): actions\[2\] = 2"),
        (np.array([0, -1, 0, 0]), ValueError, r"actions\[1\] = -1"),
    ],
)
def test_bad_discrete_actions(backend, actions, error, match):
    with puffercore.vector.make(CREATORS["cartpole"], 4, backend=backend) as vec:
        vec.reset(seed=0)
        with pytest.raises(error, match=match):
            vec.step(actions)


def test_bad_continuous_actions(backend):
    with puffercore.vector.make(lambda: gymnasium.make("Pendulum-v1"), 2, backend=backend) as vec:
        vec.reset(seed=0)
        with pytest.raises(ValueError, match=r"actions must be finite, got actions\[1, 0\] = nan"):
            vec.step(np.array([[0.0], [np.nan]], np.float32))
        # A rejected batch changes nothing: the same rows still wait for their actions.
        with pytest.raises(ValueError, match=r"actions must have shape \(2, 1\)"):
            vec.step(np.zeros(2, np.float32))
        with pytest.raises(TypeError, match="actions must be numbers"):
            vec.step(np.array([["a"], ["b"]]))
        obs, *_ = vec.step(np.zeros((2, 1), np.float32))
        assert obs.shape == (2, 3)


def test_call_order_errors(backend):
    with puffercore.vector.make(CREATORS["cartpole"], 4, backend=backend, batch_size=2) as vec:
        with pytest.raises(RuntimeError, match=r"send\(\) called before reset\(\)"):
            vec.send(np.zeros(2, np.int32))
        with pytest.raises(RuntimeError, match=r"step\(\) needs batch_size == num_envs; with batch_size=2"):
            vec.step(np.zeros(4, np.int32))
        with pytest.raises(RuntimeError, match=r"reset\(\) needs batch_size == num_envs"):
            vec.reset()
        vec.async_reset(seed=0)
        with pytest.raises(RuntimeError, match=r"send\(\) needs a recv\(\) first"):
            vec.send(np.zeros(2, np.int32))
        vec.recv()
        vec.send(np.zeros(2, np.int32))
        with pytest.raises(RuntimeError, match=r"send\(\) needs a recv\(\) first"):
            vec.send(np.zeros(2, np.int32))
    with puffercore.vector.make(CREATORS["cartpole"], 2, backend=backend) as vec:
        with pytest.raises(RuntimeError, match=r"step\(\) called before reset\(\)"):
            vec.step(np.zeros(2, np.int32))
        with pytest.raises(RuntimeError, match=r"recv\(\) called with nothing pending"):
            vec.recv()


class FailsOnSecondStep(CountingEnv):
    """Env 0 raises on its second step only: a failure that a reset gets past."""

    def step(self, actions):
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls == 2 and self.env_index_base == 0:
            raise ValueError("failed on purpose at step 2")
        return super().step(actions)


def test_after_an_env_raised_every_call_says_to_reset(backend):
    """The first error is the env's own failure and says to reset; every call after it
    (step, send, recv) says which env raised and to reset; a reset makes it step again."""
    with puffercore.vector.make(FailsOnSecondStep, 2, backend=backend) as vec:
        vec.reset(seed=0)
        vec.step(np.zeros(2, np.int32))
        with pytest.raises((ValueError, RuntimeError), match="failed on purpose at step 2") as raised:
            vec.step(np.zeros(2, np.int32))
        notes = getattr(raised.value, "__notes__", [])  # the serial backend raises the env's own error
        assert "call reset() before stepping again" in "\n".join([str(raised.value), *notes])
        for method, call in (("step", lambda: vec.step(np.zeros(2, np.int32))),
                             ("send", lambda: vec.send(np.zeros(2, np.int32))), ("recv", vec.recv)):
            with pytest.raises(RuntimeError, match=rf"{method}\(\) after env 0 raised.*: call reset\(\) before "
                                                   r"stepping again"):
                call()
        vec.reset(seed=0)
        assert vec.step(np.zeros(2, np.int32))[0].shape == (2, 3)


class TextObservationEnv(gymnasium.Env):
    observation_space = spaces.Text(5)
    action_space = spaces.Discrete(2)


class MixedActionEnv(gymnasium.Env):
    observation_space = spaces.Discrete(2)
    action_space = spaces.Tuple((spaces.Discrete(2), spaces.Box(-1, 1)))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"num_envs": 0}, ValueError, "num_envs must be an int >= 1, got 0"),
        ({"num_envs": 2.5}, TypeError, "num_envs must be an int >= 1, got 2.5"),
        ({"num_envs": True}, TypeError, "num_envs must be an int >= 1, got True"),
        ({"batch_size": 0}, ValueError, "batch_size must be an int >= 1, got 0"),
        ({"batch_size": 3}, ValueError, "batch_size must divide num_envs=4, got 3"),
        ({"seed": -1}, ValueError, "seed must be a non-negative int or None, got -1"),
        ({"seed": "7"}, ValueError, "seed must be a non-negative int or None, got '7'"),
        ({"backend": "gpu"}, ValueError, r"backend must be one of \[.*'serial'.*\], got 'gpu'"),
        ({"backend": None}, ValueError, r"backend must be one of \[.*'serial'.*\], got None"),
        ({"env_creator": 5}, TypeError, "env_creator must be an env class or a function returning a new env"),
        ({"env_creator": lambda: "env"}, TypeError, "env_creator must return a puffercore PufferEnv, a gymnasium.Env"),
        ({"env_creator": TextObservationEnv}, TypeError, r"observation space is Text\(1, 5.*no fixed shape"),
        ({"env_creator": MixedActionEnv}, ValueError, "action space mixes discrete and continuous leaves"),
        ({"env_creator": lambda: Walkers()}, TypeError, "env_creator returns a PufferEnv, so it must accept buffers="),
    ],
)
def test_bad_make_arguments(backend, kwargs, error, match):
    arguments = {"env_creator": CREATORS["cartpole"], "num_envs": 4, "backend": backend, **kwargs}
    with pytest.raises(error, match=match):
        puffercore.vector.make(**arguments)


def test_serial_has_no_workers():
    with pytest.raises(ValueError, match="num_workers must be None or 1 for the serial backend, got 4"):
        puffercore.vector.make(CREATORS["cartpole"], 4, num_workers=4)


def test_bad_reset_seed(backend):
    with puffercore.vector.make(CREATORS["cartpole"], 2, backend=backend) as vec:
        with pytest.raises(ValueError, match="seed must be a non-negative int or None, got 1.5"):
            vec.reset(seed=1.5)


def test_sub_env_buffers_must_fit():
    buffers = Buffers.allocate(3, spaces.Box(-20, 20, (3,), np.float32), spaces.Discrete(3))
    with pytest.raises(ValueError, match=r"buffers.observations must have shape \(4, 3\)"):
        Walkers(num_envs=2, buffers=buffers)
