"""puffercore's native C environments. Each class is a vectorized PufferEnv:
`CartPole(num_envs=4096, seed=0)`; see ocean/<name>/<name>.h for the rules."""

from puffercore.ocean.cartpole import CartPole
from puffercore.ocean.connect4 import Connect4
from puffercore.ocean.native import NativeEnv
from puffercore.ocean.snake import Snake
from puffercore.ocean.squared import Squared

__all__ = ["CartPole", "Connect4", "NativeEnv", "Snake", "Squared"]
