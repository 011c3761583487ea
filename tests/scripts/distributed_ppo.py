"""Run under torchrun by tests/test_distributed.py: PPO on the native CartPole, each rank
writing a digest of its parameters after every update to OUT/rank<R>.txt, so the test
can check that all ranks hold the same model, and how it ended (the signal that stopped
it, if one did). `--fail-at N`: rank 1 raises at update N; `--eval-interval N`: rank 0
evaluates every N updates; `--custom-policy`: train (and resume) with `SmallActorCritic`,
a policy of the user's, instead of the built-in one.

    torchrun --standalone --nproc-per-node 2 tests/scripts/distributed_ppo.py OUT RUN_DIR [--resume] [--fail-at N]
        [--updates N] [--stop-after N] [--eval-interval N] [--custom-policy]

RUN_DIR "" trains in a new directory under ./runs.
"""

import argparse
import hashlib
import os

import torch
from torch import nn

from puffercore import ppo


class SmallActorCritic(ppo.ActorCritic):
    def __init__(self, observation_space, action_space, observation_tree=None):
        super().__init__(observation_space, action_space, observation_tree)
        self.body = nn.Sequential(nn.Linear(observation_space.shape[0], 16), nn.Tanh())
        self.actor, self.critic = nn.Linear(16, self.head.size), nn.Linear(16, 1)

    def forward(self, observations):
        hidden = self.body(observations)
        return self.actor(hidden), self.critic(hidden).squeeze(-1)


parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("run_dir")
parser.add_argument("--resume", action="store_true")
parser.add_argument("--fail-at", type=int, default=0)
parser.add_argument("--updates", type=int, default=4)
parser.add_argument("--stop-after", type=int, default=None, help="updates of this call at most (ppo.train's stop_after)")
parser.add_argument("--eval-interval", type=int, default=0)
parser.add_argument("--custom-policy", action="store_true")
args = parser.parse_args()
rank = int(os.environ["RANK"])
digests = open(os.path.join(args.out, f"rank{rank}.txt"), "a")


def record(trainer) -> bool:
    if args.fail_at and trainer.update == args.fail_at and trainer.group.rank == 1:
        raise RuntimeError("rank 1 fails on purpose")
    flat = torch.cat([p.detach().reshape(-1) for p in trainer.policy.parameters()])
    flat = torch.cat([flat, torch.from_numpy(trainer.vec.observation_stats.mean).float()])  # normalization too
    digests.write(f"{trainer.update} {hashlib.sha256(flat.numpy().tobytes()).hexdigest()}\n")
    digests.flush()
    return False


config = ppo.PPOConfig.for_env("cartpole", num_envs=8, horizon=16, minibatch_size=64, backend="serial",
                               total_timesteps=2 * 8 * 16 * args.updates, quiet=True, tensorboard=False,
                               run_dir=args.run_dir, log_interval=0.0, norm_obs=True, norm_reward=True,
                               eval_interval=args.eval_interval, eval_episodes=2,
                               compile="false")  # a budget of 100000 updates would compile under "auto"
policy = SmallActorCritic if args.custom_policy else None
if args.resume:
    trainer = ppo.train({"total_timesteps": 2 * 8 * 16 * args.updates}, resume=args.run_dir, until=record,
                        stop_after=args.stop_after, policy=policy)
else:
    trainer = ppo.train(config, "cartpole", until=record, stop_after=args.stop_after, policy=policy)
line = (f"rank {rank} world {trainer.group.world_size} update {trainer.update} step {trainer.global_step} "
        f"interrupted {trainer.interrupted.name if trainer.interrupted else None} run_dir {trainer.run_dir}\n")
os.write(1, line.encode())  # one write: both ranks share the pipe, and print's text and newline can interleave
