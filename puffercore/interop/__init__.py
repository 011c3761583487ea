"""puffercore vector envs behind the interfaces users' training code already speaks.

    from puffercore.interop.gymnasium_vector import GymnasiumVectorEnv
    envs = GymnasiumVectorEnv(puffercore.vector.make(CartPole, 64, backend="threads"))   # IS a gymnasium VectorEnv

    from puffercore.interop.sb3 import SB3VecEnv                  # imports stable-baselines3
    venv = SB3VecEnv(puffercore.vector.make(lambda: gymnasium.make("CartPole-v1"), 8, backend="processes"))

Each module imports its framework only when imported itself. Staggered batches stay
puffercore's own API (neither interface has them): adapters need batch_size == num_envs.
"""
