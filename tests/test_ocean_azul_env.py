"""Azul as an RL env against built-in opponents. The reference is the game itself, played
move by move through puffercore.games.Azul: before every step each env's position is
read (`game_state`), the agent's move and the opponents' replies are replayed on it
(the greedy bot through GreedyAzulAgent; for the random opponent, a search for the
legal replies that lead to the env's position), and the env's observation, reward,
terminal flag, final observation and episode info must match."""

import os
import sys

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import puffercore
from puffercore.alphazero import GreedyAzulAgent
from puffercore.env import GymnasiumView
from puffercore.games import Azul as AzulGame
from puffercore.ocean import AzulEnv

sys.path.insert(0, os.path.dirname(__file__))  # pytest's importlib mode leaves tests/ off the path
from masked_envs import assert_same_frames, masks_of, random_legal_actions, rollout  # noqa: E402

NUM_ACTIONS = 300
GREEDY = GreedyAzulAgent()


def expected_row(state, seat):
    """The observation row of `state` seen by `seat`: legal mask, then the game's view."""
    return np.concatenate([state.legal_mask().astype(np.float32), state.observation(seat)])


def outcome(state, seat, reward_kind):
    """(reward, episode stats) of a finished game for the agent at `seat`."""
    scores, winners = state.scores(), state.winners()
    won, shared = winners == [seat], seat in winners and len(winners) > 1
    reward = state.returns()[seat] if reward_kind == "score_margin" else float(won) - float(not won and not shared)
    best_other = max(score for p, score in enumerate(scores) if p != seat)
    return reward, {"score": scores[seat], "score_margin": scores[seat] - best_other, "win_rate": won,
                    "loss_rate": not won and not shared, "draw_rate": shared, "illegal_move_rate": 0}


def greedy_replies(state, seat, reached):
    """The greedy opponents' replies, played on `state` (after the agent's move)."""
    while not state.is_terminal() and state.current_player() != seat:
        state.apply(GREEDY.act(state))
    return state


class RandomReplies:
    """The random opponent's replies cannot be replayed (they come from the env's RNG),
    so they are searched for: a sequence of legal opponent moves from `state` whose end
    (the agent's turn or the game's end) is `reached`. Counts the replies and how many
    were the greedy bot's move."""

    def __init__(self):
        self.moves = self.greedy = 0

    def __call__(self, state, seat, reached):
        if state.is_terminal() or state.current_player() == seat:
            return state if reached(state) else None
        greedy = GREEDY.act(state)
        for action in state.legal_actions():
            child = state.clone()
            child.apply(action)
            found = self(child, seat, reached)
            if found is not None:
                self.moves += 1
                self.greedy += action == greedy
                return found
        return None


def play_and_check(env, steps, seed, replies):
    """Random legal agent moves for `steps` steps, every transition checked against the
    game; returns the number of finished episodes."""
    rng = np.random.default_rng(seed)
    observations, _ = env.reset(seed=seed)
    lengths, episodes = np.zeros(env.num_envs), 0
    for _ in range(steps):
        states = [env.game_state(i) for i in range(env.num_envs)]
        seats = [state.current_player() for state in states]
        np.testing.assert_array_equal(env.agent_seats(), seats)
        for i, state in enumerate(states):
            np.testing.assert_array_equal(observations[i], expected_row(state, seats[i]))
        actions = random_legal_actions(masks_of(env, observations), rng)
        observations, rewards, terminals, truncations, info = env.step(actions)
        lengths += 1
        assert not truncations.any()
        finished = []
        for i, state in enumerate(states):
            state.apply(int(actions[i]))
            if terminals[i]:
                final = env.final_observations[i]
                state = replies(state, seats[i], lambda s: np.array_equal(expected_row(s, seats[i]), final))
                assert state is not None and state.is_terminal()
                np.testing.assert_array_equal(final, expected_row(state, seats[i]))
                assert not env.final_observations[i, :NUM_ACTIONS].any()
                reward, stats = outcome(state, seats[i], env.reward)
                np.testing.assert_allclose(rewards[i], reward, rtol=1e-6, atol=1e-7)
                finished.append({"episode_return": rewards[i], "episode_length": lengths[i], **stats})
                fresh = env.game_state(i).fields()  # the next game: the opponents seated first have moved
                assert fresh["round"] == 1 and fresh["moves"] == env.agent_seats()[i] and not fresh["score"].any()
                lengths[i] = 0
            else:
                now = env.game_state(i)
                state = replies(state, seats[i], lambda s: s == now)
                assert state is not None and state == now, f"env {i} left the game's rules"
                assert rewards[i] == 0
        if finished:
            assert info["episodes"] == len(finished)
            for key in finished[0]:
                np.testing.assert_allclose(info[key], np.mean([f[key] for f in finished]), rtol=1e-5, err_msg=key)
        else:
            assert info == {}
        episodes += len(finished)
    return episodes


@pytest.mark.parametrize("num_players, reward", [(2, "score_margin"), (3, "win_loss"), (4, "score_margin")])
def test_greedy_opponents_play_the_game_move_by_move(num_players, reward):
    env = AzulEnv(num_envs=6, seed=0, num_players=num_players, reward=reward)
    episodes = play_and_check(env, steps=90, seed=num_players, replies=greedy_replies)
    assert episodes >= 10


def test_random_opponent_plays_legal_moves_that_are_not_the_greedy_ones():
    replies = RandomReplies()
    env = AzulEnv(num_envs=6, seed=0, opponent="random", agent_seat=1)
    assert play_and_check(env, steps=80, seed=1, replies=replies) >= 6
    assert replies.moves > 300 and replies.greedy < 0.5 * replies.moves


def test_random_opponent_picks_destinations_uniformly():
    """In a game's first move every pattern line takes every colour, so a uniform choice
    among the legal moves sends the tiles to each of the 6 destinations with chance 1/6."""
    env = AzulEnv(num_envs=6000, seed=0, opponent="random", agent_seat=1)
    env.reset()
    destinations = []
    for i in range(env.num_envs):
        lines = env.game_state(i).fields()["line_count"][0]
        destinations.append(int(np.flatnonzero(lines)[0]) if lines.any() else 5)
    counts = np.bincount(destinations, minlength=6)
    assert np.all(np.abs(counts - 1000) < 5 * np.sqrt(1000 * 5 / 6)), counts


def test_seats_fixed_or_drawn_per_episode():
    for seat in range(3):
        env = AzulEnv(num_envs=50, seed=0, num_players=3, agent_seat=seat)
        env.reset()
        assert (env.agent_seats() == seat).all()
        assert all(env.game_state(i).fields()["moves"] == seat for i in range(50))
    drawn = AzulEnv(num_envs=4000, seed=0, num_players=4)
    drawn.reset()
    counts = np.bincount(drawn.agent_seats(), minlength=4)
    assert np.all(np.abs(counts - 1000) < 5 * np.sqrt(1000 * 0.75)), counts


def test_greedy_opponents_beat_random_play_and_random_ones_do_not():
    def win_rate(opponent):
        env = AzulEnv(num_envs=64, seed=0, opponent=opponent, reward="win_loss")
        observations, _ = env.reset()
        rng, wins, episodes = np.random.default_rng(0), 0.0, 0.0
        while episodes < 100:
            observations, _, _, _, info = env.step(random_legal_actions(masks_of(env, observations), rng))
            if info:
                wins += info["win_rate"] * info["episodes"]
                episodes += info["episodes"]
        return wins / episodes

    assert win_rate("greedy") < 0.1
    assert 0.3 < win_rate("random") < 0.7


def an_illegal_action(env, index):
    """The lowest action that is illegal in sub-env `index` now."""
    mask = masks_of(env, env.observations)[index]
    return int(np.flatnonzero(mask == 0)[0])


def test_illegal_moves_are_rejected_before_any_env_moves():
    env = AzulEnv(num_envs=3, seed=0)
    observations, _ = env.reset()
    rng = np.random.default_rng(0)
    for _ in range(5):
        observations, *_ = env.step(random_legal_actions(masks_of(env, observations), rng))
    before = observations.copy()
    states = [env.game_state(i) for i in range(3)]
    actions = random_legal_actions(masks_of(env, observations), rng)
    actions[1] = an_illegal_action(env, 1)
    with pytest.raises(ValueError, match=rf"action {actions[1]} .* of env 1 breaks the rules.*action_mask.*'lose'"):
        env.step(actions)
    np.testing.assert_array_equal(env.observations, before)
    assert all(env.game_state(i) == states[i] for i in range(3))
    env.step(random_legal_actions(masks_of(env, observations), rng))  # the games go on

    absent_factory = AzulGame.action(source=5, color=0, destination=5)  # 2 players: factories 0-4
    assert not masks_of(env, env.observations)[:, absent_factory].any()
    with pytest.raises(ValueError, match=f"action {absent_factory} .* of env 0"):
        env.step(np.full(3, absent_factory, np.int32))


def test_threads_backend_rejects_illegal_moves_too():
    vector = puffercore.vector.make(AzulEnv, 4, backend="threads", num_workers=2, seed=0)
    observations, _ = vector.reset()
    actions = random_legal_actions(masks_of(vector, observations), np.random.default_rng(0))
    actions[3] = int(np.flatnonzero(masks_of(vector, observations)[3] == 0)[0])
    before = vector.observations.copy()
    with pytest.raises(ValueError, match="of env 3 breaks the rules"):
        vector.step(actions)
    np.testing.assert_array_equal(vector.observations, before)
    vector.close()


def test_closed_env_refuses_actions():
    env = AzulEnv(num_envs=2)
    env.reset()
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.write_actions(np.zeros(2, np.int32))


def test_illegal_move_loses_when_asked():
    env = AzulEnv(num_envs=2, seed=0, illegal_move="lose", num_players=3)
    observations, _ = env.reset()
    legal = random_legal_actions(masks_of(env, observations), np.random.default_rng(0))
    state = env.game_state(0)
    actions = np.array([an_illegal_action(env, 0), legal[1]], np.int32)
    observations, rewards, terminals, truncations, info = env.step(actions)
    assert (rewards[0], terminals[0], truncations[0], terminals[1]) == (-1.0, True, False, False)
    assert info["episodes"] == 1 and info["illegal_move_rate"] == 1.0 and info["loss_rate"] == 1.0
    np.testing.assert_array_equal(env.final_observations[0], expected_row(state, state.current_player()))


def test_check_env_through_gymnasium_view():
    for kwargs in ({"illegal_move": "lose"}, {"illegal_move": "lose", "opponent": "random", "num_players": 4}):
        env = AzulEnv(num_envs=1, seed=0, render_mode="ansi", **kwargs)
        check_env(GymnasiumView(env), skip_render_check=False)
        env.close()


def test_same_seed_same_games_and_env_indices_differ():
    kwargs = {"num_envs": 4, "opponent": "random", "num_players": 3}
    a, b = rollout(AzulEnv(**kwargs), 40, seed=5), rollout(AzulEnv(**kwargs), 40, seed=5)
    assert_same_frames(a, b)
    observations = np.stack(a[1::5])  # [steps, envs, 580]
    assert not np.array_equal(observations[:, 0], observations[:, 1]), "env 0 and env 1 played the same games"
    assert not np.array_equal(observations, np.stack(rollout(AzulEnv(**kwargs), 40, seed=6)[1::5]))


@pytest.mark.parametrize("opponent", ["greedy", "random"])
def test_serial_and_threads_backends_give_identical_games(opponent):
    frames = {}
    for backend, workers in (("serial", None), ("threads", 2)):
        vector = puffercore.vector.make(AzulEnv, 6, backend=backend, num_workers=workers, seed=0, opponent=opponent,
                                        num_players=2)
        assert vector.observation_tree is not None
        frames[backend] = rollout(vector, 80, seed=7)
        vector.close()
    assert_same_frames(frames["serial"], frames["threads"])
    assert sum(frame.get("episodes", 0) for frame in frames["serial"][5::5]) >= 6


def test_observation_tree_reads_masks_and_boards_as_views():
    env = AzulEnv(num_envs=3, seed=0, num_players=4)
    observations, _ = env.reset()
    tree = env.observation_tree
    assert tree.flat_space == env.single_observation_space
    leaves = tree.unflatten(observations)
    assert leaves["action_mask"].shape == (3, NUM_ACTIONS) and leaves["board"].shape == (3, 412)
    assert np.shares_memory(leaves["board"], observations)
    for i in range(3):
        state = env.game_state(i)
        np.testing.assert_array_equal(leaves["action_mask"][i], state.legal_mask())
        np.testing.assert_array_equal(leaves["board"][i], state.observation(env.agent_seats()[i]))
    with pytest.raises(IndexError, match="env index"):
        env.game_state(3)


def test_render_shows_the_game_and_the_seats():
    env = AzulEnv(num_envs=1, seed=0, render_mode="ansi", num_players=3, agent_seat=2, opponent="random")
    env.reset()
    text = env.render()
    assert text.startswith(str(env.game_state(0)))
    assert text.splitlines()[-1] == "agent: player 2; random opponents"
    assert "player 1: score 0" in text and text.count("floor") == 3
    assert AzulEnv(num_envs=1).render() is None


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"num_players": 1}, ValueError, "num_players must be an int in \\[2, 4\\]"),
        ({"num_players": 5}, ValueError, "num_players"),
        ({"num_players": "2"}, TypeError, "num_players"),
        ({"num_players": True}, TypeError, "num_players"),
        ({"opponent": "minimax"}, ValueError, "opponent must be one of"),
        ({"opponent": None}, ValueError, "opponent"),
        ({"agent_seat": 2}, ValueError, "agent_seat must be an int in \\[0, 1\\]"),
        ({"agent_seat": -1}, ValueError, "agent_seat"),
        ({"agent_seat": 0.0}, TypeError, "agent_seat"),
        ({"num_players": 3, "agent_seat": 3}, ValueError, "agent_seat"),
        ({"reward": "score"}, ValueError, "reward must be one of"),
        ({"illegal_move": "skip"}, ValueError, "illegal_move"),
        ({"players": 2}, TypeError, "players"),
        ({"num_envs": 0}, ValueError, "num_envs"),
        ({"render_mode": "human"}, ValueError, "render_mode"),
    ],
)
def test_bad_config_is_rejected(kwargs, error, match):
    with pytest.raises(error, match=match):
        AzulEnv(**kwargs)


@pytest.mark.parametrize(
    "actions, error, match",
    [
        (np.array([300, 0], np.int32), ValueError, "out of range"),
        (np.array([-1, 0], np.int32), ValueError, "out of range"),
        (np.zeros(3, np.int32), ValueError, "shape"),
        (np.zeros(2, np.float32), TypeError, "integers"),
    ],
)
def test_bad_actions_are_rejected(actions, error, match):
    env = AzulEnv(num_envs=2)
    env.reset()
    with pytest.raises(error, match=match):
        env.step(actions)
