"""AlphaZero's settings in one dataclass (every field a flag of `puffercore alphazero`) and
the presets of the games it learns.

    config = AlphaZeroConfig.for_game("connect4", minutes=30)   # preset + overrides
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from puffercore.flags import check_fields, field_docs, option
from puffercore.games import Azul, Connect4, TicTacToe
from puffercore.precision import PRECISIONS
from puffercore.seeding import check_seed

GAMES = {"azul": Azul, "connect4": Connect4, "tictactoe": TicTacToe}
DEVICE = re.compile(r"cpu|cuda(:[0-9]+)?")


@dataclass
class AlphaZeroConfig:
    """AlphaZero's settings; `AlphaZeroConfig.for_game(game)` applies a game's preset. Each
    field is the flag --GROUP.NAME of `puffercore alphazero` (the run group's have no
    prefix); `validate()` raises ValueError naming a bad field."""

    game: str = option("connect4", "run", f"game to learn: {', '.join(GAMES)}")
    num_players: int = option(2, "run", "players per game")
    seed: int = option(0, "run", "run seed; every random stream gets a named child seed of it")
    run_dir: str = option("", "run", "where metrics and the checkpoint go (default runs/GAME-SEED-TIME)")
    iterations: int = option(100, "run", "stop after this many iterations")
    minutes: float = option(0.0, "run", "also stop after this much training wall time (0: no limit)")
    evaluation_cache: int = option(200_000, "self_play", "positions whose evaluation each self-play thread remembers within an "
                                                         "iteration (0: none)")
    inference_precision: str = option("auto", "self_play", "self-play and evaluation network precision: auto (bfloat16 for "
                                                           "convolutional networks where the CPU computes it natively, else "
                                                           "float32; bfloat16 on cuda), float32 or bfloat16")
    inference_trace: bool = option(True, "self_play", "run self-play's and evaluation's network as a frozen TorchScript trace "
                                                      "(false: eager PyTorch; an untraceable network stays eager anyway; on cuda: "
                                                      "CUDA graphs instead)")
    train_precision: str = option("auto", "train", "training's forward and backward: auto (bf16 mixed precision where the CPU "
                                                   "computes it natively or on cuda, else float32), float32 or bfloat16")
    torch_threads: int = option(2, "run", "torch intra-op threads for training (self-play threads use one each)")
    device: str = option("cpu", "run", "where the network trains and self-play's evaluations run: cpu, cuda or cuda:N "
                                       "(cuda: batched on the GPU, with the preset's cuda_settings sizes)")
    self_play_threads: int = option(2, "run", "threads playing self-play games at once, each with its own batched search")
    # network
    channels: int = option(64, "network", "width of the residual tower")
    blocks: int = option(3, "network", "residual blocks")
    # self-play
    games_per_iteration: int = option(128, "self_play", "self-play games per iteration")
    parallel_games: int = option(128, "self_play", "games searched at once (one network forward per round for all)")
    simulations: int = option(100, "search", "MCTS simulations per self-play move")
    c_base: float = option(19652.0, "search", "PUCT c_base")
    c_init: float = option(1.25, "search", "PUCT c_init")
    normalize_values: bool = option(False, "search", "PUCT sees Q rescaled to [0, 1] by the tree's value range "
                                                       "(for returns far from [-1, 1])")
    solve: bool = option(True, "search", "MCTS-solver in games without chance events: proven wins, losses and draws back up "
                                         "exactly, are never evaluated again and end a search early")
    gumbel: bool = option(False, "search", "Gumbel root search (Gumbel MuZero): Gumbel-top-k sampled actions, sequential "
                                           "halving, the improved policy as target; strong with few simulations")
    gumbel_considered: int = option(16, "search", "actions the Gumbel root considers")
    dirichlet_alpha: float = option(0.3, "search", "Dirichlet noise concentration at the root")
    dirichlet_epsilon: float = option(0.25, "search", "weight of the root noise")
    full_search_fraction: float = option(1.0, "search", "playout cap randomization (KataGo): the share of moves searched with "
                                                        "`simulations` and root noise and trained on; the others get "
                                                        "fast_simulations, no noise, and only move the game on")
    fast_simulations: int = option(16, "search", "simulations of the cheap searches (full_search_fraction < 1)")
    search_value_weight: float = option(0.0, "train", "value target = (1 - w) * game result + w * the root's search value "
                                                      "(a position the solver proved learns its exact result)")
    lead_returns: bool = option(False, "search", "a finished game is worth, to the search and as a value target, each "
                                                 "seat's return minus the best other seat's (its lead, or its gap to the "
                                                 "leader) rather than the return itself; 2-player zero-sum games: the same")
    outcome_weight: float = option(0.0, "search", "what a finished game is worth, to the search and as a value target: "
                                                  "w * win/loss outcome + (1 - w) * the game's returns (Azul: the score "
                                                  "margin); games scored win/loss/draw are the same at any w")
    value_discount: float = option(1.0, "train", "the game result in a value target is discounted by this per move left to "
                                                 "the game's end: sooner wins and later losses are worth more (1: none)")
    carry_games: bool = option(False, "self_play", "self-play slots stay full: the games unfinished when an iteration's "
                                                   "games_per_iteration have ended go on in the next (from a fresh tree, "
                                                   "with the new network); parallel_games may exceed games_per_iteration. "
                                                   "One self-play thread")
    temperature_moves: int = option(10, "self_play", "moves sampled in proportion to visits (temperature 1); later ones argmax")
    max_moves: int = option(0, "self_play", "a game stops (scored by its returns so far) after this many moves; 0: the game's own bound")
    # training
    replay_capacity: int = option(100_000, "train", "examples kept; the oldest are overwritten")
    batch_size: int = option(256, "train", "examples per gradient step, sampled uniformly with replacement")
    train_steps: int = option(100, "train", "gradient steps per iteration")
    optimizer: str = option("adam", "train", "adam (AdamW) or sgd (with momentum 0.9)")
    learning_rate: float = option(1e-3, "train", "optimizer learning rate (at the start, with a decay)")
    lr_decay: str = option("constant", "train", "learning rate over the run's progress (iterations or minutes): constant, "
                                                "or cosine down to a tenth of learning_rate at the end")
    weight_decay: float = option(1e-4, "train", "weight decay")
    augment_symmetries: bool = option(True, "train", "train on positions seen through a random symmetry of the board (Connect4: mirror)")
    policy_loss_weight: float = option(1.0, "train", "weight of the policy cross-entropy")
    value_loss_weight: float = option(1.0, "train", "weight of the value MSE")
    # evaluation and checkpoints
    eval_interval: int = option(5, "run", "evaluate every this many iterations (0: never)")
    eval_games: int = option(20, "run", "games against each opponent, an equal share in each seat")
    eval_simulations: int = option(100, "run", "agent's MCTS simulations per move in evaluation")
    baseline_simulations: int = option(1000, "run", "the MCTS baseline's simulations per move")
    checkpoint_interval: int = option(1, "run", "save a checkpoint every this many iterations")

    def search_options(self) -> dict:
        """The BatchedMCTS keywords self-play and the trained agent share (not the
        simulations, the root noise or the seed, which each sets)."""
        return dict(c_base=self.c_base, c_init=self.c_init, normalize_values=self.normalize_values,
                    solve=self.solve, gumbel=self.gumbel, max_considered=self.gumbel_considered,
                    lead_returns=self.lead_returns, outcome_weight=self.outcome_weight)

    @classmethod
    def for_game(cls, game: str, **overrides) -> "AlphaZeroConfig":
        """The game's preset with `overrides` applied; with a cuda `device`, the game's
        `cuda_settings` between the two."""
        if game not in PRESETS:
            raise ValueError(f"game must be one of {sorted(PRESETS)}, got {game!r}")
        on_cuda = str(overrides.get("device", "cpu")).partition(":")[0] == "cuda"
        config = cls(game=game, **{**PRESETS[game], **(cuda_settings(game) if on_cuda else {}), **overrides})
        config.validate()
        return config

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        check_fields(self)
        if self.game not in GAMES:
            raise ValueError(f"game must be one of {sorted(GAMES)}, got {self.game!r}")
        check_seed(self.seed)
        if not DEVICE.fullmatch(self.device):  # whether this machine has it: the trainer checks
            raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {self.device!r}")
        positive = ("num_players", "iterations", "torch_threads", "self_play_threads", "channels", "games_per_iteration",
                    "parallel_games", "simulations", "fast_simulations", "gumbel_considered", "replay_capacity",
                    "train_steps", "eval_games", "eval_simulations", "baseline_simulations", "checkpoint_interval")
        non_negative = ("evaluation_cache", "blocks", "temperature_moves", "max_moves", "eval_interval", "minutes",
                        "weight_decay", "policy_loss_weight", "value_loss_weight")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in non_negative:
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.batch_size < 2:  # batch norm needs two examples to normalise over
            raise ValueError(f"batch_size must be >= 2, got {self.batch_size}")
        for name in ("inference_precision", "train_precision"):
            if getattr(self, name) not in PRECISIONS:
                raise ValueError(f"{name} must be one of {PRECISIONS}, got {getattr(self, name)!r}")
        if self.optimizer not in ("adam", "sgd"):
            raise ValueError(f"optimizer must be 'adam' or 'sgd', got {self.optimizer!r}")
        if self.lr_decay not in ("constant", "cosine"):
            raise ValueError(f"lr_decay must be 'constant' or 'cosine', got {self.lr_decay!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if not 0 < self.value_discount <= 1:
            raise ValueError(f"value_discount must be in (0, 1], got {self.value_discount!r}")
        for name in ("full_search_fraction", "search_value_weight", "outcome_weight"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)!r}")
        if not self.full_search_fraction > 0:
            raise ValueError("full_search_fraction must be > 0: some moves must be searched fully to train on")
        if not 0 <= self.dirichlet_epsilon <= 1 or not self.dirichlet_alpha > 0:
            raise ValueError("dirichlet_alpha must be > 0 and dirichlet_epsilon in [0, 1]")
        if self.carry_games and self.self_play_threads != 1:
            raise ValueError(f"carry_games plays on one self-play thread; got self_play_threads={self.self_play_threads}")
        if self.eval_games % self.num_players:
            raise ValueError(f"eval_games must be a multiple of num_players={self.num_players} (an equal share in "
                             f"each seat), got {self.eval_games}")
        game = GAMES[self.game]()
        if not game.min_players <= self.num_players <= game.max_players:
            raise ValueError(f"{self.game} takes {game.min_players}-{game.max_players} players, got num_players={self.num_players}")


AlphaZeroConfig.__doc__ += field_docs(AlphaZeroConfig)


PRESETS = {
    # Sized for two CPU cores: a game of 9 moves needs little search and a tiny net.
    "tictactoe": dict(channels=32, blocks=1, games_per_iteration=64, parallel_games=64, simulations=40,
                      temperature_moves=3, replay_capacity=20_000, batch_size=128, train_steps=40,
                      iterations=15, eval_interval=5, eval_games=20, eval_simulations=40),
    # Self-play time goes mostly into the network's forward passes, so the tower is narrow
    # and the search short; two self-play threads overlap one's tree work with the other's
    # forward; every example is trained on about 1.5 times per mirror image; the value
    # target mixes in the root's search value, its result discounted per move left (so
    # faster wins and slower losses rank first), and the rate decays over the run. The
    # measurements behind each choice: docs/experiments/2026-11-alphazero.md.
    "connect4": dict(channels=32, blocks=3, games_per_iteration=256, parallel_games=256, simulations=64,
                     dirichlet_alpha=1.0, temperature_moves=8, replay_capacity=100_000, batch_size=128,
                     learning_rate=2e-3, lr_decay="cosine", search_value_weight=0.5, value_discount=0.97,
                     train_steps=300,
                     iterations=1000, minutes=30, eval_interval=4, eval_games=20, eval_simulations=100),
    # Azul: flat observations (an MLP tower), ~60 moves a game with dozens of legal moves.
    # Returns are score margins / 100 (mostly within +-0.2), so PUCT normalizes Q and the
    # value loss is weighted up. UCT rollouts of whole Azul games are slow, so evaluation
    # is sparse and its baseline searches less. The trained agent plays with 1600
    # simulations, 32 times self-play's: search at play is much of its strength and cheap
    # (docs/experiments/2026-11-alphazero.md); evaluating during training every
    # 100 iterations keeps its share of a run small. The checkpoint (the replay with it) is
    # large, so it is written every 10 iterations. Self-play stays on one thread (a
    # second splits the batch more than it overlaps), and on one torch thread: a second
    # intra-op thread slowed the 64-row forwards and the training steps on two vCPUs.
    # No evaluation cache: chance draws make Azul's positions rarely repeat, so keying every
    # leaf costs more than it saves (bench_alphazero_selfplay.py --game azul).
    "azul": dict(channels=128, blocks=2, games_per_iteration=64, parallel_games=64, simulations=50,
                 self_play_threads=1, torch_threads=1, evaluation_cache=0,
                 normalize_values=True, dirichlet_alpha=0.3, temperature_moves=12, replay_capacity=100_000,
                 batch_size=256, learning_rate=1e-3, train_steps=50, value_loss_weight=10.0, iterations=100_000,
                 minutes=60, eval_interval=100, eval_games=24, eval_simulations=1600, baseline_simulations=200,
                 checkpoint_interval=10),
}


# How many times the CPU preset's self-play threads, games and training steps per
# iteration a game's cuda settings take (`cuda_settings`).
CUDA_SCALE = {"connect4": 4}


def cuda_settings(game: str) -> dict:
    """What `device` cuda changes in a game's preset (flags and config files override it).

    On a GPU a forward of a few hundred leaves costs about what one of a few dozen does
    (kernel launches, not arithmetic), and the tree search stays on the CPU's cores: so
    more threads search at once, each with a batch as large as on the CPU, and the
    evaluation cache, whose per-leaf Python lookups hold the GIL that those threads
    share, is off. Games and gradient steps per iteration grow by the same factor, so
    every example is still trained on as often, and evaluation comes after as many games."""
    if game not in CUDA_SCALE:
        return {}
    preset, scale = PRESETS[game], CUDA_SCALE[game]

    def scaled(name: str) -> int:
        return scale * preset.get(name, getattr(AlphaZeroConfig, name))

    return dict(self_play_threads=scaled("self_play_threads"), games_per_iteration=scaled("games_per_iteration"),
                parallel_games=scaled("parallel_games"), train_steps=scaled("train_steps"), evaluation_cache=0,
                eval_interval=max(1, preset.get("eval_interval", AlphaZeroConfig.eval_interval) // scale))
