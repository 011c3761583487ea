"""SpaceTree / ActionTree round trips, views and errors; the gymnasium adapter against
the wrapped env run side by side."""

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env
from gymnasium.vector.utils import concatenate, create_empty_array
from hypothesis import given, settings
from hypothesis import strategies as st

from puffercore.emulation import ActionTree, GymnasiumEnv, SpaceTree
from puffercore.env import GymnasiumView, derive_seed

BOX_DTYPES = [np.float16, np.float32, np.float64, np.bool_, np.uint8, np.int16, np.int32, np.int64]
shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


@st.composite
def boxes(draw):
    dtype = draw(st.sampled_from(BOX_DTYPES))
    low, high = {np.bool_: (0, 1), np.uint8: (0, 200)}.get(dtype, (-100, 100))
    return spaces.Box(low, high, draw(shapes), dtype)


discretes = st.builds(spaces.Discrete, st.integers(1, 9), start=st.integers(-5, 5))
multi_discretes = st.builds(
    lambda shape, top: spaces.MultiDiscrete(np.full(shape, top)), st.lists(st.integers(1, 3), min_size=1, max_size=2), st.integers(2, 7)
)
multi_binaries = st.builds(spaces.MultiBinary, st.integers(1, 5))
leaf_spaces = st.one_of(boxes(), discretes, multi_discretes, multi_binaries)
keys = st.text(alphabet="abcdxyz_", min_size=1, max_size=4)


def nested(leaves):
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, min_size=1, max_size=3).map(spaces.Tuple),
            st.dictionaries(keys, children, min_size=1, max_size=3).map(spaces.Dict),
        ),
        max_leaves=10,
    )


def assert_same_structure(got, want):
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want)
        for key in want:
            assert_same_structure(got[key], want[key])
    elif isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same_structure(g, w)
    else:
        got, want = np.asarray(got), np.asarray(want)  # Discrete actions come back as ints
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(space=nested(leaf_spaces), seed=st.integers(0, 2**31 - 1))
def test_flatten_unflatten_round_trip(space, seed):
    tree = SpaceTree(space)
    space.seed(seed)
    sample = space.sample()
    row = tree.flatten(sample)
    assert row.shape == tree.flat_space.shape and row.dtype == tree.flat_space.dtype
    if not tree.is_bytes:
        assert tree.flat_space.contains(row)
    assert_same_structure(tree.unflatten(row), sample)


@settings(max_examples=30, deadline=None)
@given(space=nested(leaf_spaces), seed=st.integers(0, 2**31 - 1))
def test_batched_flatten_matches_rows_and_views_share_memory(space, seed):
    tree = SpaceTree(space)
    space.seed(seed)
    samples = [space.sample() for _ in range(3)]
    batched = concatenate(space, samples, create_empty_array(space, 3))
    flat = tree.flatten(batched, np.zeros((3, tree.size), tree.dtype))
    for i, sample in enumerate(samples):
        np.testing.assert_array_equal(flat[i], tree.flatten(sample))
    views = tree.unflatten(flat)
    assert_same_structure(views, batched)
    for leaf in tree.leaves:
        view = leaf_of(views, leaf.path)
        assert np.shares_memory(view, flat)


def leaf_of(structure, path):
    for key in path:
        structure = structure[key]
    return structure


@settings(max_examples=30, deadline=None)
@given(space=nested(st.builds(spaces.Box, st.just(-3.0), st.just(3.0), shapes)), seed=st.integers(0, 2**31 - 1))
def test_float_rows_match_gymnasium_flatten(space, seed):
    """On Box-only trees both libraries lay leaves out in the same order and dtype."""
    space.seed(seed)
    sample = space.sample()
    np.testing.assert_array_equal(SpaceTree(space).flatten(sample), spaces.flatten(space, sample))


MIXED = spaces.Dict(
    {
        "image": spaces.Box(0, 255, (2, 3), np.uint8),
        "state": spaces.Tuple((spaces.Box(-1, 1, (3,), np.float64), spaces.Discrete(4))),
        "action_mask": spaces.MultiBinary(5),
        "vel": spaces.Box(-1, 1, (2,), np.float32),
    }
)


def test_mixed_dtypes_use_aligned_bytes():
    tree = SpaceTree(MIXED)
    assert tree.is_bytes and tree.dtype == np.uint8
    for leaf in tree.leaves:
        assert leaf.start % leaf.dtype.itemsize == 0
    assert tree.size % 8 == 0
    assert tree.leaf("state", 1).dtype == np.int64


def test_writing_through_views_changes_the_flat_buffer():
    tree = SpaceTree(MIXED)
    flat = np.zeros((4, tree.size), np.uint8)
    views = tree.unflatten(flat)
    views["state"][0][2] = [0.5, -0.25, 1.0]
    views["state"][1][3] = 3
    assert flat[[0, 1]].sum() == 0 and flat[2].any() and flat[3].any()
    np.testing.assert_array_equal(tree.unflatten(flat[2])["state"][0], [0.5, -0.25, 1.0])
    np.testing.assert_array_equal(tree.unflatten(flat.copy())["state"][1], [0, 0, 0, 3])


def test_torch_unflatten_is_a_view():
    tree = SpaceTree(MIXED)
    MIXED.seed(3)
    rows = np.stack([tree.flatten(MIXED.sample()) for _ in range(5)])
    tensor = torch.from_numpy(rows)
    views = tree.unflatten(tensor)
    numpy_views = tree.unflatten(rows)
    assert views["state"][0].dtype == torch.float64 and views["state"][0].shape == (5, 3)
    assert views["action_mask"].dtype == torch.int8 and views["action_mask"].shape == (5, 5)
    np.testing.assert_array_equal(views["state"][1].numpy(), numpy_views["state"][1])
    np.testing.assert_array_equal(views["image"].numpy(), numpy_views["image"])
    views["vel"][1] = torch.tensor([0.75, -0.5])
    np.testing.assert_array_equal(numpy_views["vel"][1], np.float32([0.75, -0.5]))


def test_torch_unflatten_single_dtype():
    space = spaces.Dict({"a": spaces.Box(-1, 1, (2, 2)), "b": spaces.Box(-1, 1, (3,))})
    tree = SpaceTree(space)
    flat = torch.arange(2 * tree.size, dtype=torch.float32).view(2, tree.size)
    views = tree.unflatten(flat)
    assert views["a"].shape == (2, 2, 2) and views["b"].tolist() == [[4, 5, 6], [11, 12, 13]]
    assert views["a"].data_ptr() == flat.data_ptr()


@pytest.mark.parametrize(
    "space",
    [
        spaces.Text(5),
        spaces.Dict({"ok": spaces.Discrete(2), "bad": spaces.Sequence(spaces.Discrete(2))}),
        spaces.Tuple((spaces.Box(0, 1), spaces.Graph(spaces.Box(0, 1), None))),
    ],
)
def test_unsupported_spaces_are_rejected(space):
    with pytest.raises(TypeError, match="no fixed shape; supported: Box"):
        SpaceTree(space)
    with pytest.raises(TypeError, match="action space.*no fixed shape"):
        ActionTree(space)


def test_empty_and_non_spaces_are_rejected():
    with pytest.raises(ValueError, match="has no elements"):
        SpaceTree(spaces.Tuple(()))
    with pytest.raises(TypeError, match="space must be a gymnasium.Space"):
        SpaceTree((4,))


def test_flatten_and_unflatten_name_bad_input():
    tree = SpaceTree(MIXED)
    MIXED.seed(0)
    sample = MIXED.sample()
    del sample["vel"]
    with pytest.raises(ValueError, match=r"observation\['vel'\] does not fit"):
        tree.flatten(sample)
    sample = MIXED.sample()
    sample["state"] = (np.zeros(4), 1)
    with pytest.raises(ValueError, match=r"observation\['state'\]\[0\] does not fit"):
        tree.flatten(sample)
    with pytest.raises(ValueError, match=rf"flat must have shape \[\.\.\., {tree.size}\] and dtype uint8"):
        tree.unflatten(np.zeros(tree.size, np.float32))
    with pytest.raises(ValueError, match="flat must have shape"):
        tree.unflatten(torch.zeros(tree.size + 1, dtype=torch.uint8))
    with pytest.raises(TypeError, match="out must be a numpy array, got Tensor"):
        tree.flatten(MIXED.sample(), torch.zeros(tree.size, dtype=torch.uint8))
    with pytest.raises(ValueError, match=rf"out must have shape \[\.\.\., {tree.size}\]"):
        tree.flatten(MIXED.sample(), np.zeros(3, np.uint8))
    with pytest.raises(TypeError, match="flat must be a numpy array or torch tensor"):
        tree.unflatten([0] * tree.size)
    with pytest.raises(KeyError, match="no leaf at path"):
        tree.leaf("missing")


discrete_leaves = st.one_of(discretes, multi_discretes, multi_binaries)


@settings(max_examples=40, deadline=None)
@given(space=nested(discrete_leaves), seed=st.integers(0, 2**31 - 1))
def test_discrete_actions_round_trip(space, seed):
    tree = ActionTree(space)
    space.seed(seed)
    action = space.sample()
    row = tree.flatten(action)
    assert tree.flat_space.contains(row.astype(tree.flat_space.dtype))
    assert_same_structure(tree.unflatten(row.astype(np.int32)), action)


@settings(max_examples=30, deadline=None)
@given(space=nested(st.builds(spaces.Box, st.just(-2.0), st.just(2.0), shapes)), seed=st.integers(0, 2**31 - 1))
def test_continuous_actions_round_trip(space, seed):
    tree = ActionTree(space)
    assert isinstance(tree.flat_space, spaces.Box) and tree.flat_space.dtype == np.float32
    space.seed(seed)
    action = space.sample()
    assert_same_structure(tree.unflatten(tree.flatten(action)), action)


def test_action_tree_shapes():
    assert ActionTree(spaces.Discrete(3, start=1)).flat_space == spaces.Discrete(3, start=1)
    tree = ActionTree(spaces.Tuple((spaces.Discrete(3, start=1), spaces.MultiBinary(2), spaces.MultiDiscrete([4, 5]))))
    assert tree.flat_space == spaces.MultiDiscrete([3, 2, 2, 4, 5], start=[1, 0, 0, 0, 0])
    box = ActionTree(spaces.Box(-1, 1, (2, 3), np.float64)).flat_space
    assert box.shape == (6,) and box.dtype == np.float32
    with pytest.raises(ValueError, match="mixes discrete and continuous leaves"):
        ActionTree(spaces.Dict({"move": spaces.Discrete(3), "aim": spaces.Box(-1, 1, (2,))}))


# ---------------------------------------------------------------- gymnasium adapter


def time_aware_cartpole():
    return gymnasium.wrappers.TimeAwareObservation(gymnasium.make("CartPole-v1", max_episode_steps=30), flatten=False)


class TurretEnv(gymnasium.Env):
    """Dict actions (discrete leaves only) over a Tuple/Dict observation."""

    observation_space = spaces.Tuple(
        (spaces.Dict({"heading": spaces.Discrete(4), "ammo": spaces.Box(0, 5, (1,), np.int64)}), spaces.MultiBinary(2))
    )
    action_space = spaces.Dict({"turn": spaces.Discrete(3, start=-1), "fire": spaces.MultiBinary(2)})

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.heading, self.ammo = int(self.np_random.integers(4)), 5
        return self._observation(np.zeros(2, np.int8)), {}

    def step(self, action):
        assert self.action_space.contains(action)
        self.heading = (self.heading + int(action["turn"])) % 4
        shots = int(action["fire"].sum())
        hit = shots > 0 and self.heading == 0 and self.ammo >= shots
        self.ammo = max(0, self.ammo - shots)
        return self._observation(action["fire"]), float(hit), self.ammo == 0, False, {"hits": float(hit)}

    def _observation(self, fired):
        return ({"heading": self.heading, "ammo": np.array([self.ammo])}, fired.astype(np.int8))


ADAPTER_ENVS = {
    "cartpole": lambda: gymnasium.make("CartPole-v1", max_episode_steps=30),
    "pendulum": lambda: gymnasium.make("Pendulum-v1", max_episode_steps=25),
    "dict_obs": time_aware_cartpole,
    "blackjack_tuple_obs": lambda: gymnasium.make("Blackjack-v1"),
    "dict_actions": TurretEnv,
}


@pytest.mark.parametrize("name", ADAPTER_ENVS)
def test_gymnasium_adapter_matches_the_wrapped_env(name):
    """The adapter and a plain copy of the env, seeded alike and given the same actions,
    agree step for step, across terminals, truncations and autoresets."""
    env, reference = GymnasiumEnv(ADAPTER_ENVS[name]), ADAPTER_ENVS[name]()
    env.env_index_base = 3
    observations, _ = env.reset(seed=11)
    expected, _ = reference.reset(seed=derive_seed(11, 3))
    tree = env.observation_tree
    np.testing.assert_array_equal(observations[0], tree.flatten(expected))
    reference.action_space.seed(5)
    returns, length, episodes = 0.0, 0, 0
    for _ in range(150):
        action = reference.action_space.sample()
        expected, reward, terminal, truncation, _ = reference.step(action)
        observations, rewards, terminals, truncations, info = env.step(env.action_tree.flatten(action)[None])
        assert (rewards[0], terminals[0], truncations[0]) == (np.float32(reward), terminal, truncation)
        returns, length = returns + reward, length + 1
        if terminal or truncation:
            np.testing.assert_array_equal(env.final_observations[0], tree.flatten(expected))
            assert info["episodes"] == 1 and info["episode_length"] == length
            assert info["episode_return"] == pytest.approx(returns)
            returns, length, episodes = 0.0, 0, episodes + 1
            expected, _ = reference.reset()
        else:
            assert info == {}
        np.testing.assert_array_equal(observations[0], tree.flatten(expected))
    assert episodes >= 1


def test_gymnasium_adapter_reports_numeric_infos():
    env = GymnasiumEnv(TurretEnv)
    env.reset(seed=0)
    info = {}
    while not info:
        *_, info = env.step(env.action_tree.flatten({"turn": 0, "fire": np.ones(2, np.int8)})[None])
    assert set(info) == {"episode_return", "episode_length", "episodes", "hits"}


@pytest.mark.parametrize("name", ["cartpole", "pendulum", "dict_obs", "dict_actions"])
def test_gymnasium_view_passes_check_env(name):
    check_env(GymnasiumView(GymnasiumEnv(ADAPTER_ENVS[name])), skip_render_check=True)


def test_gymnasium_adapter_bad_input():
    with pytest.raises(TypeError, match="env_or_creator must be a gymnasium.Env or a function returning one"):
        GymnasiumEnv(42)
    env = GymnasiumEnv(ADAPTER_ENVS["cartpole"])
    with pytest.raises(RuntimeError, match=r"step\(\) called before reset\(\)"):
        env.step(np.zeros(1, np.int32))
    with pytest.raises(TypeError, match="Dict/Tuple of them"):
        GymnasiumEnv(_TextEnv)
    env.close()
    env.close()


class _TextEnv(gymnasium.Env):
    observation_space = spaces.Text(8)
    action_space = spaces.Discrete(2)


class _MisshapenEnv(gymnasium.Env):
    """Declares Box(4,) observations and returns `observation` (of another shape) from
    reset, or from step only when `on_step`."""

    observation_space = spaces.Box(-1, 1, (4,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, observation, on_step=False):
        self.observation, self.on_step = observation, on_step

    def reset(self, seed=None, options=None):
        return (np.zeros(4, np.float32) if self.on_step else self.observation), {}

    def step(self, action):
        return self.observation, 0.0, False, False, {}


@pytest.mark.parametrize("observation, shape", [(np.ones(1, np.float32), r"\(1,\)"), (np.float32(0.5), r"\(\)"),
                                                (np.ones((1, 4), np.float32), r"\(1, 4\)")])
def test_an_observation_of_the_wrong_shape_is_refused_naming_env_and_shapes(observation, shape):
    """Not broadcast into the row (np.ones(1) as four ones): refused on reset and step,
    one env alone and in a vector's batch write."""
    import puffercore.vector

    match = rf"env _MisshapenEnv: observation does not fit Box.*\(4,\).*its shape is {shape}, expected \(4,\)"
    with pytest.raises(ValueError, match=match):
        GymnasiumEnv(_MisshapenEnv(observation)).reset()
    env = GymnasiumEnv(_MisshapenEnv(observation, on_step=True))
    env.reset()
    with pytest.raises(ValueError, match=match):
        env.step(np.zeros(1, np.int32))
    with puffercore.vector.make(lambda: _MisshapenEnv(observation, on_step=True), 3, backend="serial") as vec:
        vec.reset()
        with pytest.raises(ValueError, match=match):
            vec.step(np.zeros(3, np.int32))
    with pytest.raises(ValueError, match=r"env CartPole-v1: observation does not fit.*its shape is \(2,\)"):
        GymnasiumEnv(gymnasium.make("CartPole-v1"))._write_observation(np.zeros(2, np.float32))
