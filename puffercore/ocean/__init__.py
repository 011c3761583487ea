"""puffercore's native C environments. Each class is a vectorized PufferEnv:
`CartPole(num_envs=4096, seed=0)`; see ocean/<name>/<name>.h for the rules.
`Connect4Env` and `AzulEnv` are the RL envs around the games `puffercore.games.Connect4`
and `puffercore.games.Azul` (the old env names `Connect4` and `Azul` warn and go next
release)."""

from puffercore.deprecation import renamed
from puffercore.ocean.azul import AzulEnv
from puffercore.ocean.busy import Busy
from puffercore.ocean.cartpole import CartPole
from puffercore.ocean.connect4 import Connect4Env
from puffercore.ocean.memory import Memory
from puffercore.ocean.native import NativeEnv
from puffercore.ocean.snake import Snake
from puffercore.ocean.squared import Squared

__getattr__ = renamed(__name__, {"Azul": "puffercore.ocean.AzulEnv", "Connect4": "puffercore.ocean.Connect4Env"})

__all__ = ["AzulEnv", "Busy", "CartPole", "Connect4Env", "Memory", "NativeEnv", "Snake", "Squared"]
