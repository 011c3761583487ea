"""Tree search in native code over any puffercore game (native/mcts/):

- `BatchedMCTS`: AlphaZero PUCT search of many games at once, one evaluator call per
  round for all their leaves, node pools reused across moves.
- `mcts_baseline_move`: plain UCT with random rollouts, the evaluation baseline.
- `uniform_evaluator`: uniform priors, zero values (tests and benchmarks).
- `game_utility`: what a finished game is worth to the search (its returns, or each
  seat's lead over the best other, mixed with who won), which self-play's value targets
  use too.

Self-play loop sketch (what a trainer drives):

    mcts = BatchedMCTS(game, batch_size=B, num_simulations=200, seed=0)
    states = [game.new_state(seed=i) for i in range(B)]
    policies = mcts.search(states, evaluator)
    for i, state in enumerate(states):
        action = mcts.choose_action(i, temperature=1.0 if moves < k else 0.0)
        state.apply(action)
        mcts.advance(i, action)
"""

from puffercore._search import BatchedMCTS, game_utility, mcts_baseline_move, uniform_evaluator

__all__ = ["BatchedMCTS", "game_utility", "mcts_baseline_move", "uniform_evaluator"]
