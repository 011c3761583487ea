"""Proximal Policy Optimization on puffercore vector envs.

    from puffercore import ppo
    trainer = ppo.train(ppo.PPOConfig.for_env("cartpole"), "cartpole")   # an ocean preset
    trainer = ppo.train(ppo.PPOConfig(), "gymnasium:Acrobot-v1")          # defaults: gymnasium tasks
    trainer = ppo.train(ppo.PPOConfig(), MyEnv)                           # a class, creator or vector env
    returns = ppo.evaluate(trainer.run_dir, episodes=10)

Read in this order: `config` (every hyperparameter, the presets), `trainer` (the
algorithm: collection, GAE, `ppo_loss`, the update), `runs` (the run loop, checkpoints,
resume, evaluation).
"""

from puffercore.ppo.config import PPOConfig, PRESETS
from puffercore.ppo.runs import RESUMABLE_FIELDS, evaluate, resumed_config, saved_env_spec, summary, train
from puffercore.ppo.trainer import SEED_NAMES, Trainer, make_policy, make_vector, ppo_loss

__all__ = ["PPOConfig", "PRESETS", "RESUMABLE_FIELDS", "SEED_NAMES", "Trainer", "evaluate", "make_policy",
           "make_vector", "ppo_loss", "resumed_config", "saved_env_spec", "summary", "train"]
