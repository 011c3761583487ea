"""Connect4 agents judged move by move by a perfect solver (bitbully, with its opening book).

For every position of a seeded set the solver scores each legal move (> 0: the mover
wins, 0: draw, < 0: loss; larger is a faster win or a slower loss). A chosen move
"keeps the result" when its score has the sign of the best one (Pons's "no mistake":
a won position stays won, a drawn one drawn) and is "optimal" when it equals the best
score. "decisive" rows count only the positions where some legal move changes the
result: elsewhere every move keeps it.

Position sources (each seeded, non-terminal positions only):
- random: openings of 0-30 uniformly random plies;
- strong: positions of games between solver players that play a uniformly random move
  15% of the time (the positions strong play reaches);
- pons: Pons's benchmark categories, positions of random games bucketed by plies played
  and the plies left under perfect play (begin <= 14 < middle <= 28 < end; easy < 14
  <= medium < 28 <= hard), as in his Test_L*_R* sets.

    puffercore judge connect4 runs/alphazero-connect4-0-... --simulations 1 50 400
    puffercore judge connect4 solver random            # the judge's own sanity sides

Agents: a checkpoint (file or run directory); `solver` (plays a best move: 100% by
construction); `random`. Simulations 1 means the raw network: its most probable legal move.
Needs bitbully (`pip install "puffercore[bench]"`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass

import numpy as np

from puffercore.games import Connect4

INSTALL = 'pip install "puffercore[bench]"'
PONS_CATEGORIES = ("begin-easy", "begin-medium", "begin-hard", "middle-easy", "middle-medium", "end-easy")
CELLS = 42


@dataclass
class Position:
    moves: list[int]           # columns played from the empty board
    scores: dict[int, int]     # the solver's score of every legal move, for the mover

    @property
    def best(self) -> int:
        return max(self.scores.values())

    @property
    def decisive(self) -> bool:
        best_sign = np.sign(self.best)
        return any(np.sign(score) != best_sign for score in self.scores.values())

    def plies_left(self) -> int:
        """Plies to the end of the game under perfect play (a score s > 0 means the
        mover's winning stone is dropped when 43 - 2s stones are on the board)."""
        if self.best == 0:
            return CELLS - len(self.moves)
        return CELLS + 1 - 2 * abs(self.best) - len(self.moves) + 1


class Judge:
    """bitbully behind the two questions the judge asks of a position."""

    def __init__(self):
        try:
            import bitbully
        except ImportError:
            raise ImportError(f"the Connect4 judge needs the solver bitbully: {INSTALL}") from None
        self.bitbully = bitbully
        self.solver = bitbully.BitBully()

    def board(self, moves: list[int]):
        board = self.bitbully.Board()
        for column in moves:
            board.play(column)
        return board

    def scores(self, moves: list[int]) -> dict[int, int]:
        return {int(column): int(score) for column, score in self.solver.score_all_moves(self.board(moves)).items()}

    def over(self, moves: list[int]) -> bool:
        return self.board(moves).is_game_over()


def _random_game(rng: np.random.Generator, plies: int) -> list[int] | None:
    """`plies` uniformly random moves from the empty board, or None if the game ends first."""
    state = Connect4().new_state()
    moves = []
    for _ in range(plies):
        column = int(rng.choice(state.legal_actions()))
        state.apply(column)
        moves.append(column)
        if state.is_terminal():
            return None
    return moves


def _strong_game_positions(rng: np.random.Generator, judge: Judge, epsilon: float = 0.15) -> list[Position]:
    """Every non-terminal position of one game of solver players with epsilon-random moves."""
    state, moves, positions = Connect4().new_state(), [], []
    while not state.is_terminal():
        position = Position(list(moves), judge.scores(moves))
        positions.append(position)
        if rng.random() < epsilon:
            column = int(rng.choice(state.legal_actions()))
        else:
            best = [column for column, score in position.scores.items() if score == position.best]
            column = int(rng.choice(best))
        state.apply(column)
        moves.append(column)
    return positions


def _pons_category(position: Position) -> str | None:
    plies, left = len(position.moves), position.plies_left()
    phase = "begin" if plies <= 14 else "middle" if plies <= 28 else "end"
    level = "easy" if left < 14 else "medium" if left < 28 else "hard"
    name = f"{phase}-{level}"
    return name if name in PONS_CATEGORIES else None


def cached_positions(judge: Judge, source: str, count: int, seed: int, cache_dir: str | None) -> list[Position]:
    """build_positions, kept in `cache_dir` (solving takes about a minute per thousand)."""
    if not cache_dir:
        return build_positions(judge, source, count, seed)
    path = os.path.join(cache_dir, f"{source}-{count}-seed{seed}.json")
    if os.path.exists(path):
        return _read_positions(path, count)
    positions = build_positions(judge, source, count, seed)
    os.makedirs(cache_dir, exist_ok=True)
    with open(f"{path}.{os.getpid()}.tmp", "w") as file:
        json.dump([[position.moves, position.scores] for position in positions], file)
    os.replace(f"{path}.{os.getpid()}.tmp", path)
    return positions


def _read_positions(path: str, count: int) -> list[Position]:
    """A cached position set, checked: `count` entries of [columns played, {column: score}]
    whose moves replay legally; ValueError naming the file otherwise (delete it to solve
    the set again)."""
    try:
        with open(path, encoding="utf-8") as file:
            entries = json.load(file)
        positions = [Position([int(column) for column in moves], {int(column): int(score)
                                                                   for column, score in scores.items()})
                     for moves, scores in entries]
        for position, state in zip(positions, states_of(positions)):
            if state.is_terminal() or sorted(position.scores) != state.legal_actions():
                raise ValueError("a position's scores are not its legal moves")
        if len(positions) != count:
            raise ValueError(f"{len(positions)} positions, not {count}")
    except (ValueError, TypeError, AttributeError, RuntimeError) as error:
        raise ValueError(f"{path}: not a cached position set ({error}); delete it to solve the set again") from None
    return positions


def build_positions(judge: Judge, source: str, count: int, seed: int) -> list[Position]:
    """`count` positions of one source (a Pons category name for the Pons sets), seeded."""
    rng = np.random.default_rng([seed, sum(map(ord, source))])
    positions: list[Position] = []
    if source == "random":
        while len(positions) < count:
            moves = _random_game(rng, int(rng.integers(0, 31)))
            if moves is not None:
                positions.append(Position(moves, judge.scores(moves)))
    elif source == "strong":
        while len(positions) < count:
            game = _strong_game_positions(rng, judge)
            positions.extend(game[i] for i in rng.permutation(len(game))[: max(1, len(game) // 4)])
        positions = positions[:count]
    elif source in PONS_CATEGORIES:
        phase = source.split("-")[0]
        low, high = {"begin": (0, 14), "middle": (15, 28), "end": (29, 41)}[phase]
        tries = 0
        while len(positions) < count:
            tries += 1
            if tries > 200 * count:
                raise RuntimeError(f"found only {len(positions)} {source} positions in {tries} random games")
            moves = _random_game(rng, int(rng.integers(low, high + 1)))
            if moves is None:
                continue
            position = Position(moves, judge.scores(moves))
            if _pons_category(position) == source:
                positions.append(position)
    else:
        raise ValueError(f"source must be random, strong or one of {PONS_CATEGORIES}, got {source!r}")
    return positions


def states_of(positions: list[Position]) -> list:
    states = []
    for position in positions:
        state = Connect4().new_state()
        for column in position.moves:
            state.apply(column)
        states.append(state)
    return states


def choose_moves(agent, positions: list[Position], simulations: int, seed: int) -> list[int]:
    """The agent's move in every position: `solver` and `random` by name, else an
    AlphaZeroAgent searching all positions at once (1 simulation: the network's argmax)."""
    if agent == "solver":
        return [max(position.scores, key=position.scores.get) for position in positions]
    if agent == "random":
        rng = np.random.default_rng(seed)
        return [int(rng.choice(sorted(position.scores))) for position in positions]
    states = states_of(positions)
    if simulations == 1:
        observations = np.stack([state.observation() for state in states])
        masks = np.stack([state.legal_mask() for state in states])
        priors, _ = agent.evaluate(observations, masks)
        return [int(np.argmax(np.where(mask, prior, -1.0))) for prior, mask in zip(priors, masks)]
    mcts = agent.search(len(states), simulations, seed=seed)
    mcts.search(states, agent.evaluate)
    return [mcts.choose_action(index, temperature=0.0) for index in range(len(states))]


def score_moves(positions: list[Position], moves: list[int]) -> dict[str, float]:
    """Shares of moves that keep the result and that are optimal (all positions, and the
    decisive ones)."""
    keeps = np.array([np.sign(p.scores[m]) == np.sign(p.best) for p, m in zip(positions, moves)])
    optimal = np.array([p.scores[m] == p.best for p, m in zip(positions, moves)])
    decisive = np.array([p.decisive for p in positions])
    return {"keeps_result": float(keeps.mean()), "optimal": float(optimal.mean()),
            "decisive_keeps_result": float(keeps[decisive].mean()) if decisive.any() else float("nan"),
            "decisive_positions": int(decisive.sum()), "positions": len(positions)}


def report(label: str, name: str, result: dict, seconds: float | None = None) -> dict:
    timing = f"  ({seconds:.1f} s)" if seconds is not None else ""
    print(f"{label} {name:>13}: keeps result {result['keeps_result']:6.1%}  optimal {result['optimal']:6.1%}  "
          f"decisive positions: keeps {result['decisive_keeps_result']:6.1%} of "
          f"{result['decisive_positions']}/{result['positions']}{timing}", flush=True)
    return result


def load_agent(name: str, threads: int, solve: bool | None = None):
    if name in ("solver", "random"):
        return name
    import torch

    from puffercore.alphazero.evaluation import AlphaZeroAgent

    torch.set_num_threads(threads)
    agent = AlphaZeroAgent.load(name)
    if agent.config.game != "connect4":
        raise ValueError(f"{name} plays {agent.config.game}, not connect4")
    if solve is not None:
        agent.config = dataclasses.replace(agent.config, solve=solve)
    return agent


def judge(agents: list[str], simulations: list[int], sources: list[str], positions: int, seed: int = 0,
          cache: str | None = None, threads: int = 2, solve: bool | None = None) -> dict:
    """Judge every agent at every simulation count on every source's positions, printing
    a line per (agent, simulations, source) and one for all sources together; returns
    {(agent, simulations, source or "all"): score_moves(...)}. `pons` stands for its six
    categories (a fifth of `positions` each); `cache`: where solved sets are kept."""
    if positions < 1 or any(count < 1 for count in simulations):
        raise ValueError(f"positions and simulations must be >= 1, got {positions} and {simulations}")
    unknown = sorted(set(sources) - {"random", "strong", "pons", *PONS_CATEGORIES})
    if unknown:
        raise ValueError(f"sources must be among random, strong, pons and {', '.join(PONS_CATEGORIES)}; got {unknown}")
    solver = Judge()
    sets = {}
    start = time.perf_counter()
    for source in sources:
        names = PONS_CATEGORIES if source == "pons" else (source,)
        count = max(1, positions // 5) if source == "pons" else positions
        for name in names:
            sets[name] = cached_positions(solver, name, count, seed, cache)
    print(f"{sum(map(len, sets.values()))} positions ready in {time.perf_counter() - start:.0f} s")

    results = {}
    for agent_name in agents:
        agent = load_agent(agent_name, threads, solve)
        label = agent_name if isinstance(agent, str) else f"{agent_name} {{}} sims"
        for count in [0] if isinstance(agent, str) else simulations:
            all_positions, all_moves = [], []
            for name, chosen in sets.items():
                start = time.perf_counter()
                moves = choose_moves(agent, chosen, count, seed)
                results[(agent_name, count, name)] = report(label.format(count), name, score_moves(chosen, moves),
                                                            time.perf_counter() - start)
                all_positions += chosen
                all_moves += moves
            results[(agent_name, count, "all")] = report(label.format(count), "all",
                                                         score_moves(all_positions, all_moves))
    return results
