"""PettingZooEnv: fixed rows per agent, padding, agents that hatch and die, action masks
through the observation tree, checked against the wrapped env run side by side and on
PettingZoo's own classic games."""

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo import ParallelEnv

from puffercore.emulation import PettingZooEnv
from puffercore.env import derive_seed

REST, EAT, HATCH = 0, 1, 2


class Hatchery(ParallelEnv):
    """Agents burn one energy per step and die at zero; EAT gives +1 reward and +2 energy;
    HATCH (masked out once every egg has hatched) brings the next possible agent to life.
    Episodes truncate after `max_cycles` steps."""

    metadata = {"render_modes": [], "name": "hatchery"}

    def __init__(self, max_cycles=12):
        self.possible_agents = [f"bird_{i}" for i in range(4)]
        self.max_cycles = max_cycles
        self.np_random = np.random.default_rng()

    def observation_space(self, agent):
        return spaces.Dict(
            {"observation": spaces.Box(-100, 100, (2,), np.float32), "action_mask": spaces.MultiBinary(3)}
        )

    def action_space(self, agent):
        return spaces.Discrete(3)

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.steps = 0
        self.unhatched = self.possible_agents[2:]
        self.agents = self.possible_agents[:2]
        self.energy = {agent: int(self.np_random.integers(1, 4)) for agent in self.agents}
        return {agent: self._observe(agent) for agent in self.agents}, {agent: {} for agent in self.agents}

    def _observe(self, agent):
        mask = np.array([1, 1, bool(self.unhatched)], np.int8)
        return {"observation": np.float32([self.steps, self.energy[agent]]), "action_mask": mask}

    def step(self, actions):
        self.steps += 1
        rewards, hatched = {}, []
        for agent in self.agents:
            self.energy[agent] -= 1
            rewards[agent] = 0.0
            if actions[agent] == EAT:
                self.energy[agent] += 2
                rewards[agent] = 1.0
            elif actions[agent] == HATCH and self.unhatched:
                hatched.append(self.unhatched.pop(0))
        terminals = {agent: self.energy[agent] <= 0 for agent in self.agents}
        truncations = {agent: self.steps >= self.max_cycles for agent in self.agents}
        for agent in hatched:
            self.energy[agent] = 2
            rewards[agent], terminals[agent], truncations[agent] = 0.0, False, False
        observations = {agent: self._observe(agent) for agent in self.agents + hatched}
        self.agents = [agent for agent in self.agents + hatched if not (terminals[agent] or truncations[agent])]
        return observations, rewards, terminals, truncations, {agent: {} for agent in observations}


def scripted_actions(step, num_rows):
    """Hatch early, then let some agents starve: every case happens within a few steps."""
    return np.array([(step + row) % 3 if step > 1 else HATCH for row in range(num_rows)], np.int32)


def test_rows_masks_padding_and_final_observations_match_the_env():
    env, reference = PettingZooEnv(Hatchery(), max_agents=6), Hatchery()
    tree = env.observation_tree
    env.env_index_base = 2
    observations, _ = env.reset(seed=7)
    expected, _ = reference.reset(seed=derive_seed(7, 2))
    seen = {"hatched": False, "died": False, "episodes": 0}
    episode_returns, episode_length = {}, 0

    def assert_rows_match(expected):
        live = set(reference.agents)
        for row in range(6):
            agent = reference.possible_agents[row] if row < 4 else None
            assert env.masks[row] == (agent in live)
            if agent in live:
                np.testing.assert_array_equal(observations[row], tree.flatten(expected[agent]))
            else:
                assert not observations[row].any()

    assert_rows_match(expected)
    for step in range(40):
        actions = scripted_actions(step, 6)
        acting = list(reference.agents)
        expected, rewards, terminals, truncations, _ = reference.step({a: actions[int(a[-1])] for a in acting})
        observations, env_rewards, env_terminals, env_truncations, info = env.step(actions)
        seen["hatched"] |= len(expected) > len(acting)
        for agent in expected:
            row = int(agent[-1])
            assert env_rewards[row] == rewards[agent]
            assert env_terminals[row] == terminals[agent] and env_truncations[row] == truncations[agent]
            episode_returns[agent] = episode_returns.get(agent, 0.0) + rewards[agent]
            if terminals[agent] or truncations[agent]:
                seen["died"] |= bool(terminals[agent])
                np.testing.assert_array_equal(env.final_observations[row], tree.flatten(expected[agent]))
        episode_length += 1
        if not reference.agents:
            assert info["episodes"] == 1 and info["episode_length"] == episode_length
            assert info["episode_return"] == pytest.approx(np.mean(list(episode_returns.values())))
            episode_returns, episode_length = {}, 0
            seen["episodes"] += 1
            expected, _ = reference.reset()
        else:
            assert info == {}
        assert_rows_match(expected)
    assert seen["hatched"] and seen["died"] and seen["episodes"] >= 2


def test_action_mask_reaches_the_policy_through_the_tree():
    env = PettingZooEnv(Hatchery(max_cycles=50))
    observations, _ = env.reset(seed=0)
    for step in range(6):
        action_mask = env.observation_tree.unflatten(observations)["action_mask"]
        assert action_mask.shape == (4, 3) and np.shares_memory(action_mask, observations)
        np.testing.assert_array_equal(action_mask[env.masks, 2], int(len(env.env.unhatched) > 0))
        assert not action_mask[~env.masks].any()
        observations, *_ = env.step(np.full(4, HATCH if action_mask[0, 2] else EAT, np.int32))
    assert env.masks.all()


def test_seeding_is_per_index():
    def first_energies(index, seed):
        env = PettingZooEnv(Hatchery())
        env.env_index_base = index
        observations, _ = env.reset(seed=seed)
        return env.observation_tree.unflatten(observations)["observation"][:2, 1].copy()

    np.testing.assert_array_equal(first_energies(0, 3), first_energies(0, 3))
    assert any((first_energies(i, 3) != first_energies(0, 3)).any() for i in range(1, 6))


def test_bad_input():
    with pytest.raises(TypeError, match="parallel_env must be a PettingZoo ParallelEnv"):
        PettingZooEnv(gymnasium.make("CartPole-v1"))
    with pytest.raises(ValueError, match=r"max_agents must be an int >= len\(possible_agents\) = 4, got 3"):
        PettingZooEnv(Hatchery(), max_agents=3)
    env = PettingZooEnv(Hatchery())
    with pytest.raises(RuntimeError, match=r"step\(\) called before reset\(\)"):
        env.step(np.zeros(4, np.int32))
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions must have shape \(4,\)"):
        env.step(np.zeros(3, np.int32))
    with pytest.raises(ValueError, match=r"actions out of range for Discrete\(3\)"):
        env.step(np.full(4, 3, np.int32))

    class Mixed(Hatchery):
        def action_space(self, agent):
            return spaces.Discrete(3 if agent != "bird_2" else 4)

    with pytest.raises(ValueError, match="all agents must share one action_space: 'bird_2' differs"):
        PettingZooEnv(Mixed())


def test_rock_paper_scissors_rules():
    rps_v2 = pytest.importorskip("pettingzoo.classic.rps_v2")
    env = PettingZooEnv(rps_v2.parallel_env(max_cycles=3))
    observations, _ = env.reset(seed=0)
    assert observations[:, 0].tolist() == [3, 3]  # 3: no move seen yet
    rock, paper, scissors = 0, 1, 2
    for moves, rewards in [((rock, paper), [-1, 1]), ((scissors, paper), [1, -1]), ((rock, rock), [0, 0])]:
        observations, env_rewards, terminals, truncations, info = env.step(np.array(moves, np.int32))
        assert env_rewards.tolist() == rewards
    assert truncations.all() and info["episodes"] == 1 and info["episode_length"] == 3
    np.testing.assert_array_equal(env.final_observations[:, 0], [rock, rock])
    assert observations[:, 0].tolist() == [3, 3] and env.masks.all()


def test_connect_four_through_the_turn_based_wrapper():
    connect_four_v3 = pytest.importorskip("pettingzoo.classic.connect_four_v3")
    from pettingzoo.utils.conversions import turn_based_aec_to_parallel

    env = PettingZooEnv(turn_based_aec_to_parallel(connect_four_v3.env()))
    observations, _ = env.reset(seed=1)
    rng = np.random.default_rng(0)
    games = 0
    while games < 3:
        action_mask = env.observation_tree.unflatten(observations)["action_mask"]
        assert action_mask.any(axis=1).sum() == 1  # one player to move
        actions = np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in action_mask], np.int32)
        observations, rewards, terminals, truncations, info = env.step(actions)
        if info:
            games += 1
            assert terminals.all() and sorted(rewards.tolist()) in ([-1, 1], [0, 0])
            board = env.observation_tree.unflatten(observations)["observation"]
            assert not board.any() and env.masks.all()
            final_board = env.observation_tree.unflatten(env.final_observations)["observation"]
            assert final_board[0].sum() >= 7  # at least 4 + 3 stones on the final board


def test_vector_of_parallel_envs_pads_and_masks_per_env():
    import puffercore.vector

    with puffercore.vector.make(Hatchery, 3, seed=4) as vec:
        assert vec.num_agents == 12 and vec.num_envs == 3
        observations, _ = vec.reset()
        assert vec.masks.reshape(3, 4).tolist() == [[True, True, False, False]] * 3
        action_mask = vec.observation_tree.unflatten(observations)["action_mask"]
        assert action_mask.shape == (12, 3) and np.shares_memory(action_mask, vec.observations)
        observations, *_ = vec.step(np.tile(np.int32([HATCH, EAT, EAT, EAT]), 3))
        masks = vec.masks.reshape(3, 4)
        assert masks[:, 1].all() and masks[:, 2].all() and not masks[:, 3].any()  # bird_2 hatched
        for index, env in enumerate(vec.envs):
            assert np.shares_memory(env.masks, vec.masks[4 * index : 4 * index + 4])
