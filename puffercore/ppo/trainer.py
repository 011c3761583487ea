"""The PPO algorithm (Schulman et al. 2017), top to bottom: collection from a vector env
in staggered batches, GAE, and the clipped-surrogate update of `ppo_loss`.

    trainer = Trainer("gymnasium:Acrobot-v1", PPOConfig())
    trainer.reset_envs(); trainer.collect(); trainer.learn()

`puffercore.ppo.train` runs the loop with checkpoints and metrics. Envs come from
`puffercore.env_sources` (anything trainable), rollout storage from `puffercore.ppo.rollout`
(`RolloutBuffer`: what collection writes, GAE and the update read), normalization from
`puffercore.transforms`, episode statistics from `puffercore.ppo.episodes`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import time
from typing import Any

import numpy as np
import torch

from puffercore import advantage, checkpoint, env_sources, run
from puffercore.distributed import Group
from puffercore.finite import NonFiniteError, StepScalars
from puffercore.ppo.config import PPOConfig
from puffercore.ppo.device_rollout import DeviceCollection
from puffercore.ppo.episodes import EpisodeStats
from puffercore.ppo.graphed import GraphedStep, portable
from puffercore.ppo.loss import ppo_loss
from puffercore.ppo.mlp_gradients import MLPGradients
from puffercore.ppo.native_mlp import NativeMLPPolicy
from puffercore.ppo.parts import (free_cores, make_optimizer, make_policy, make_vector, policy_record, resolve_policy,
                                  transformed)
from puffercore.ppo.policy import restart_ended
from puffercore.ppo.plan import UpdatePlan
from puffercore.ppo.popart import PopArt, value_layer
from puffercore.ppo.update import UpdateStep
from puffercore.ppo.rollout import RolloutBuffer, iterate_minibatches, row_priorities, state_fields
from puffercore.seeding import derive_seed, named_seeds
from puffercore.transforms import Normalize


SEED_NAMES = ("envs", "torch", "sampling", "eval")  # eval: the evaluation env (ppo.evaluation)


class Trainer:
    """PPO on `env`: anything `puffercore.env_sources.resolve` takes (an ocean env name, a
    gymnasium id, "module:attribute", an env class or creator, or a vector env made by
    `puffercore.vector.make`, which the caller keeps and closes), with `policy`: anything
    `ppo.parts.resolve_policy` takes (default: the DefaultPolicy `config` describes)."""

    def __init__(self, env: Any, config: PPOConfig, run_dir: str | None = None, policy: Any = None):
        config.validate()
        self.policy_source = resolve_policy(policy)
        source = env_sources.resolve(env)
        self.env_name, self.env_spec, self.config = source.name, source.spec, config
        self.source = source  # what the evaluation env is made from (ppo.evaluation)
        self.owns_vec = source.vector is None
        self.group = Group.from_environment(config.device)  # torchrun's ranks, or this process alone
        self.device = torch.device(self.group.device(config.device))
        self.seeds = named_seeds(config.seed, SEED_NAMES)
        self.vec = make_vector(source, config, self._rank_seed("envs"))
        try:
            self.vec = transformed(self.vec, config)
            self._setup(run_dir)
        except BaseException:
            self.close(failed=True)
            raise

    def _setup(self, run_dir: str | None) -> None:
        config, vec = self.config, self.vec
        torch.set_num_threads(config.torch_threads or free_cores(vec))
        torch.manual_seed(self.seeds["torch"])  # weight init, the same on every rank
        self.policy = make_policy(vec, config, self.policy_source).to(self.device)
        self.group.broadcast_parameters(self.policy)
        self.popart = PopArt(value_layer(self.policy)) if config.value_norm else None
        # Which paths the update and collection take, and why (puffercore.ppo.plan): read, not re-derived.
        self.plan = UpdatePlan.make(self.policy, config, self.device, self.group.world_size)
        self.optimizer = make_optimizer(self.policy, config.learning_rate, self.device, self.plan.optimizer.name)
        # One native actor and critic (made after the optimizer moved the parameters into its
        # flat buffer) for the update's gradients and collection's forward alike.
        native = NativeMLPPolicy(self.policy) if self.plan.native_gradients or self.plan.native_collection else None
        gradients = MLPGradients(native, self.optimizer, config, self.group) if self.plan.native_gradients else None
        # On cuda where the plan says so, the minibatch step replayed as a CUDA graph.
        self.update_step = GraphedStep(self.policy, self.optimizer, config) if self.plan.graphed else \
            UpdateStep(self._minibatch_loss, self.policy, self.optimizer, config.max_grad_norm, self.group,
                       self.plan, gradients)
        self.native_policy = native if self.plan.native_collection else None
        self.action_rng = torch.Generator(self.device).manual_seed(self._rank_seed("torch"))
        self.sampling_rng = torch.Generator().manual_seed(self._rank_seed("sampling"))

        self.rows, horizon = vec.num_agents, config.horizon
        self.rollout = RolloutBuffer(self.rows, horizon, vec.single_observation_space, self.policy, self.device)
        self.device_collection = None  # the rollout kept on the GPU (ppo.device_rollout), where the plan says so
        if self.plan.collection.name == "device":
            self.device_collection = DeviceCollection(self.policy, self.rollout, self.action_rng,
                                                      None if self.popart is None else self._values)
        self.transitions_per_update = self.rows * horizon * self.group.world_size  # all ranks' steps
        self.num_updates = -(-config.total_timesteps // self.transitions_per_update)  # at least total_timesteps
        if config.minibatch_size > self.rows * horizon:
            raise ValueError(
                f"minibatch_size={config.minibatch_size} exceeds the transitions of one rollout "
                f"({self.rows} rows x horizon {horizon} = {self.rows * horizon})"
            )
        self.state = self.policy.initial_state(self.rows, self.device)  # recurrent state of every row
        self.recurrent = self.state is not None

        self.update = 0
        self.global_step = 0
        self.elapsed = 0.0  # seconds of training, earlier sessions of a resumed run included
        self.interrupted: signal.Signals | None = None  # the signal that stopped the run early (Ctrl-C: SIGINT)
        self.stopped_by: str | None = None  # the callback that stopped the run early (ppo.callbacks)
        self.saved_update: int | None = None  # the update of the last checkpoint written or resumed from
        self.timers = {"env": 0.0, "inference": 0.0, "learn": 0.0}
        self.episodes = EpisodeStats(self.group)
        self.losses: dict[str, float] = {}
        # None: a new directory, runs/ENV-SEED-TIME, made when training starts (`ppo.train`)
        self.run_dir = run_dir or self.config.run_dir or None

    def _rank_seed(self, name: str, update: int = 0) -> int:
        """The named seed on rank 0 of a fresh run; other ranks and resumed runs get
        distinct seeds derived from it (their envs and samples must not repeat rank 0's)."""
        if self.group.rank == 0 and update == 0:
            return self.seeds[name]
        return derive_seed(self.seeds[name], self.group.rank + (update << 16))

    # ---- collection ---------------------------------------------------------------------
    def reset_envs(self) -> None:
        """Start (or resume) collection: every env reset with a seed fixed by (env seed,
        update), every row at slot 0 with a fresh recurrent state."""
        self.vec.async_reset(seed=derive_seed(self._rank_seed("envs"), self.update) % 2**63)
        self.rollout.reset()
        if self.state is not None:
            for tensor in self.state:
                tensor.zero_()

    def collect(self) -> None:
        """Fill every row of the rollout: recv a batch, store what it says about the
        previous transition and the new observation, act, send. While the policy runs on
        one batch, the backend steps the others."""
        self.rollout.start_rollout()
        while self.rollout.filling():
            start = time.perf_counter()
            batch = self.vec.recv()
            received = time.perf_counter()
            self.episodes.record(batch.info)
            actions = self._step_rows(batch)
            inferred = time.perf_counter()
            self.vec.send(actions)
            self.timers["env"] += (received - start) + (time.perf_counter() - inferred)
            self.timers["inference"] += inferred - received
        if isinstance(self.vec, Normalize) and self.group.world_size > 1:
            self.vec.synchronize(lambda moments: self.group.sum(torch.from_numpy(moments)).numpy())

    @torch.inference_mode()  # cheaper than no_grad (5-12% of the policy's time; bench_rollout_inference.py)
    def _step_rows(self, batch) -> np.ndarray:
        """One batch of the collection loop (a vector env's Batch: its arrays, its rows of
        the vector, the final observations of its rows that ended): store the transition
        that led here, act on the new observations, store them and the step; returns the
        actions to send."""
        device = self.device
        obs, rewards, terminals, truncations, _, _, masks = batch
        finite = np.isfinite(rewards)
        if not finite.all():
            rows = np.arange(self.rows)[batch.rows][~finite]
            raise self._non_finite(f"the env returned reward {rewards[~finite][0]} at env rows {rows.tolist()}")
        if self.device_collection is not None:
            return self.device_collection.step(batch)
        slots = self.rollout.batch_slots(batch.rows)

        state = None
        if self.recurrent:
            state_before_reset = tuple(part[slots.index] for part in self.state)
            state = restart_ended(state_before_reset, torch.as_tensor(terminals | truncations, device=device))

        if slots.has_previous.any():
            slots.store_transition({"reward": rewards, "terminal": terminals, "truncation": truncations})
            truncated = np.flatnonzero(truncations & slots.has_previous)
            if truncated.size:
                # Truncations bootstrap from V(final observation), before the autoreset.
                if self.native_policy is not None:
                    final_value = self.native_policy.values(batch.final_observations[truncated])
                else:
                    final_obs = torch.as_tensor(batch.final_observations[truncated], device=device)
                    final_state = None
                    if state is not None:
                        at = torch.as_tensor(truncated, device=device)
                        final_state = tuple(part[at] for part in state_before_reset)
                    final_value = self.policy.output(final_obs, final_state).value
                slots.store_final_values(truncated, self._values(final_value))

        if self.native_policy is not None:
            actions, log_prob, value = self.native_policy.act(obs, self.action_rng)
        else:
            out = self.policy.output(torch.as_tensor(obs, device=device), state)
            actions, log_prob = self.policy.sample(out, self.action_rng)
            value = out.value
        slots.store_step({"obs": obs, "value": self._values(value), "mask": masks},
                         {"action": actions, "log_prob": log_prob}, state)
        if state is not None:
            for part, new in zip(self.state, out.state):
                part[slots.index] = new
        slots.advance()
        return self.policy.head.to_env(actions)

    def recent_return(self) -> float | None:
        """Mean return of about the last `RECENT_EPISODES` episodes (`ppo.episodes`), or None."""
        return self.episodes.recent_return()

    # ---- learning -----------------------------------------------------------------------
    def compute_advantages(self) -> None:
        rollout, config = self.rollout, self.config
        out = {} if self.device_collection is None else self.device_collection.gae_outputs()
        # Padding rows earn nothing.
        rewards = torch.mul(rollout["reward"], rollout["mask"][:, :config.horizon], out=out.get("rewards"))
        rollout["advantage"], rollout["return"] = advantage.compute(
            rollout["value"], rewards, rollout["terminal"], rollout["truncation"], rollout["final_value"],
            gamma=config.gamma, lam=config.gae_lambda, advantages=out.get("advantages"), returns=out.get("returns"),
        )

    def _values(self, critic_output: torch.Tensor | np.ndarray) -> torch.Tensor | np.ndarray:
        """Values in return units (the critic's output, a tensor or the native policy's
        array, denormalized under PopArt)."""
        if self.popart is None:
            return critic_output
        return self.popart.denormalize(torch.as_tensor(critic_output, device=self.device))

    def learn(self) -> None:
        started = time.perf_counter()
        config, rollout, graphed = self.config, self.rollout, self.plan.graphed
        if config.anneal_lr:
            learning_rate = config.learning_rate * (1.0 - self.update / self.num_updates)
        else:  # the graphed step's is a device tensor: one read an update
            learning_rate = float(self.optimizer.param_groups[0]["lr"])
        if graphed:  # into the graph's device tensors: no recapture
            self.update_step.set_hyperparameters(lr=learning_rate, ent_coef=config.ent_coef)
        else:
            self.optimizer.param_groups[0]["lr"] = learning_rate
        self.compute_advantages()
        batch = rollout.transition_view()
        values, returns = batch["value"], batch["return"]
        if self.popart is not None:  # this rollout's returns join the statistics; the critic is rescaled
            self.popart.update(returns[batch["mask"]], self.group)
            # The critic learns normalized returns (and is clipped around normalized old values).
            batch = {**batch, "return": self.popart.normalize(returns), "value": self.popart.normalize(values)}
        by_rows = self.recurrent or config.prio_alpha > 0  # whole rows: replayed in order, or sampled by priority
        rows_per_minibatch = max(1, config.minibatch_size // config.horizon)
        minibatch_size = rows_per_minibatch if by_rows else config.minibatch_size
        fields = None
        if not by_rows:  # what the loss reads; no mask when every row is live (plain means)
            fields = ("obs", "action", "log_prob", "advantage", "return", "value")
            if not bool(batch["mask"].all()):
                fields += ("mask",)

        weights_all = None
        if config.prio_alpha > 0:
            beta = config.prio_beta0 + (1.0 - config.prio_beta0) * self.update / max(1, self.num_updates - 1)
            probability, weights_all = row_priorities(batch["advantage"], batch["mask"], config.prio_alpha, beta)

        scalars = StepScalars()  # each minibatch's losses and gradient norms, on the device until the update ends
        minibatches, stop = 0, False
        for _ in range(config.update_epochs):
            order = None
            if weights_all is not None:
                order = torch.multinomial(probability.cpu(), self.rows, replacement=True,
                                          generator=self.sampling_rng).to(self.device)
            for minibatch in iterate_minibatches(batch, minibatch_size, self.sampling_rng, order, by_rows, fields):
                minibatches += 1
                if graphed:  # its statistics stay summed on the device until read() below
                    self.update_step(minibatch)
                    continue
                weights = None if weights_all is None else weights_all[minibatch["index"]][:, None]
                step = self.update_step(minibatch, by_rows, weights)
                scalars.record_row(self.update_step.names, step)
                if config.target_kl:  # the one host sync per minibatch, only with target_kl
                    approx_kl = step[self.update_step.names.index("loss/approx_kl")]
                    if float(self.group.mean(approx_kl.clone())) > config.target_kl:
                        stop = True
                        break
            if stop:
                break
        # The update's statistics, read in one transfer: NaN or inf stops the run here.
        if graphed:  # the graph keeps sums, not each minibatch's values
            self.losses = self.update_step.read()
            bad = next(((name, value) for name, value in self.losses.items() if not math.isfinite(value)), None)
            if bad is not None:
                raise self._non_finite(f"{bad[0]} is {bad[1]} in the mean over the update's minibatches")
        else:
            bad = scalars.first_non_finite()
            if bad is not None:
                minibatch, name, value = bad
                raise self._non_finite(f"{name} is {value} in minibatch {minibatch + 1}")
            self.losses = scalars.means()
        self.losses["loss/minibatches"] = minibatches  # fewer than epochs x minibatches: target_kl stopped it
        variance = float(returns.var())
        self.losses["loss/explained_variance"] = math.nan if variance == 0 else 1 - float((returns - values).var()) / variance
        self.losses["learning_rate"] = learning_rate
        if graphed:
            return
        if self.update_step.compile_seconds:
            self.losses["compile_seconds"] = self.update_step.compile_seconds
        if self.plan.compiled is not None:
            self.losses["compiled"] = float(self.plan.compiled)
        self.update_step.decide(time.perf_counter() - started, self.num_updates - self.update - 1)

    def _minibatch_loss(self, minibatch: dict, by_rows: bool, weights) -> dict[str, torch.Tensor]:
        """The PPO objective of one minibatch (returns and old values already normalized
        under PopArt): the function `UpdateStep` minimizes, and compiles."""
        if by_rows:
            out_params, values = self._replay_rows(minibatch)
            new_log_prob, entropy = self.policy.head.evaluate(
                out_params.reshape(-1, out_params.shape[-1]), self.policy.log_std,
                minibatch["action"].reshape(-1, *minibatch["action"].shape[2:]))
            flat = {key: minibatch[key].reshape(-1) for key in ("log_prob", "advantage", "return", "value", "mask")}
            new_value = values.reshape(-1)
            if weights is not None:
                weights = weights.expand_as(minibatch["advantage"]).reshape(-1)
        else:
            out = self.policy.output(minibatch["obs"])
            new_log_prob, entropy = self.policy.evaluate(out, minibatch["action"])
            flat, new_value = minibatch, out.value
        return ppo_loss(new_log_prob, entropy, new_value, flat, self.config, weights, self.group)

    def _replay_rows(self, minibatch: dict):
        """Re-run the policy along whole rows from their stored initial state, resetting
        the state after every episode end, as collection did."""
        obs = minibatch["obs"]
        rows, horizon = obs.shape[0], obs.shape[1]
        if not self.recurrent:  # rows only for prioritized sampling: one batched pass
            out = self.policy.output(obs.reshape(rows * horizon, *obs.shape[2:]))
            return out.params.reshape(rows, horizon, -1), out.value.reshape(rows, horizon)
        state = tuple(minibatch[name] for name in state_fields(len(self.state)))
        params, values = [], []
        for t in range(horizon):
            if t > 0:
                state = restart_ended(state, minibatch["terminal"][:, t - 1] | minibatch["truncation"][:, t - 1])
            out = self.policy.output(obs[:, t], state)
            state = out.state
            params.append(out.params)
            values.append(out.value)
        return torch.stack(params, 1), torch.stack(values, 1)

    # ---- run state ----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "format": "puffercore.ppo/1",
            "env": self.env_spec,
            "config": dataclasses.asdict(self.config),
            "seeds": self.seeds,
            "model": self.policy.state_dict(),
            "policy": policy_record(self.policy_source, self.policy),
            "optimizer": portable(self.optimizer.state_dict()),
            "rng": {"action": self.action_rng.get_state(), "sampling": self.sampling_rng.get_state(),
                    "torch": torch.get_rng_state(), "numpy": np.random.get_state()},
            "counters": {"update": self.update, "global_step": self.global_step,
                         "timers": dict(self.timers)},
            "world_size": self.group.world_size,
            "normalize": self.vec.state_dict() if isinstance(self.vec, Normalize) else None,
            "popart": None if self.popart is None else self.popart.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved_world = state.get("world_size", 1)
        if saved_world != self.group.world_size:
            raise ValueError(f"this checkpoint was trained on {saved_world} rank(s); resume it with the same number "
                             f"(torchrun --nproc-per-node {saved_world} ...), not {self.group.world_size}")
        self.policy.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.action_rng.set_state(state["rng"]["action"])
        self.sampling_rng.set_state(state["rng"]["sampling"])
        torch.set_rng_state(state["rng"]["torch"])
        np.random.set_state(state["rng"]["numpy"])
        self.update = state["counters"]["update"]
        self.global_step = state["counters"]["global_step"]
        self.timers = dict(state["counters"]["timers"])
        if self.group.rank > 0:  # the saved streams are rank 0's; this rank continues on its own
            self.action_rng.manual_seed(self._rank_seed("torch", self.update))
            self.sampling_rng.manual_seed(self._rank_seed("sampling", self.update))
        if isinstance(self.vec, Normalize):
            self.vec.load_state_dict(state["normalize"])
        if self.popart is not None:
            self.popart.load_state_dict(state["popart"])
        self.saved_update = self.update

    def save_checkpoint(self) -> str:
        """Rank 0 writes (every rank holds the same model); returns the path. A state with
        a NaN or inf is never written (NonFiniteError; the last checkpoint stays)."""
        if self.run_dir is None:
            raise ValueError("this Trainer has no run directory yet: give it run_dir, or train it with ppo.train")
        path = os.path.join(self.run_dir, run.CHECKPOINT_NAME)
        if self.group.is_main:
            try:
                checkpoint.save(path, self.state_dict())
            except NonFiniteError as error:
                raise NonFiniteError.in_run(f"after update {self.update}", str(error), self._last_checkpoint()) from None
        self.saved_update = self.update
        return path

    def _non_finite(self, problem: str) -> NonFiniteError:
        """The error for a NaN or inf found in the update in progress."""
        return NonFiniteError.in_run(f"update {self.update + 1}", problem, self._last_checkpoint())

    def _last_checkpoint(self) -> str | None:
        if self.saved_update is None:
            return None
        return f"{os.path.join(self.run_dir, run.CHECKPOINT_NAME)} (update {self.saved_update})"

    def metrics(self, elapsed: float) -> dict[str, float]:
        """Scalars since the last call; under torchrun every rank calls it together and
        the episode statistics cover every rank's episodes."""
        scalars = {"update": self.update, "sps": self.global_step / max(elapsed, 1e-9), **self.episodes.take_means()}
        recent = self.recent_return()
        if recent is not None:
            scalars["recent_return"] = recent
        scalars.update(self.losses)
        if isinstance(self.vec, Normalize):
            scalars.update(self.vec.metrics())
        busy = sum(self.timers.values()) or 1.0
        scalars.update({f"time_fraction/{name}": value / busy for name, value in self.timers.items()})
        return scalars

    def close(self, failed: bool = False) -> None:
        if self.owns_vec:
            self.vec.close()
        self.group.close(failed)

