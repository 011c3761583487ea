"""Proximal Policy Optimization on puffercore vector envs.

    from puffercore import ppo
    trainer = ppo.train(ppo.PPOConfig.for_env("cartpole"), "cartpole")   # an ocean preset
    trainer = ppo.train(ppo.PPOConfig(), "gymnasium:Acrobot-v1")          # defaults: gymnasium tasks
    trainer = ppo.train(ppo.PPOConfig(), MyEnv)                           # a class, creator or vector env
    returns = ppo.evaluate(trainer.run_dir, episodes=10)                  # env=MyEnv for envs not known by name
    trainer = ppo.train(config, "cartpole", callbacks=[MyCallback()])     # ppo.Callback: your code in the loop
    trainer = ppo.train(config, "connect4", policy=MyPolicy)              # a network of your own (ppo.ActorCritic)
    action = ppo.Policy.load(trainer.run_dir).act(observation)            # deployment; ppo.export_policy(run, "onnx")

Read in this order: `config` (every hyperparameter, the presets), `policy` (the interface
a network implements; `default_policy` the built-in MLP, LSTM and CNN), `loss` (the
objective), `trainer` (the algorithm: collection, GAE, the update; its storage is
`puffercore.ppo.rollout`), `update` (one minibatch step, eager or compiled) and `flat_adam`
(its optimizer), `train_and_evaluate` (the run loop, checkpoints, resume, evaluation),
`evaluation` (the episode loop; evaluation, best.pt and video during training),
`callbacks` (hooks for your code), `deploy` and `export` (a trained policy on its own, and
as an ONNX or TorchScript file);
`puffercore.distributed` has the torchrun ranks.
"""

from puffercore.ppo.callbacks import Callback
from puffercore.ppo.config import PPOConfig, PRESETS
from puffercore.ppo.default_policy import DefaultPolicy
from puffercore.ppo.deploy import Policy
from puffercore.ppo.export import export_policy
from puffercore.ppo.loss import ppo_loss
from puffercore.ppo.train_and_evaluate import RESUMABLE_FIELDS, evaluate, resumed_config, saved_env_spec, summary, train
from puffercore.ppo.parts import make_optimizer, make_policy, make_vector
from puffercore.ppo.policy import ActorCritic, PolicyOutput
from puffercore.ppo.trainer import SEED_NAMES, Trainer

__all__ = ["ActorCritic", "Callback", "DefaultPolicy", "PPOConfig", "PRESETS", "Policy", "PolicyOutput",
           "RESUMABLE_FIELDS", "SEED_NAMES", "Trainer", "evaluate", "export_policy", "make_optimizer", "make_policy",
           "make_vector", "ppo_loss", "resumed_config", "saved_env_spec", "summary", "train"]
