"""Proximal Policy Optimization on puffercore vector envs.

    from puffercore import ppo
    trainer = ppo.train(ppo.PPOConfig.for_env("cartpole"), "cartpole")   # an ocean preset
    trainer = ppo.train(ppo.PPOConfig(), "gymnasium:Acrobot-v1")          # defaults: gymnasium tasks
    trainer = ppo.train(ppo.PPOConfig(), MyEnv)                           # a class, creator or vector env
    returns = ppo.evaluate(trainer.run_dir, episodes=10)                  # env=MyEnv for envs not known by name
    trainer = ppo.train(config, "cartpole", callbacks=[MyCallback()])     # ppo.Callback: your code in the loop

Read in this order: `config` (every hyperparameter, the presets), `loss` (the
objective), `trainer` (the algorithm: collection, GAE, the update; its storage is
`puffercore.ppo.rollout`), `update` (one minibatch step, eager or compiled) and `flat_adam`
(its optimizer), `train_and_evaluate` (the run loop, checkpoints, resume, evaluation),
`evaluation` (the episode loop; evaluation, best.pt and video during training) and
`callbacks` (hooks for your code);
`puffercore.distributed` has the torchrun ranks.
"""

from puffercore.ppo.callbacks import Callback
from puffercore.ppo.config import PPOConfig, PRESETS
from puffercore.ppo.loss import ppo_loss
from puffercore.ppo.train_and_evaluate import RESUMABLE_FIELDS, evaluate, resumed_config, saved_env_spec, summary, train
from puffercore.ppo.parts import make_optimizer, make_policy, make_vector
from puffercore.ppo.trainer import SEED_NAMES, Trainer

__all__ = ["Callback", "PPOConfig", "PRESETS", "RESUMABLE_FIELDS", "SEED_NAMES", "Trainer", "evaluate", "make_optimizer",
           "make_policy", "make_vector", "ppo_loss", "resumed_config", "saved_env_spec", "summary", "train"]
