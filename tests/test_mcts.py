"""Batched AlphaZero MCTS and the plain UCT baseline (puffercore.alphazero)."""

import numpy as np
import pytest

from puffercore.alphazero import BatchedMCTS, MCTSBaseline, RandomAgent, mcts_baseline_move, uniform_evaluator
from puffercore.alphazero.mcts import game_utility
from puffercore.env import derive_seed
from puffercore.games import Azul, Connect4, Pig, TicTacToe

WIN_IN_ONE = [0, 0, 1, 1, 2, 6]  # X (to move) has (0,0)-(0,2): column 3 wins
MUST_BLOCK = [0, 3, 0, 4, 6, 5]  # O has (0,3)-(0,5), (0,6) is X's: X must play 2


def play(game, actions):
    state = game.new_state()
    for action in actions:
        state.apply(action)
    return state


def greedy_move(mcts, state):
    mcts.search([state], uniform_evaluator)
    return mcts.choose_action(0, temperature=0.0)


@pytest.mark.parametrize("moves, best", [(WIN_IN_ONE, 3), (MUST_BLOCK, 2)])
def test_mcts_finds_win_and_blocks_loss_in_connect4(moves, best):
    state = play(Connect4(), moves)
    for epsilon in (0.0, 0.25):
        mcts = BatchedMCTS(Connect4(), 1, num_simulations=800, dirichlet_epsilon=epsilon, seed=3)
        assert greedy_move(mcts, state) == best


@pytest.mark.parametrize("moves, best", [(WIN_IN_ONE, 3), (MUST_BLOCK, 2)])
def test_baseline_finds_win_and_blocks_loss_in_connect4(moves, best):
    state = play(Connect4(), moves)
    for seed in range(3):
        action, visits = mcts_baseline_move(state, simulations=1000, seed=seed)
        assert action == best
        assert visits.sum() == 1000 and visits.argmax() == best


def play_batch(mcts, states, opponent, mcts_seats):
    """Play every game to the end: MCTS (greedy, subtree reuse) in mcts_seats[i],
    `opponent` (None = MCTS too) in the other seat."""
    while not all(state.is_terminal() for state in states):
        for i, state in enumerate(states):
            if opponent is not None and not state.is_terminal() and state.current_player() != mcts_seats[i]:
                action = opponent.act(state)
                state.apply(action)
                if mcts.root_state(i) is not None:
                    mcts.advance(i, action)
        to_search = [None if state.is_terminal() else state for state in states]
        if all(state is None for state in to_search):
            break
        policies = mcts.search(to_search, uniform_evaluator)
        for i, state in enumerate(to_search):
            if state is None:
                assert not policies[i].any()
                continue
            action = mcts.choose_action(i, temperature=0.0)
            state.apply(action)
            mcts.advance(i, action)
    return np.array([state.returns() for state in states])


def test_tictactoe_mcts_never_loses_to_random():
    games = 50
    mcts = BatchedMCTS(TicTacToe(), games, num_simulations=2000, seed=0)
    seats = [i % 2 for i in range(games)]
    returns = play_batch(mcts, [TicTacToe().new_state() for _ in range(games)], RandomAgent(seed=1), seats)
    own = returns[np.arange(games), seats]
    assert (own >= 0).all()
    assert (own > 0).sum() >= 40  # and it mostly wins


def test_tictactoe_mcts_always_draws_itself():
    games = 20
    mcts = BatchedMCTS(TicTacToe(), games, num_simulations=2000, seed=5)
    returns = play_batch(mcts, [TicTacToe().new_state() for _ in range(games)], None, [0] * games)
    assert (returns == 0).all()


def test_policies_are_distributions_over_legal_actions():
    state = play(Connect4(), [0] * 6 + [1])  # column 0 full
    mcts = BatchedMCTS(Connect4(), 2, num_simulations=50, seed=0)
    policies = mcts.search([state, None], uniform_evaluator)
    assert policies.shape == (2, 7) and policies.dtype == np.float32
    assert policies[0].sum() == pytest.approx(1.0)
    assert policies[0, 0] == 0 and (policies[0, 1:] > 0).all()
    assert not policies[1].any()
    assert mcts.visit_counts(0).sum() == 50
    assert np.allclose(policies[0], mcts.visit_counts(0) / 50)

    def prefers_the_full_column(observations, legal_masks):
        priors = np.zeros(legal_masks.shape, dtype=np.float32)
        priors[:, 0] = 1.0
        return priors, np.zeros((len(priors), 2), dtype=np.float32)

    policies = BatchedMCTS(Connect4(), 1, num_simulations=50, seed=0).search([state], prefers_the_full_column)
    assert policies[0, 0] == 0 and policies[0].sum() == pytest.approx(1.0)


def searched_actions(mcts, states, rounds=3):
    """Policies and temperature-1 actions of a few moves of every game (subtree reuse)."""
    states = [state.clone() for state in states]
    record = []
    for _ in range(rounds):
        policies = mcts.search(states, uniform_evaluator)
        actions = [mcts.choose_action(i, temperature=1.0) for i in range(len(states))]
        record.append((policies, actions))
        for i, action in enumerate(actions):
            states[i].apply(action)
            mcts.advance(i, action)
    return record


def openings():
    return [play(Connect4(), moves) for moves in ([], [3], [3, 3], [0, 6, 1])]


def test_search_is_deterministic_for_a_seed():
    first = searched_actions(BatchedMCTS(Connect4(), 4, num_simulations=64, seed=11), openings())
    again = searched_actions(BatchedMCTS(Connect4(), 4, num_simulations=64, seed=11), openings())
    other = searched_actions(BatchedMCTS(Connect4(), 4, num_simulations=64, seed=12), openings())
    for (p1, a1), (p2, a2) in zip(first, again):
        assert np.array_equal(p1, p2) and a1 == a2
    assert any(not np.array_equal(p1, p3) for (p1, _), (p3, _) in zip(first, other))


def test_batched_search_equals_single_game_searches():
    seeds = [101, 202, 303, 404]
    batched = searched_actions(BatchedMCTS(Connect4(), 4, num_simulations=64, seed=seeds), openings())
    for i, (state, seed) in enumerate(zip(openings(), seeds)):
        alone = searched_actions(BatchedMCTS(Connect4(), 1, num_simulations=64, seed=[seed]), [state])
        for (policies, actions), (policy_alone, action_alone) in zip(batched, alone):
            assert np.array_equal(policies[i], policy_alone[0])
            assert actions[i] == action_alone[0]
    # an int seed gives game i the seed derive_seed(seed, i)
    by_int = searched_actions(BatchedMCTS(Connect4(), 4, num_simulations=64, seed=7), openings())
    by_list = searched_actions(
        BatchedMCTS(Connect4(), 4, num_simulations=64, seed=[derive_seed(7, i) for i in range(4)]), openings())
    for (p1, a1), (p2, a2) in zip(by_int, by_list):
        assert np.array_equal(p1, p2) and a1 == a2


def test_subtree_is_reused_after_advance():
    state = Connect4().new_state()
    mcts = BatchedMCTS(Connect4(), 1, num_simulations=200, dirichlet_epsilon=0.0, seed=0)
    mcts.search([state], uniform_evaluator)
    action = mcts.choose_action(0, temperature=0.0)
    kept_visits = mcts.visit_counts(0)[action]
    state.apply(action)
    mcts.advance(0, action)
    assert mcts.root_state(0) == state
    assert mcts.visit_counts(0).sum() == kept_visits - 1  # the child's first visit expanded it
    mcts.search([state], uniform_evaluator)
    assert mcts.visit_counts(0).sum() == kept_visits - 1 + 200
    # a position other than the stored root starts a fresh tree
    mcts.search([Connect4().new_state()], uniform_evaluator)
    assert mcts.visit_counts(0).sum() == 200


def test_pool_that_fits_one_search_never_runs_out_across_moves():
    sims, actions = 100, 7
    mcts = BatchedMCTS(Connect4(), 1, num_simulations=sims, max_nodes=(sims + 1) * actions + 1, seed=0)
    state = Connect4().new_state()
    while not state.is_terminal():
        mcts.search([state], uniform_evaluator)
        action = mcts.choose_action(0, temperature=1.0)
        state.apply(action)
        mcts.advance(0, action)
        assert mcts.tree_size(0) <= mcts.max_nodes


def test_node_pool_exhaustion_raises():
    mcts = BatchedMCTS(Connect4(), 2, num_simulations=100, max_nodes=50, seed=0)
    with pytest.raises(RuntimeError, match="node pool exhausted in game 0: max_nodes=50"):
        mcts.search([Connect4().new_state(), Connect4().new_state()], uniform_evaluator)
    assert mcts.tree_size(0) <= 50
    with pytest.raises(RuntimeError, match="node pool exhausted"):
        mcts.search([Connect4().new_state(), None], uniform_evaluator)


def centre_evaluator(observations, legal_masks):
    """Tic-tac-toe: +1 for the player to move if they hold the centre, -1 if the
    opponent does, in the evaluator's perspective order [mover, other]."""
    mine, theirs = observations[:, 0, 1, 1], observations[:, 1, 1, 1]
    value = mine - theirs
    priors = legal_masks / legal_masks.sum(axis=1, keepdims=True)
    return priors, np.stack([value, -value], axis=1)


def test_values_are_read_from_the_movers_perspective():
    for moves in ([], [0]):  # X to move, then O to move: each should grab the centre
        mcts = BatchedMCTS(TicTacToe(), 1, num_simulations=30, dirichlet_epsilon=0.0, seed=0)
        mcts.search([play(TicTacToe(), moves)], centre_evaluator)
        assert mcts.choose_action(0, temperature=0.0) == 4


def pig_rolled_to_target(num_players):
    for seed in range(10_000):
        state = Pig().new_state(seed=seed, num_players=num_players)
        while state.current_player() == 0 and state.observation()[4] * 20 < 20:
            state.apply(0)
        if state.current_player() == 0:
            return state
    raise AssertionError("no seed rolled to the target")


def constant_evaluator(values):
    """Uniform priors; `values` in perspective order [mover, next seat, ...] for every leaf."""
    def evaluate(observations, legal_masks):
        return legal_masks / legal_masks.sum(axis=1, keepdims=True), np.tile(values, (len(legal_masks), 1))
    return evaluate


def test_leaf_values_are_rotated_from_the_movers_perspective_to_seats():
    # Two simulations visit each root child once (roll, then hold). Holding hands the move
    # to seat 1, so [mover, next, next-next] = [0.1, 0.2, 0.3] is [0.3, 0.1, 0.2] by seat.
    state = Pig().new_state(seed=0, num_players=3)
    while state.current_player() != 0 or 1 not in state.legal_actions():
        state.apply(0)
    mcts = BatchedMCTS(Pig(), 1, num_simulations=2, dirichlet_epsilon=0.0, seed=0)
    mcts.search([state], constant_evaluator([0.1, 0.2, 0.3]))
    assert mcts.visit_counts(0).tolist() == [1, 1]
    assert np.allclose(mcts.root_values(0)[1], [0.3, 0.1, 0.2])
    # Tic-tac-toe: every child of the empty board is a position with O (seat 1) to move.
    mcts = BatchedMCTS(TicTacToe(), 1, num_simulations=9, dirichlet_epsilon=0.0, seed=0)
    mcts.search([TicTacToe().new_state()], constant_evaluator([0.25, -0.75]))
    assert mcts.visit_counts(0).tolist() == [1] * 9
    assert np.allclose(mcts.root_values(0), [[-0.75, 0.25]] * 9)


def test_chance_games_are_searched_with_sampled_draws():
    winning = pig_rolled_to_target(3)  # holding wins; both searches must see it
    mcts = BatchedMCTS(Pig(), 1, num_simulations=200, seed=0)
    assert greedy_move(mcts, winning) == 1
    assert mcts_baseline_move(winning, 500)[0] == 1
    # Two states that differ only in their RNG (the real future dice) search alike.
    policies = [BatchedMCTS(Pig(), 1, num_simulations=300, seed=4).search([Pig().new_state(seed=s)],
                                                                           uniform_evaluator) for s in (1, 2)]
    assert np.array_equal(policies[0], policies[1])
    assert [mcts_baseline_move(Pig().new_state(seed=s), 300, seed=4)[1].tolist() for s in (1, 2)] == \
        [mcts_baseline_move(Pig().new_state(seed=1), 300, seed=4)[1].tolist()] * 2
    # The tree follows the real dice: after a roll the kept subtree is reused.
    state = Pig().new_state(seed=1)
    mcts = BatchedMCTS(Pig(), 1, num_simulations=300, dirichlet_epsilon=0.0, seed=4)
    mcts.search([state], uniform_evaluator)
    kept_visits = mcts.visit_counts(0)[0]
    state.apply(0)
    mcts.advance(0, 0)
    assert mcts.root_state(0) == state
    mcts.search([state], uniform_evaluator)
    assert mcts.visit_counts(0).sum() == kept_visits - 1 + 300


def test_search_plays_pig_to_the_end_across_chance_events():
    games = 8
    mcts = BatchedMCTS(Pig(), games, num_simulations=64, seed=1)
    states = [Pig().new_state(seed=i, num_players=2 + i % 3) for i in range(games)]
    while not all(state.is_terminal() for state in states):
        to_search = [None if state.is_terminal() else state for state in states]
        policies = mcts.search(to_search, uniform_evaluator)
        for i, state in enumerate(to_search):
            if state is not None:
                assert policies[i].sum() == pytest.approx(1.0)
                action = mcts.choose_action(i, temperature=1.0)
                state.apply(action)
                mcts.advance(i, action)
    for state in states:
        returns = state.returns()
        assert returns.sum() == pytest.approx(0.0, abs=1e-6) and returns.max() > 0


def test_evaluator_sees_leaf_observations_and_masks():
    seen = []

    def recording(observations, legal_masks):
        seen.append((observations.copy(), legal_masks.copy()))
        return uniform_evaluator(observations, legal_masks)

    state = play(Connect4(), [0] * 6)
    mcts = BatchedMCTS(Connect4(), 1, num_simulations=3, seed=0)
    mcts.search([state], recording)
    first_obs, first_mask = seen[0]  # the root
    assert first_obs.shape == (1, 2, 6, 7) and first_mask.dtype == np.bool_
    assert np.array_equal(first_obs[0], state.observation())
    assert np.array_equal(first_mask[0], state.legal_mask())
    assert len(seen) == 4


def test_temperature_sampling_follows_visit_counts():
    mcts = BatchedMCTS(TicTacToe(), 1, num_simulations=400, dirichlet_epsilon=0.0, seed=0)
    policy = mcts.search([TicTacToe().new_state()], uniform_evaluator)[0]
    picks = np.bincount([mcts.choose_action(0, temperature=1.0) for _ in range(4000)], minlength=9) / 4000
    assert np.abs(picks - policy).max() < 0.03
    assert mcts.choose_action(0, temperature=0.0) == int(np.argmax(policy))


def test_agents_play_legal_moves_deterministically():
    state = play(Connect4(), [0] * 6)
    assert RandomAgent(seed=3).act(state) == RandomAgent(seed=3).act(state)
    assert all(RandomAgent(seed=s).act(state) != 0 for s in range(20))
    baseline, again = MCTSBaseline(simulations=200, seed=4), MCTSBaseline(simulations=200, seed=4)
    assert [baseline.act(state) for _ in range(3)] == [again.act(state) for _ in range(3)]
    assert mcts_baseline_move(state, 300, seed=9)[1].tolist() == mcts_baseline_move(state, 300, seed=9)[1].tolist()
    with pytest.raises(ValueError, match="terminal"):
        RandomAgent().act(play(TicTacToe(), [0, 3, 1, 4, 2]))


def hashed_evaluator(scale):
    """Connect4 leaf values from a fixed hash of the position, times `scale`; uniform priors."""
    weights = np.random.default_rng(7).normal(size=(2 * 6 * 7,)).astype(np.float32)

    def evaluate(observations, legal_masks):
        value = np.tanh(observations.reshape(len(observations), -1) @ weights) * np.float32(scale)
        priors = legal_masks / legal_masks.sum(axis=1, keepdims=True)
        return priors, np.stack([value, -value], axis=1)

    return evaluate


def visit_counts_after(moves, evaluator, normalize_values):
    mcts = BatchedMCTS(Connect4(), 1, num_simulations=60, dirichlet_epsilon=0.0, normalize_values=normalize_values)
    mcts.search([play(Connect4(), moves)], evaluator)
    return mcts.visit_counts(0)


def test_normalized_values_make_the_search_independent_of_the_value_scale():
    # Values scaled by a power of two scale every mean and bound exactly, so a normalized
    # search takes the same path; without normalization small values leave the search
    # to the priors (uniform here: visits spread evenly), large ones let Q decide.
    moves = [3, 3, 2]
    small, large = hashed_evaluator(1 / 64), hashed_evaluator(1.0)
    normalized = visit_counts_after(moves, small, True)
    np.testing.assert_array_equal(normalized, visit_counts_after(moves, large, True))
    assert normalized.max() > 2 * normalized[normalized > 0].min()
    plain_small = visit_counts_after(moves, small, False)
    assert plain_small.max() - plain_small[plain_small > 0].min() <= 1
    assert not np.array_equal(plain_small, visit_counts_after(moves, large, False))


def test_normalized_search_still_finds_a_win_and_blocks_a_loss():
    for moves, best in ((WIN_IN_ONE, 3), (MUST_BLOCK, 2)):
        mcts = BatchedMCTS(Connect4(), 1, num_simulations=400, dirichlet_epsilon=0.0, normalize_values=True)
        mcts.search([play(Connect4(), moves)], uniform_evaluator)
        assert mcts.choose_action(0, temperature=0.0) == best


def test_bad_inputs_raise_clear_errors():
    game, state = Connect4(), Connect4().new_state()
    with pytest.raises(TypeError, match="game must be"):
        BatchedMCTS("connect4", 1)
    for kwargs, message in [
        (dict(batch_size=0), "batch_size"), (dict(num_simulations=0), "num_simulations"),
        (dict(c_base=0.0), "c_base"), (dict(c_init=-1.0), "c_init"),
        (dict(dirichlet_alpha=0.0), "dirichlet_alpha"), (dict(dirichlet_epsilon=1.5), "dirichlet_epsilon"),
        (dict(max_nodes=7), "max_nodes"), (dict(seed=-1), "seed"), (dict(seed=[1, 2]), "seed"),
        (dict(c_init=float("nan")), "c_init"), (dict(normalize_values=1), "normalize_values"),
    ]:
        with pytest.raises((TypeError, ValueError), match=message):
            BatchedMCTS(game, **{"batch_size": 1, **kwargs})
    mcts = BatchedMCTS(game, 1, num_simulations=4)
    with pytest.raises(ValueError, match="batch_size=1 entries"):
        mcts.search([state, state], uniform_evaluator)
    with pytest.raises(ValueError, match="expected connect4"):
        mcts.search([TicTacToe().new_state()], uniform_evaluator)
    with pytest.raises(TypeError, match="GameState"):
        mcts.search(["state"], uniform_evaluator)
    with pytest.raises(ValueError, match="terminal"):
        mcts.search([play(game, [0, 1, 0, 1, 0, 1, 0])], uniform_evaluator)
    with pytest.raises(TypeError, match="evaluator must be callable"):
        mcts.search([state], None)
    with pytest.raises(ValueError, match="choose_action|search"):
        mcts.choose_action(0)
    with pytest.raises(ValueError, match="no tree"):
        mcts.advance(0, 3)

    def returning(priors, values):
        return lambda observations, masks: (priors(len(masks)), values(len(masks)))

    for evaluator, message in [
        (returning(lambda n: np.ones((n, 6)), lambda n: np.zeros((n, 2))), r"priors must have shape \[1, 7\]"),
        (returning(lambda n: np.ones((n, 7)), lambda n: np.zeros((n, 1))), ">= 2 columns"),
        (returning(lambda n: np.full((n, 7), np.nan), lambda n: np.zeros((n, 2))), "priors must be finite"),
        (returning(lambda n: -np.ones((n, 7)), lambda n: np.zeros((n, 2))), "priors must be >= 0"),
        (returning(lambda n: np.ones((n, 7)), lambda n: np.full((n, 2), np.inf)), "values must be finite"),
        (returning(lambda n: np.where(np.arange(7) == 3, -0.5, 1.0)[None].repeat(n, 0), lambda n: np.zeros((n, 2))),
         r"priors must be >= 0, got priors\[0, 3\] = -0.5"),
    ]:
        with pytest.raises(ValueError, match=message):
            BatchedMCTS(game, 1, num_simulations=4).search([state], evaluator)

    def reentrant(observations, legal_masks):
        mcts.advance(0, 3)

    with pytest.raises(RuntimeError, match="middle of search"):
        mcts.search([state], reentrant)
    mcts.search([state], uniform_evaluator)
    with pytest.raises(ValueError, match="temperature"):
        mcts.choose_action(0, temperature=-1.0)
    with pytest.raises(ValueError, match="i must be"):
        mcts.choose_action(1)
    full = play(game, [0] * 6)
    mcts.reset(0, full)
    with pytest.raises(ValueError, match="not legal"):
        mcts.advance(0, 0)
    with pytest.raises(ValueError, match="simulations"):
        mcts_baseline_move(state, simulations=0)
    with pytest.raises(ValueError, match="terminal"):
        mcts_baseline_move(play(game, [0, 1, 0, 1, 0, 1, 0]))


# --- MCTS-solver ------------------------------------------------------------------------


def test_solver_proves_a_win_in_one_and_stops_searching():
    state = play(Connect4(), WIN_IN_ONE)
    mcts = BatchedMCTS(Connect4(), 1, num_simulations=800, seed=0)
    policy = mcts.search([state], uniform_evaluator)[0]
    assert policy[3] == 1.0 and mcts.choose_action(0, temperature=1.0) == 3
    np.testing.assert_array_equal(mcts.proven_value(0), [1.0, -1.0])
    assert mcts.root_values(0)[3, 0] == 1.0
    assert mcts.tree_size(0) < 800  # stopped once proven, not after 800 simulations
    unsolved = BatchedMCTS(Connect4(), 1, num_simulations=800, seed=0, solve=False)
    unsolved.search([state], uniform_evaluator)
    assert unsolved.proven_value(0) is None and unsolved.visit_counts(0).sum() == 800


def test_solver_never_plays_a_move_proven_lost():
    state = play(Connect4(), MUST_BLOCK)  # every move but 2 lets O complete the row
    mcts = BatchedMCTS(Connect4(), 1, num_simulations=200, seed=0)
    policy = mcts.search([state], uniform_evaluator)[0]
    assert policy[2] == 1.0
    for seed in range(5):
        mcts = BatchedMCTS(Connect4(), 1, num_simulations=200, seed=seed, dirichlet_epsilon=0.25)
        mcts.search([state], uniform_evaluator)
        assert mcts.choose_action(0, temperature=1.0) == 2


def test_solver_results_match_a_perfect_solver():
    """Late Connect4 positions searched to a proof agree with bitbully: the proven result
    is the game-theoretic one and the proof move keeps it."""
    bitbully = pytest.importorskip("bitbully")
    solver = bitbully.BitBully()
    rng = np.random.default_rng(0)
    proven = 0
    for _ in range(200):
        if proven == 12:
            break
        state, moves = Connect4().new_state(), []
        while len(moves) < 30 and not state.is_terminal():
            moves.append(int(rng.choice(state.legal_actions())))
            state.apply(moves[-1])
        if state.is_terminal():
            continue
        board = bitbully.Board()
        for column in moves:
            board.play(column)
        scores = solver.score_all_moves(board)
        mcts = BatchedMCTS(Connect4(), 1, num_simulations=20000, seed=0)
        policy = mcts.search([state], uniform_evaluator)[0]
        value = mcts.proven_value(0)
        if value is None:
            continue
        proven += 1
        mover = state.current_player()
        best = max(scores.values())
        assert np.sign(value[mover]) == np.sign(best), moves
        chosen = int(policy.argmax())
        assert np.sign(scores[chosen]) == np.sign(best), moves
    assert proven == 12


def test_solver_is_off_in_chance_games():
    state = Pig().new_state(seed=0)
    mcts = BatchedMCTS(Pig(), 1, num_simulations=200, seed=0)
    mcts.search([state], uniform_evaluator)
    assert mcts.proven_value(0) is None and mcts.visit_counts(0).sum() == 200
    with pytest.raises(TypeError, match="solve must be a bool"):
        BatchedMCTS(Connect4(), 1, solve="yes")


def test_per_game_simulations_and_noise():
    states = [Connect4().new_state() for _ in range(3)]
    mcts = BatchedMCTS(Connect4(), 3, num_simulations=50, seed=0)
    policies = mcts.search(states, uniform_evaluator, simulations=[50, 10, 1], noise=[True, False, False])
    assert [int(mcts.visit_counts(i).sum()) for i in range(3)] == [50, 10, 1]
    assert np.allclose(policies.sum(axis=1), 1.0)
    # Without noise the search is the noise-free search: equal to one with dirichlet_epsilon 0.
    quiet = BatchedMCTS(Connect4(), 1, num_simulations=10, dirichlet_epsilon=0.0, seed=0)
    quiet.search(states[:1], uniform_evaluator)
    np.testing.assert_array_equal(mcts.visit_counts(1), quiet.visit_counts(0))
    with pytest.raises(ValueError, match=r"simulations\[0\]"):
        mcts.search(states, uniform_evaluator, simulations=[51, 1, 1])
    with pytest.raises(ValueError, match="simulations must have batch_size=3"):
        mcts.search(states, uniform_evaluator, simulations=[1, 1])


def test_root_value_is_the_mean_backed_up_value_and_exact_once_proven():
    def half(observations, legal_masks):  # the mover always expects to score 0.5
        priors, values = uniform_evaluator(observations, legal_masks)
        values[:, 0], values[:, 1] = 0.5, -0.5
        return priors, values

    mcts = BatchedMCTS(Connect4(), 1, num_simulations=20, seed=0, dirichlet_epsilon=0.0)
    mcts.search([Connect4().new_state()], half)
    value = mcts.root_value(0)
    assert value.shape == (2,) and value[0] == pytest.approx(-value[1]) and -0.5 <= value[0] <= 0.5
    winning = play(Connect4(), WIN_IN_ONE)
    mcts.reset(0)
    mcts.search([winning], half)
    np.testing.assert_array_equal(mcts.root_value(0), [1.0, -1.0])


# --- what a finished game is worth -------------------------------------------------------


@pytest.mark.parametrize("returns, outcome, lead", [
    ([0.05, -0.05], [1.0, -1.0], [0.05, -0.05]), ([0.0, 0.0], [0.0, 0.0], [0.0, 0.0]),
    ([-1.0, 1.0], [-1.0, 1.0], [-1.0, 1.0]),
    ([0.1, 0.0, -0.1], [1.0, -0.5, -0.5], [0.05, -0.05, -0.1]),  # one winner of three
    ([0.1, 0.1, -0.1, -0.1], [1 / 3, 1 / 3, -1 / 3, -1 / 3], [0.0, 0.0, -0.1, -0.1]),  # two share the win
    ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]),  # everyone tied
])
def test_game_utility_mixes_the_returns_or_leads_with_the_zero_sum_outcome(returns, outcome, lead):
    for weight in (0.0, 0.3, 1.0):
        expected = weight * np.array(outcome) + (1 - weight) * np.array(returns)
        np.testing.assert_allclose(game_utility(returns, outcome_weight=weight), expected, rtol=1e-6, atol=1e-7)
        assert abs(game_utility(returns, outcome_weight=weight).sum()) < 1e-6  # zero-sum returns stay zero-sum
        expected = weight * np.array(outcome) + (1 - weight) * np.array(lead)
        np.testing.assert_allclose(game_utility(returns, True, weight), expected, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="outcome_weight"):
        game_utility(returns, outcome_weight=1.5)
    with pytest.raises(TypeError, match="lead_returns"):
        game_utility(returns, lead_returns=1)
    with pytest.raises(ValueError, match="returns must hold"):
        game_utility([], outcome_weight=0.5)
    with pytest.raises(ValueError, match="outcome_weight"):
        BatchedMCTS(Connect4(), 1, outcome_weight=-0.1)
    with pytest.raises(TypeError, match="lead_returns"):
        BatchedMCTS(Connect4(), 1, lead_returns="yes")


def ends_the_game(state, action):
    child = state.clone()
    child.apply(action)
    return child.is_terminal()


def test_a_move_that_ends_the_game_is_worth_its_game_utility_to_the_search():
    """Azul's returns are score - mean score; with lead_returns the search backs up each
    seat's lead over the best other, with outcome_weight a mix with who won. The last
    round draws no tiles, so its moves' results are exact."""
    state, rng = Azul().new_state(seed=3, num_players=3), np.random.default_rng(0)
    while not any(ends_the_game(state, action) for action in state.legal_actions()):
        state.apply(int(rng.choice(state.legal_actions())))
    legal = state.legal_actions()
    for lead, weight in ((False, 0.0), (True, 0.0), (False, 0.6), (True, 1.0)):
        mcts = BatchedMCTS(Azul(), 1, num_simulations=4 * len(legal), normalize_values=True,
                           lead_returns=lead, outcome_weight=weight, dirichlet_epsilon=0.0)
        mcts.search([state], uniform_evaluator)
        visits, values = mcts.visit_counts(0), mcts.root_values(0)
        ending = [action for action in legal if visits[action] and ends_the_game(state, action)]
        assert ending
        for action in ending:
            child = state.clone()
            child.apply(action)
            np.testing.assert_allclose(values[action], game_utility(child.returns(), lead, weight), rtol=1e-5)


# --- Gumbel root -------------------------------------------------------------------------


def favouring(*actions):
    """An evaluator whose prior puts 10x the mass on `actions`, values zero."""
    def evaluate(observations, legal_masks):
        priors, values = uniform_evaluator(observations, legal_masks)
        priors[:, list(actions)] *= 10.0
        return priors / priors.sum(axis=1, keepdims=True), values
    return evaluate


def test_gumbel_sequential_halving_spreads_visits_over_the_considered_actions():
    state = Connect4().new_state()
    mcts = BatchedMCTS(Connect4(), 1, num_simulations=8, gumbel=True, max_considered=4, solve=False, seed=0)
    mcts.search([state], uniform_evaluator)
    # 4 actions once each, then the better 2 three times (Danihelka et al.'s schedule)
    assert sorted(mcts.visit_counts(0)) == [0, 0, 0, 1, 1, 3, 3]
    # Without noise the considered actions are the prior's best.
    quiet = BatchedMCTS(Connect4(), 1, num_simulations=8, gumbel=True, max_considered=2, root_noise=False, seed=0)
    quiet.search([state], favouring(5, 6))
    assert set(np.flatnonzero(quiet.visit_counts(0))) == {5, 6}


def test_gumbel_finds_a_win_with_few_simulations_and_returns_the_improved_policy():
    state = play(Connect4(), WIN_IN_ONE)
    for seed in range(5):
        mcts = BatchedMCTS(Connect4(), 1, num_simulations=8, gumbel=True, solve=False, seed=seed)
        policy = mcts.search([state], uniform_evaluator)[0]
        assert policy.sum() == pytest.approx(1.0) and policy.argmax() == 3 and policy[3] > 0.9
        assert mcts.choose_action(0, temperature=1.0) == 3
    blocked = play(Connect4(), MUST_BLOCK)
    mcts = BatchedMCTS(Connect4(), 1, num_simulations=64, gumbel=True, seed=0)  # with the solver
    policy = mcts.search([blocked], uniform_evaluator)[0]
    assert policy.argmax() == 2 and mcts.choose_action(0, temperature=0.0) == 2


def test_gumbel_policy_covers_legal_actions_only_and_is_seeded():
    state = play(Connect4(), [3, 3, 3, 3, 3, 3])  # column 3 full
    policies = [BatchedMCTS(Connect4(), 1, num_simulations=16, gumbel=True, seed=seed).search([state], favouring(0))[0]
                for seed in (1, 1, 2)]
    np.testing.assert_array_equal(policies[0], policies[1])
    assert policies[0][3] == 0 and policies[0].sum() == pytest.approx(1.0)
    assert policies[0].argmax() == 0  # the prior's favourite, no value to say otherwise
    with pytest.raises(ValueError, match="max_considered"):
        BatchedMCTS(Connect4(), 1, gumbel=True, max_considered=0)
    with pytest.raises(TypeError, match="root_noise must be a bool"):
        BatchedMCTS(Connect4(), 1, root_noise=1)
