"""AlphaZero training, top to bottom: self-play with the batched native MCTS fills a ring
replay buffer with (observation, search policy, outcome) examples; the network learns to
predict both (policy cross-entropy plus value MSE); every few iterations it plays the
random agent and the plain MCTS baseline in both seats; checkpoints resume exactly.

    config = AlphaZeroConfig.for_game("connect4", minutes=30)
    trainer = train(config)                          # or: puffercore alphazero connect4
    agent = AlphaZeroAgent.load(trainer.checkpoint_path)
    action = agent.act(state, simulations=200)

One iteration plays `games_per_iteration` whole games, `parallel_games` at a time: each
MCTS round asks the network once for all the games' leaves (inference on the CPU under
no_grad). Iterations begin with a fresh search seeded from (run seed, iteration) and
no game in flight, so a checkpoint between iterations resumes exactly.
"""

from __future__ import annotations

import dataclasses
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from puffercore import checkpoint, run
from puffercore.alphazero.agents import GreedyAzulAgent, MCTSBaseline, RandomAgent
from puffercore.alphazero.mcts import BatchedMCTS
from puffercore.alphazero.network import PolicyValueNet
from puffercore.distributed import Group
from puffercore.games import Azul, Connect4, TicTacToe
from puffercore.logger import Logger, console_view
from puffercore.seeding import check_seed, derive_seed, named_seeds

GAMES = {"azul": Azul, "connect4": Connect4, "tictactoe": TicTacToe}
# Evaluation opponents beyond the random agent and the MCTS baseline every game gets.
GAME_OPPONENTS = {"azul": {"greedy": lambda game_seed: GreedyAzulAgent()}}

# Every source of randomness draws from its own child of the run seed.
SEED_NAMES = ("network", "self_play", "replay", "evaluation", "games")


def _option(default, help: str):
    return field(default=default, metadata={"help": help})


@dataclass
class AlphaZeroConfig:
    game: str = _option("connect4", f"game to learn: {', '.join(GAMES)}")
    num_players: int = _option(2, "players per game")
    seed: int = _option(0, "run seed; every random stream gets a named child seed of it")
    run_dir: str = _option("", "where metrics and the checkpoint go (default runs/GAME-SEED-TIME)")
    iterations: int = _option(100, "stop after this many iterations")
    minutes: float = _option(0.0, "also stop after this much training wall time (0: no limit)")
    torch_threads: int = _option(2, "torch intra-op threads for training (self-play threads use one each)")
    self_play_threads: int = _option(2, "threads playing self-play games at once, each with its own batched search")
    # network
    channels: int = _option(64, "width of the residual tower")
    blocks: int = _option(3, "residual blocks")
    # self-play
    games_per_iteration: int = _option(128, "self-play games per iteration")
    parallel_games: int = _option(128, "games searched at once (one network forward per round for all)")
    simulations: int = _option(100, "MCTS simulations per self-play move")
    c_base: float = _option(19652.0, "PUCT c_base")
    c_init: float = _option(1.25, "PUCT c_init")
    normalize_values: bool = _option(False, "PUCT sees Q rescaled to [0, 1] by the tree's value range (for returns far from [-1, 1])")
    dirichlet_alpha: float = _option(0.3, "Dirichlet noise concentration at the root")
    dirichlet_epsilon: float = _option(0.25, "weight of the root noise")
    temperature_moves: int = _option(10, "moves sampled in proportion to visits (temperature 1); later ones argmax")
    max_moves: int = _option(0, "a game stops (scored by its returns so far) after this many moves; 0: the game's own bound")
    # training
    replay_capacity: int = _option(100_000, "examples kept; the oldest are overwritten")
    batch_size: int = _option(256, "examples per gradient step, sampled uniformly with replacement")
    train_steps: int = _option(100, "gradient steps per iteration")
    optimizer: str = _option("adam", "adam (AdamW) or sgd (with momentum 0.9)")
    learning_rate: float = _option(1e-3, "optimizer learning rate")
    weight_decay: float = _option(1e-4, "weight decay")
    augment_symmetries: bool = _option(True, "train on positions seen through a random symmetry of the board (Connect4: mirror)")
    policy_loss_weight: float = _option(1.0, "weight of the policy cross-entropy")
    value_loss_weight: float = _option(1.0, "weight of the value MSE")
    # evaluation and checkpoints
    eval_interval: int = _option(5, "evaluate every this many iterations (0: never)")
    eval_games: int = _option(20, "games against each opponent, half in each seat")
    eval_simulations: int = _option(100, "agent's MCTS simulations per move in evaluation")
    baseline_simulations: int = _option(1000, "the MCTS baseline's simulations per move")
    checkpoint_interval: int = _option(1, "save a checkpoint every this many iterations")

    @classmethod
    def for_game(cls, game: str, **overrides) -> "AlphaZeroConfig":
        """The game's preset with `overrides` applied."""
        if game not in PRESETS:
            raise ValueError(f"game must be one of {sorted(PRESETS)}, got {game!r}")
        config = cls(game=game, **{**PRESETS[game], **overrides})
        config.validate()
        return config

    def validate(self) -> None:
        if self.game not in GAMES:
            raise ValueError(f"game must be one of {sorted(GAMES)}, got {self.game!r}")
        check_seed(self.seed)
        positive = ("num_players", "iterations", "torch_threads", "self_play_threads", "channels", "games_per_iteration",
                    "parallel_games", "simulations", "replay_capacity", "train_steps", "eval_games",
                    "eval_simulations", "baseline_simulations", "checkpoint_interval")
        non_negative = ("blocks", "temperature_moves", "max_moves", "eval_interval", "minutes",
                        "weight_decay", "policy_loss_weight", "value_loss_weight")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in non_negative:
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.batch_size < 2:  # batch norm needs two examples to normalise over
            raise ValueError(f"batch_size must be >= 2, got {self.batch_size}")
        if self.optimizer not in ("adam", "sgd"):
            raise ValueError(f"optimizer must be 'adam' or 'sgd', got {self.optimizer!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if not 0 <= self.dirichlet_epsilon <= 1 or not self.dirichlet_alpha > 0:
            raise ValueError("dirichlet_alpha must be > 0 and dirichlet_epsilon in [0, 1]")
        if self.eval_games % 2:
            raise ValueError(f"eval_games must be even (half in each seat), got {self.eval_games}")
        game = GAMES[self.game]()
        if not game.min_players <= self.num_players <= game.max_players:
            raise ValueError(f"{self.game} takes {game.min_players}-{game.max_players} players, got num_players={self.num_players}")


PRESETS = {
    # Sized for two CPU cores: a game of 9 moves needs little search and a tiny net.
    "tictactoe": dict(channels=32, blocks=1, games_per_iteration=64, parallel_games=64, simulations=40,
                      temperature_moves=3, replay_capacity=20_000, batch_size=128, train_steps=40,
                      iterations=15, eval_interval=5, eval_games=20, eval_simulations=40),
    # Self-play time goes almost all (95%) into the network's forward passes, so the tower
    # is narrow (32 channels) and the search short; two threads of 128 games each overlap
    # one thread's tree work with the other's forward (1.09-1.2x the games of one thread
    # of 256 with 2 torch threads: `python bench/bench_alphazero_selfplay.py`). Each
    # example is trained on about 1.5 times per mirror image: 12-minute A/B runs on one
    # core each, 200 games at 100 simulations against the 1000-rollout UCT baseline, went
    # from 48% (no mirror, a third of the gradient steps) to 69%.
    "connect4": dict(channels=32, blocks=3, games_per_iteration=256, parallel_games=256, simulations=64,
                     dirichlet_alpha=1.0, temperature_moves=8, replay_capacity=100_000, batch_size=128,
                     learning_rate=2e-3, train_steps=300, iterations=1000, minutes=30, eval_interval=4,
                     eval_games=20, eval_simulations=100),
    # Azul: flat observations (an MLP tower), ~60 moves a game with dozens of legal moves.
    # Returns are score margins / 100 (mostly within +-0.2), so PUCT normalizes Q and the
    # value loss is weighted up (x10 took the greedy-bot win rate after 4 minutes from 2%
    # to 36%; x30 gave 24%, 100 simulations 17%: fewer games). An iteration takes seconds
    # and UCT rollouts of whole Azul games are slow, so evaluation is sparse, its baseline
    # searches less, and the 200 MB checkpoint is written every 10 iterations. Self-play
    # stays on one thread: the small MLP's forward is mostly per-op Python overhead under
    # the GIL, and two threads of 32 games made 0.52x the games of one thread of 64
    # (`python bench/bench_alphazero_selfplay.py --game azul`).
    "azul": dict(channels=128, blocks=2, games_per_iteration=64, parallel_games=64, simulations=50,
                 self_play_threads=1,
                 normalize_values=True, dirichlet_alpha=0.3, temperature_moves=12, replay_capacity=100_000,
                 batch_size=256, learning_rate=1e-3, train_steps=50, value_loss_weight=10.0, iterations=100_000,
                 minutes=60, eval_interval=25, eval_games=20, eval_simulations=50, baseline_simulations=200,
                 checkpoint_interval=10),
}


# --- replay buffer -------------------------------------------------------------------


class ReplayBuffer:
    """A ring of (observation, legal mask, search policy, value target) examples with a
    fixed capacity: once full, each new example overwrites the oldest."""

    def __init__(self, capacity: int, observation_shape: tuple[int, ...], num_actions: int, num_players: int):
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        self.capacity = capacity
        self.observations = np.zeros((capacity, *observation_shape), dtype=np.float32)
        self.legal_masks = np.zeros((capacity, num_actions), dtype=np.bool_)
        self.policies = np.zeros((capacity, num_actions), dtype=np.float32)
        self.values = np.zeros((capacity, num_players), dtype=np.float32)
        self.write_index = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def extend(self, observations, legal_masks, policies, values) -> None:
        for row in zip(observations, legal_masks, policies, values):
            self.observations[self.write_index], self.legal_masks[self.write_index], \
                self.policies[self.write_index], self.values[self.write_index] = row
            self.write_index = (self.write_index + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def sample(self, rng: np.random.Generator, batch_size: int, symmetries=()) -> dict[str, torch.Tensor]:
        """`batch_size` examples drawn uniformly with replacement, as tensors. With the
        game's `symmetries`, each example is seen through one of them or as it is, drawn
        uniformly: the same position in another orientation, with the same value."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        index = rng.integers(0, self.size, size=batch_size)
        observations, legal_masks, policies = self.observations[index], self.legal_masks[index], self.policies[index]
        if symmetries:
            seen_through = rng.integers(0, len(symmetries) + 1, size=batch_size)  # 0: as it is
            flat = observations.reshape(batch_size, -1)
            for k, (observation_map, action_map) in enumerate(symmetries, start=1):
                rows = np.flatnonzero(seen_through == k)
                flat[rows] = flat[rows][:, observation_map]
                legal_masks[rows] = legal_masks[rows][:, action_map]
                policies[rows] = policies[rows][:, action_map]
        return {"observations": torch.from_numpy(observations), "legal_masks": torch.from_numpy(legal_masks),
                "policies": torch.from_numpy(policies), "values": torch.from_numpy(self.values[index])}

    def state_dict(self) -> dict:
        return {"observations": self.observations[: self.size], "legal_masks": self.legal_masks[: self.size],
                "policies": self.policies[: self.size], "values": self.values[: self.size],
                "write_index": self.write_index}

    def load_state_dict(self, state: dict) -> None:
        self.size = len(state["values"])
        if self.size > self.capacity:
            raise ValueError(f"replay state holds {self.size} examples, more than capacity {self.capacity}")
        for name in ("observations", "legal_masks", "policies", "values"):
            getattr(self, name)[: self.size] = state[name]
        self.write_index = int(state["write_index"])


def value_targets(returns: np.ndarray, player: int) -> np.ndarray:
    """A game's final returns (by seat) as the value target of a position where `player`
    moved: in observation order, that player first, then the next ones in turn order."""
    return np.roll(np.asarray(returns, dtype=np.float32), -player)


# --- network as an MCTS evaluator, agent ----------------------------------------------


def make_evaluator(network: PolicyValueNet):
    """The BatchedMCTS evaluator of a network: priors (softmax over legal actions) and
    values for a batch of leaves, one forward pass, no gradients."""

    @torch.inference_mode()
    def evaluate(observations: np.ndarray, legal_masks: np.ndarray):
        logits, values = network(torch.from_numpy(observations), torch.from_numpy(legal_masks))
        return torch.softmax(logits, dim=1).numpy(), values.numpy()

    return evaluate


def build_network(config: AlphaZeroConfig) -> PolicyValueNet:
    game = GAMES[config.game]()
    return PolicyValueNet(game.observation_shape, game.num_actions, config.num_players,
                          channels=config.channels, blocks=config.blocks)


class AlphaZeroAgent:
    """A trained network behind a greedy (no noise, most visited) MCTS."""

    def __init__(self, network: PolicyValueNet, config: AlphaZeroConfig):
        self.network = network.eval()
        self.config = config
        self.game = GAMES[config.game]()
        self.evaluate = make_evaluator(self.network)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "AlphaZeroAgent":
        """From a checkpoint file or a run directory holding checkpoint.pt."""
        path = run.checkpoint_path(path)
        state = checkpoint.load(path)
        if "alphazero_config" not in state:
            raise ValueError(f"{path} is not an AlphaZero checkpoint")
        config = AlphaZeroConfig(**state["alphazero_config"])
        network = build_network(config)
        network.load_state_dict(state["network"])
        return cls(network, config)

    def search(self, batch_size: int, simulations: int | None = None, seed: int = 0):
        """A noise-free BatchedMCTS for this agent's games."""
        return BatchedMCTS(self.game, batch_size, num_simulations=simulations or self.config.eval_simulations,
                           c_base=self.config.c_base, c_init=self.config.c_init,
                           normalize_values=self.config.normalize_values, dirichlet_epsilon=0.0, seed=seed)

    def act(self, state, simulations: int | None = None) -> int:
        if state.game != self.game:
            raise ValueError(f"this agent plays {self.game.name}, got a {state.game.name} state")
        if state.is_terminal():
            raise ValueError("state is terminal; there is no move to choose")
        mcts = self.search(1, simulations)
        mcts.search([state], self.evaluate)
        return mcts.choose_action(0, temperature=0.0)


def play_against(agent: AlphaZeroAgent, make_opponent, games: int, seed: int,
                 simulations: int | None = None) -> dict[str, float]:
    """`games` games of the agent (`simulations` per move, default its evaluation setting)
    against `make_opponent(seed)`, the agent in seat 0 in the first half and seat 1 in the
    second; all the agent's searches in one batch. Returns its win, draw and loss rates,
    and its win rate in each seat (`win_seat0`, `win_seat1`): a first-mover edge hides in
    the overall rate."""
    seeds = [derive_seed(seed, index) for index in range(games)]
    opponents = [make_opponent(game_seed) for game_seed in seeds]
    agent_seats = [0 if index < games // 2 else 1 for index in range(games)]
    states = [agent.game.new_state(seed=game_seed, num_players=agent.config.num_players) for game_seed in seeds]
    mcts = agent.search(games, simulations, seed=seed)

    def play(index: int, action: int) -> None:
        states[index].apply(action)
        if mcts.root_state(index) is not None:  # keep the agent's tree for its next move
            mcts.advance(index, action)

    while True:
        for index, state in enumerate(states):
            while not state.is_terminal() and state.current_player() != agent_seats[index]:
                play(index, opponents[index].act(state))
        to_search = [None if state.is_terminal() else state for state in states]
        if all(state is None for state in to_search):
            break
        mcts.search(to_search, agent.evaluate)
        for index, state in enumerate(to_search):
            if state is not None:
                play(index, mcts.choose_action(index, temperature=0.0))
    outcomes = []
    for state, seat in zip(states, agent_seats):
        returns = state.returns()
        best_other = np.delete(returns, seat).max()
        outcomes.append(np.sign(returns[seat] - best_other))
    outcomes, agent_seats = np.array(outcomes), np.array(agent_seats)
    return {"win": float((outcomes > 0).mean()), "draw": float((outcomes == 0).mean()),
            "loss": float((outcomes < 0).mean()),
            **{f"win_seat{seat}": float((outcomes[agent_seats == seat] > 0).mean()) for seat in (0, 1)}}


# --- trainer ----------------------------------------------------------------------------


class Trainer:
    """The state of one run; `iterate()` does one self-play + training iteration."""

    def __init__(self, config: AlphaZeroConfig, run_dir: str | None = None):
        config.validate()
        self.config = config
        self.group = Group.from_environment("cpu")  # torchrun's ranks, or this process alone
        self.seeds = named_seeds(config.seed, SEED_NAMES)
        # Under torchrun every rank plays its own games: its game and search streams are
        # its own, the network's initial weights everyone's.
        self.rank_seeds = {name: derive_seed(seed, self.group.rank) if self.group.rank and name != "network" else seed
                           for name, seed in self.seeds.items()}
        self.game = GAMES[config.game]()
        self.max_moves = config.max_moves or self.game.max_moves
        torch.set_num_threads(config.torch_threads)
        torch.manual_seed(self.seeds["network"])
        self.network = build_network(config)
        self.group.broadcast_parameters(self.network)
        parameters = self.network.parameters()
        if config.optimizer == "adam":
            self.optimizer = torch.optim.AdamW(parameters, lr=config.learning_rate, weight_decay=config.weight_decay)
        else:
            self.optimizer = torch.optim.SGD(parameters, lr=config.learning_rate, momentum=0.9,
                                             weight_decay=config.weight_decay)
        self.replay = ReplayBuffer(config.replay_capacity, self.game.observation_shape, self.game.num_actions,
                                   config.num_players)
        self.replay_rng = np.random.default_rng(self.rank_seeds["replay"])
        self.counters = {"iteration": 0, "games": 0, "positions": 0, "train_steps": 0, "seconds": 0.0}
        self.run_dir = run_dir
        self.checkpoint_path = os.path.join(run_dir, run.CHECKPOINT_NAME) if run_dir else None

    # self-play ------------------------------------------------------------------------

    def self_play(self) -> dict[str, float]:
        """Play one iteration's games and add their examples to the replay buffer.

        With self_play_threads = T, game g of the iteration is played by thread g % T,
        each thread with its own batched search (seeded by its index) over its share of
        parallel_games; the native search and torch's forward release the GIL, so one
        thread's tree work overlaps another's network pass. Examples are stored in game
        order: a run depends on its seed and T, not on thread timing."""
        config = self.config
        threads = min(config.self_play_threads, config.games_per_iteration)
        seed = derive_seed(self.rank_seeds["self_play"], self.counters["iteration"])
        evaluate = make_evaluator(self.network.eval())
        shares = [range(k, config.games_per_iteration, threads) for k in range(threads)]
        slots = max(1, config.parallel_games // threads)
        def play_share(k: int) -> list[tuple]:
            if threads > 1:
                # The threads share the cores: intra-op threads would fight them. The
                # setting is per thread (OpenMP), so each pool thread makes its own.
                torch.set_num_threads(1)
            return self._play_games(shares[k], slots, derive_seed(seed, k), evaluate)

        if threads == 1:
            parts = [play_share(0)]
        else:
            with ThreadPoolExecutor(threads) as pool:
                parts = list(pool.map(play_share, range(threads)))
        played = sorted((game for part in parts for game in part), key=lambda game: game[0])
        for _, history, returns in played:
            self._store_game(history, returns)
        lengths = [len(history) for _, history, _ in played]
        # Counters count every rank's games and positions (the same on every rank).
        self.counters["games"] += config.games_per_iteration * self.group.world_size
        self.counters["positions"] += int(self.group.sum(torch.tensor([float(sum(lengths))], dtype=torch.float64))[0])
        return {"self_play/game_length": float(np.mean(lengths)),
                "self_play/first_seat_return": float(np.mean([returns[0] for _, _, returns in played]))}

    def _play_games(self, numbers: range, slots: int, mcts_seed: int, evaluate) -> list[tuple]:
        """Play the iteration's games `numbers`, up to `slots` at once in one batched
        search; returns (number, history, returns) per game, in the order they end."""
        config = self.config
        slots = min(slots, len(numbers))
        mcts = BatchedMCTS(self.game, slots, num_simulations=config.simulations, c_base=config.c_base,
                           c_init=config.c_init, normalize_values=config.normalize_values,
                           dirichlet_alpha=config.dirichlet_alpha,
                           dirichlet_epsilon=config.dirichlet_epsilon, seed=mcts_seed)
        states: list = [None] * slots
        slot_games = [-1] * slots
        histories: list[list] = [[] for _ in range(slots)]
        to_start = iter(numbers)
        played = []

        def start_game(slot: int) -> None:  # the slot's next game, or None once all have started
            histories[slot] = []
            mcts.reset(slot)
            states[slot] = None
            number = next(to_start, None)
            if number is not None:
                seed = derive_seed(self.rank_seeds["games"], self.counters["games"] + number)
                states[slot] = self.game.new_state(seed=seed, num_players=config.num_players)
                slot_games[slot] = number

        for slot in range(slots):
            start_game(slot)
        while any(state is not None for state in states):
            policies = mcts.search(states, evaluate)
            for slot, state in enumerate(states):
                if state is None:
                    continue
                history = histories[slot]
                history.append((state.observation(), state.legal_mask(), policies[slot], state.current_player()))
                temperature = 1.0 if len(history) <= config.temperature_moves else 0.0
                action = mcts.choose_action(slot, temperature)
                state.apply(action)
                mcts.advance(slot, action)
                if state.is_terminal() or len(history) >= self.max_moves:
                    played.append((slot_games[slot], history, state.returns()))
                    start_game(slot)
        return played

    def _store_game(self, history: list, returns: np.ndarray) -> None:
        observations, legal_masks, policies, players = zip(*history)
        targets = [value_targets(returns, player) for player in players]
        self.replay.extend(observations, legal_masks, policies, targets)

    # training -------------------------------------------------------------------------

    def train_step(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        """One gradient step on a batch; returns the losses before the step."""
        config = self.config
        self.network.train()
        logits, values = self.network(batch["observations"], batch["legal_masks"])
        policy_loss = -(batch["policies"] * F.log_softmax(logits, dim=1)).sum(dim=1).mean()
        value_loss = F.mse_loss(values, batch["values"])
        loss = config.policy_loss_weight * policy_loss + config.value_loss_weight * value_loss
        self.optimizer.zero_grad()
        loss.backward()
        self.group.average_gradients(self.network.parameters())  # data-parallel over ranks' replays
        self.optimizer.step()
        self.counters["train_steps"] += 1
        return {"loss/total": loss.item(), "loss/policy": policy_loss.item(), "loss/value": value_loss.item()}

    def train(self) -> dict[str, float]:
        symmetries = self.game.symmetries if self.config.augment_symmetries else ()
        losses = [self.train_step(self.replay.sample(self.replay_rng, self.config.batch_size, symmetries))
                  for _ in range(self.config.train_steps)]
        return {key: float(np.mean([entry[key] for entry in losses])) for key in losses[0]}

    # evaluation -----------------------------------------------------------------------

    def evaluate(self) -> dict[str, float]:
        """Win/draw/loss rates against the random agent and the MCTS baseline."""
        config = self.config
        agent = AlphaZeroAgent(self.network, config)
        seed = derive_seed(self.seeds["evaluation"], self.counters["iteration"])
        opponents = {"random": RandomAgent,
                     "mcts": lambda game_seed: MCTSBaseline(config.baseline_simulations, seed=game_seed),
                     **GAME_OPPONENTS.get(config.game, {})}
        scalars = {}
        for index, (name, make_opponent) in enumerate(opponents.items()):
            rates = play_against(agent, make_opponent, config.eval_games, derive_seed(seed, index))
            scalars.update({f"eval/{name}_{outcome}": rate for outcome, rate in rates.items()})
        return scalars

    # iteration, checkpoints -------------------------------------------------------------

    def iterate(self) -> dict[str, float]:
        """Self-play, train, and (every eval_interval iterations) evaluate."""
        start = time.perf_counter()
        scalars = self.self_play()
        self_play_seconds = time.perf_counter() - start
        scalars.update(self.train())
        self.counters["iteration"] += 1
        # Rank 0's clock, on every rank: a minutes budget must end every rank together.
        self.counters["seconds"] = self.group.from_main(self.counters["seconds"] + time.perf_counter() - start)
        scalars.update({"self_play/games_per_minute": self.config.games_per_iteration / self_play_seconds * 60,
                        "replay/size": float(len(self.replay)),
                        "time/minutes": self.counters["seconds"] / 60})
        if self.group.is_main and self.config.eval_interval and self.counters["iteration"] % self.config.eval_interval == 0:
            # evaluation time is left out of the training clock ("time/minutes")
            scalars.update(self.evaluate())
        return scalars

    def state_dict(self) -> dict:
        return {"alphazero_config": dataclasses.asdict(self.config), "network": self.network.state_dict(),
                "optimizer": self.optimizer.state_dict(), "replay": self.replay.state_dict(),
                "replay_rng": self.replay_rng.bit_generator.state, "torch_rng": torch.get_rng_state(),
                "counters": dict(self.counters)}

    def load_state_dict(self, state: dict) -> None:
        self.network.load_state_dict(state["network"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.replay.load_state_dict(state["replay"])
        self.replay_rng.bit_generator.state = state["replay_rng"]
        torch.set_rng_state(state["torch_rng"])
        self.counters = dict(state["counters"])

    def save(self) -> None:
        """Rank 0 writes (the network is the same everywhere; its replay is rank 0's, so a
        resumed multi-rank run refills the other ranks' replays by self-play)."""
        if self.group.is_main:
            checkpoint.save(self.checkpoint_path, self.state_dict())

    @classmethod
    def resume(cls, run_dir: str) -> "Trainer":
        state = checkpoint.load(os.path.join(run_dir, run.CHECKPOINT_NAME))
        if "alphazero_config" not in state:
            raise ValueError(f"{run_dir} holds no AlphaZero checkpoint")
        trainer = cls(AlphaZeroConfig(**state["alphazero_config"]), run_dir)
        trainer.load_state_dict(state)
        return trainer

    def progress(self) -> float:
        """The fraction of the run done, by iterations or by the time budget."""
        by_time = self.counters["seconds"] / (self.config.minutes * 60) if self.config.minutes else 0.0
        return min(1.0, max(self.counters["iteration"] / self.config.iterations, by_time))

    def done(self) -> bool:
        return self.progress() >= 1.0


# What a resumed run may change: how long it goes on.
BUDGET_FIELDS = ("iterations", "minutes")


def train(config: AlphaZeroConfig | None = None, resume: str | None = None, quiet: bool = False,
          budget: dict | None = None) -> Trainer:
    """Run (or, with `resume=RUN_DIR`, continue) a training run until `config.iterations`
    or `config.minutes`; metrics go to RUN_DIR (CSV, TensorBoard) and the console. A
    resumed run may get a new `budget` ({"minutes": 90} extends a finished run)."""
    if resume:
        trainer = Trainer.resume(resume)
        if budget:
            unknown = set(budget) - set(BUDGET_FIELDS)
            if unknown:
                raise ValueError(f"budget may set only {BUDGET_FIELDS}, got {sorted(unknown)}")
            trainer.config = dataclasses.replace(trainer.config, **budget)
            trainer.config.validate()
    else:
        trainer = Trainer(config, config.run_dir or run.default_run_dir(f"alphazero-{config.game}-{config.seed}"))
    config, main = trainer.config, trainer.group.is_main
    quiet = quiet or not main
    logger = None
    if main:  # under torchrun rank 0 alone writes
        run.write_run_files(trainer.run_dir, dataclasses.asdict(config), config.seed, trainer.seeds)
        logger = Logger(trainer.run_dir, config=dataclasses.asdict(config), quiet=quiet,
                        resume_step=trainer.counters["positions"] if resume else None)
    if not quiet:
        print(f"run directory: {trainer.run_dir}; seeds: {trainer.seeds}")
    try:
        while not trainer.done():
            scalars = trainer.iterate()
            if logger is not None:
                logger.log(trainer.counters["positions"], scalars)
            if trainer.counters["iteration"] % config.checkpoint_interval == 0 or trainer.done():
                trainer.save()
            if not quiet:
                title = f"alphazero {config.game}: iteration {trainer.counters['iteration']}, " \
                        f"{trainer.counters['games']} games"
                print(console_view(title, scalars, progress=trainer.progress()))
    except BaseException:
        trainer.group.close(failed=True)
        raise
    finally:
        if logger is not None:
            logger.close()
    trainer.group.close()
    return trainer
