"""AlphaZero training, top to bottom: self-play with the batched native MCTS
(`alphazero.self_play`) fills a ring replay buffer (`alphazero.replay`) with
(observation, search policy, outcome) examples; the network learns to predict both
(policy cross-entropy plus value MSE); every few iterations it plays the random agent
and the plain MCTS baseline in both seats (`alphazero.evaluation`); checkpoints resume
exactly.

    config = AlphaZeroConfig.for_game("connect4", minutes=30)
    trainer = train(config)                          # or: puffercore alphazero connect4
    agent = AlphaZeroAgent.load(trainer.checkpoint_path)
    action = agent.act(state, simulations=200)

One iteration plays `games_per_iteration` whole games, `parallel_games` at a time.
Iterations begin with a fresh search seeded from (run seed, iteration) and no game in
flight, so a checkpoint between iterations resumes exactly. SIGINT (Ctrl-C) and SIGTERM
stop a run at the end of the iteration in progress (every rank together), with a
checkpoint; a NaN or inf loss stops it without one, the last checkpoint kept.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import time

import numpy as np
import torch
import torch.nn.functional as F

from puffercore import checkpoint, run
from puffercore.alphazero.agents import MCTSBaseline, RandomAgent
from puffercore.alphazero.config import GAMES, AlphaZeroConfig, cuda_settings
from puffercore.alphazero.evaluation import GAME_OPPONENTS, AlphaZeroAgent, load_checkpoint, play_against
from puffercore.alphazero.network import build_network
from puffercore.alphazero.replay import ReplayBuffer
from puffercore.alphazero.self_play import GameInPlay, games_state_dict, load_games, play_iteration
from puffercore.config_files import file_form
from puffercore.distributed import Group
from puffercore.finite import NonFiniteError, StepScalars
from puffercore.precision import resolve_precision
from puffercore.logger import Logger, console_print
from puffercore.ppo.config import check_device
from puffercore.seeding import derive_seed, named_seeds

# Every source of randomness draws from its own child of the run seed.
SEED_NAMES = ("network", "self_play", "replay", "evaluation", "games")


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
        check_device(config.device)  # one line where this machine lacks it
        self.device = torch.device(self.group.device(config.device))  # torchrun: each rank its own GPU
        torch.set_num_threads(config.torch_threads)
        torch.manual_seed(self.seeds["network"])
        self.network = build_network(config)  # initialised on the CPU: the same weights on any device
        if self.network.convolutional:  # oneDNN's fast layout for CPU convolutions, bf16 above all
            self.network.to(memory_format=torch.channels_last)
        self.network.to(self.device)  # the replay stays on the host; each batch goes over once
        # Training takes bf16 for MLPs too, unlike inference: Azul's 3-player MLP learned
        # more in bf16 (docs/experiments/2026-11-alphazero.md).
        self.train_dtype = resolve_precision(config.train_precision, self.device, convolutional=True)
        self.group.broadcast_parameters(self.network)
        parameters = self.network.parameters()
        if config.optimizer == "adam":  # fused: one kernel for every parameter instead of a loop over them
            self.optimizer = torch.optim.AdamW(parameters, lr=config.learning_rate, weight_decay=config.weight_decay,
                                               fused=True)
        else:
            self.optimizer = torch.optim.SGD(parameters, lr=config.learning_rate, momentum=0.9,
                                             weight_decay=config.weight_decay)
        self.replay = ReplayBuffer(config.replay_capacity, self.game.observation_shape, self.game.num_actions,
                                   config.num_players)
        self.replay_rng = np.random.default_rng(self.rank_seeds["replay"])
        # games_started: this rank's, numbering its games (the seed of each); with carry_games
        # the games under way at an iteration's end are saved with the checkpoint.
        self.counters = {"iteration": 0, "games": 0, "games_started": 0, "positions": 0, "train_steps": 0,
                         "seconds": 0.0}
        self.under_way: list[GameInPlay] = []
        self.run_dir = run_dir  # None: `train` makes runs/alphazero-GAME-SEED-TIME
        self.interrupted: signal.Signals | None = None  # the signal that stopped the run early (Ctrl-C: SIGINT)
        self.saved_iteration: int | None = None  # the iteration of the last checkpoint written or resumed from

    @property
    def checkpoint_path(self) -> str | None:
        return os.path.join(self.run_dir, run.CHECKPOINT_NAME) if self.run_dir else None

    # self-play ------------------------------------------------------------------------

    def new_game(self, number: int):
        """The first position of this rank's self-play game `number` (its seed named by it)."""
        return self.game.new_state(seed=derive_seed(self.rank_seeds["games"], number),
                                   num_players=self.config.num_players)

    def self_play(self) -> dict[str, float]:
        """Play one iteration's games (`self_play.play_iteration`) and add their positions
        to the replay buffer, in game order."""
        config = self.config
        search_seed = derive_seed(self.rank_seeds["self_play"], self.counters["iteration"])
        carried = self.under_way
        first_number = self.counters["games_started"] if config.carry_games else self.counters["games"]
        played, self.under_way = play_iteration(self.game, config, self.network, search_seed, self.new_game,
                                                first_number, carried)
        self.counters["games_started"] += len(played) + len(self.under_way) - len(carried)
        for history, result, moves in played:
            self.replay.add_game(history, result, moves, config.search_value_weight, config.value_discount)
        recorded = sum(len(history) for history, _, _ in played)
        # Counters count every rank's games and recorded positions (the same on every rank).
        finished = self.group.sum(torch.tensor([float(len(played)), float(recorded)], dtype=torch.float64))
        self.counters["games"] += int(finished[0])
        self.counters["positions"] += int(finished[1])
        return {"self_play/games": float(len(played)),
                "self_play/game_length": float(np.mean([moves for _, _, moves in played])),
                "self_play/recorded_positions": float(recorded),
                "self_play/first_seat_return": float(np.mean([result[0] for _, result, _ in played]))}

    # training -------------------------------------------------------------------------

    def train_step(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient step on a batch; returns the losses before the step (scalar
        tensors: reading them would wait for the step, which `train` does once)."""
        config = self.config
        self.network.train()
        batch = {name: tensor.to(self.device, non_blocking=True) for name, tensor in batch.items()}  # CPU: the same
        observations = batch["observations"]
        if self.network.convolutional:
            observations = observations.contiguous(memory_format=torch.channels_last)
        # Mixed precision where the CPU computes bf16 natively, and on cuda: float32 weights and losses.
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.train_dtype == torch.bfloat16):
            logits, values = self.network(observations, batch["legal_masks"])
        policy_loss = -(batch["policies"] * F.log_softmax(logits.float(), dim=1)).sum(dim=1).mean()
        value_loss = F.mse_loss(values.float(), batch["values"])
        loss = config.policy_loss_weight * policy_loss + config.value_loss_weight * value_loss
        self.optimizer.zero_grad()
        loss.backward()
        self.group.average_gradients(self.network.parameters())  # data-parallel over ranks' replays
        self.optimizer.step()
        self.counters["train_steps"] += 1
        return {"loss/policy": policy_loss.detach(), "loss/value": value_loss.detach(), "loss/total": loss.detach()}

    def learning_rate(self) -> float:
        """The rate for the next gradient steps: learning_rate, cosine-decayed to a tenth
        over the run's progress with lr_decay="cosine"."""
        rate = self.config.learning_rate
        if self.config.lr_decay == "cosine":
            rate *= 0.1 + 0.45 * (1.0 + math.cos(math.pi * self.progress()))
        return rate

    def train(self) -> dict[str, float]:
        """This iteration's gradient steps; their mean losses. NonFiniteError when a loss
        was NaN or inf (the network is then spoiled: nothing more is saved)."""
        rate = self.learning_rate()
        # Self-play's threads set torch's (process-wide) thread count to one each.
        torch.set_num_threads(self.config.torch_threads)
        for group in self.optimizer.param_groups:
            group["lr"] = rate
        symmetries = self.game.symmetries if self.config.augment_symmetries else ()
        losses = StepScalars()
        for _ in range(self.config.train_steps):
            losses.record(self.train_step(self.replay.sample(self.replay_rng, self.config.batch_size, symmetries)))
        bad = losses.first_non_finite()
        if bad is not None:
            step, name, value = bad
            raise NonFiniteError.in_run(f"iteration {self.counters['iteration'] + 1}",
                                        f"{name} is {value} in training step {step + 1}", self._last_checkpoint())
        return {**losses.means(), "train/learning_rate": rate}

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
        scalars.update({"self_play/games_per_minute": scalars["self_play/games"] / self_play_seconds * 60,
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
                "counters": dict(self.counters), "under_way": games_state_dict(self.under_way)}

    def load_state_dict(self, state: dict) -> None:
        self.network.load_state_dict(state["network"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.replay.load_state_dict(state["replay"])
        self.replay_rng.bit_generator.state = state["replay_rng"]
        torch.set_rng_state(state["torch_rng"])
        self.counters = {"games_started": state["counters"]["games"], **state["counters"]}
        self.under_way = load_games(state.get("under_way", []), self.new_game)
        self.saved_iteration = self.counters["iteration"]

    def save(self) -> None:
        """Rank 0 writes (the network is the same everywhere; its replay is rank 0's, so a
        resumed multi-rank run refills the other ranks' replays by self-play). A state
        with a NaN or inf is never written (NonFiniteError; the last checkpoint stays)."""
        if self.group.is_main:
            try:
                checkpoint.save(self.checkpoint_path, self.state_dict())
            except NonFiniteError as error:
                raise NonFiniteError.in_run(f"after iteration {self.counters['iteration']}", str(error),
                                            self._last_checkpoint()) from None
        self.saved_iteration = self.counters["iteration"]

    def _last_checkpoint(self) -> str | None:
        if self.saved_iteration is None:
            return None
        return f"{self.checkpoint_path} (iteration {self.saved_iteration})"

    @classmethod
    def resume(cls, run_dir: str, changes: dict | None = None) -> "Trainer":
        """The run in `run_dir` from its checkpoint, with `changes` (BUDGET_FIELDS) to its config."""
        path = os.path.join(run_dir, run.CHECKPOINT_NAME)
        state, config = load_checkpoint(path)
        trainer = cls(dataclasses.replace(config, **(changes or {})), run_dir)
        try:
            trainer.load_state_dict(state)
        except (ValueError, TypeError, KeyError, IndexError, RuntimeError) as error:
            # a file save wrote holds none of these: it was altered or corrupted
            detail = str(error).splitlines()[0] if isinstance(error, ValueError) else f"{type(error).__name__}: {error}"
            raise ValueError(f"{path} does not resume: {detail}") from None
        return trainer

    def device_choice(self) -> str:
        """What a run off the CPU chose, for its first lines: the device, its precisions and
        the game's cuda settings (as this config has them: flags override them)."""
        config, device = self.config, self.device
        name = f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""
        inference = resolve_precision(config.inference_precision, device, convolutional=self.network.convolutional)
        sizes = ", ".join(f"{field} {getattr(config, field)}" for field in cuda_settings(config.game))
        return (f"device {device}{name}: self-play evaluations batched on it in {str(inference).removeprefix('torch.')} "
                f"(CUDA graphs), training in {str(self.train_dtype).removeprefix('torch.')}; "
                + (f"{config.game}'s cuda settings: {sizes}" if sizes else f"{config.game}'s CPU preset sizes"))

    def progress(self) -> float:
        """The fraction of the run done, by iterations or by the time budget."""
        by_time = self.counters["seconds"] / (self.config.minutes * 60) if self.config.minutes else 0.0
        return min(1.0, max(self.counters["iteration"] / self.config.iterations, by_time))

    def done(self) -> bool:
        return self.progress() >= 1.0


# What a resumed run may change: how long it goes on, and where (a cuda run goes on on a
# CPU-only machine with device cpu).
BUDGET_FIELDS = ("iterations", "minutes", "device")


def train(config: AlphaZeroConfig | None = None, resume: str | None = None, quiet: bool = False,
          budget: dict | None = None) -> Trainer:
    """Run (or, with `resume=RUN_DIR`, continue) a training run until `config.iterations`
    or `config.minutes`; metrics go to RUN_DIR (CSV, TensorBoard) and the console. A
    resumed run may get a new `budget` ({"minutes": 90} extends a finished run).
    SIGINT (Ctrl-C) or SIGTERM ends the run after the iteration in progress, with a
    checkpoint (`trainer.interrupted` names the signal); the handlers cover the trainer's
    whole life, closing included, so that a signal a moment late kills nothing."""
    with run.StopSignals("iteration") as signals:
        if resume:
            unknown = set(budget or {}) - set(BUDGET_FIELDS)
            if unknown:
                raise ValueError(f"budget may set only {BUDGET_FIELDS}, got {sorted(unknown)}")
            trainer = Trainer.resume(resume, budget)
        else:
            trainer = Trainer(config, config.run_dir or None)
        try:
            _run(trainer, signals, resumed=bool(resume), quiet=quiet or not trainer.group.is_main)
        except BaseException:
            trainer.group.close(failed=True)
            raise
        trainer.group.close()
    return trainer


def _run(trainer: Trainer, signals: run.StopSignals, resumed: bool, quiet: bool) -> None:
    """The iteration loop; under torchrun rank 0 alone writes (run files, metrics,
    checkpoints), and a stop signal on any rank stops every rank after the same iteration."""
    config, group = trainer.config, trainer.group
    trainer.run_dir = trainer.run_dir or run.create_run_dir(f"alphazero-{config.game}", config.seed, group)
    logger = None
    if group.is_main:
        run.write_run_files(trainer.run_dir, file_form(dataclasses.asdict(config), AlphaZeroConfig), config.seed,
                            trainer.seeds)
        logger = Logger(trainer.run_dir, config=dataclasses.asdict(config), quiet=quiet,
                        resume_step=trainer.counters["positions"] if resumed else None)
    if not quiet:
        print(f"run directory: {trainer.run_dir}; seeds: {trainer.seeds}")
        if trainer.device.type != "cpu":
            print(trainer.device_choice())
    try:
        while not trainer.done():
            scalars = trainer.iterate()
            trainer.interrupted = signals.received(group)
            if logger is not None:
                logger.log(trainer.counters["positions"], scalars)
            if trainer.interrupted or trainer.counters["iteration"] % config.checkpoint_interval == 0 \
                    or trainer.done():
                trainer.save()
            if not quiet:
                title = f"alphazero {config.game}: iteration {trainer.counters['iteration']}, " \
                        f"{trainer.counters['games']} games"
                console_print(title, scalars, progress=trainer.progress())
            if trainer.interrupted:
                break
    except KeyboardInterrupt:
        # A second Ctrl-C (the first asked for a stop after the iteration) or one raised by
        # code: keep what was learned, as PPO does; the CLI prints how to resume.
        trainer.interrupted = signal.SIGINT
        trainer.save()
    finally:
        if logger is not None:
            logger.close()
