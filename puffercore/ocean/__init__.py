"""puffercore's native C environments. Each class is a vectorized PufferEnv:
`CartPole(num_envs=4096, seed=0)`; see ocean/<name>/<name>.h for the rules."""

from puffercore.ocean.azul import Azul
from puffercore.ocean.busy import Busy
from puffercore.ocean.cartpole import CartPole
from puffercore.ocean.connect4 import Connect4
from puffercore.ocean.memory import Memory
from puffercore.ocean.native import NativeEnv
from puffercore.ocean.snake import Snake
from puffercore.ocean.squared import Squared

__all__ = ["Azul", "Busy", "CartPole", "Connect4", "Memory", "NativeEnv", "Snake", "Squared"]
