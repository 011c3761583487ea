"""Run under torchrun by tests/test_distributed.py: a tiny TicTacToe AlphaZero run; each
rank writes its games, a digest of its network and how the run ended (the signal that
stopped it, if one did) to OUT/rank<R>.txt after training.

    torchrun --standalone --nproc-per-node 2 tests/scripts/distributed_alphazero.py OUT RUN_DIR [ITERATIONS]
"""

import hashlib
import os
import sys

import torch

from puffercore.alphazero.config import AlphaZeroConfig
from puffercore.alphazero.trainer import train

out, run_dir = sys.argv[1], sys.argv[2]
iterations = int(sys.argv[3]) if len(sys.argv) > 3 else 2
config = AlphaZeroConfig.for_game("tictactoe", run_dir=run_dir, iterations=iterations, channels=8, blocks=1,
                                  games_per_iteration=4, parallel_games=4, simulations=8, train_steps=3,
                                  batch_size=16, eval_interval=2, eval_games=2, eval_simulations=8,
                                  baseline_simulations=10, torch_threads=1, self_play_threads=1)
trainer = train(config, quiet=True)
flat = torch.cat([p.detach().reshape(-1) for p in trainer.network.parameters()])
with open(os.path.join(out, f"rank{trainer.group.rank}.txt"), "w") as file:
    file.write(f"{trainer.counters['games']} {hashlib.sha256(flat.numpy().tobytes()).hexdigest()} "
               f"{trainer.interrupted.name if trainer.interrupted else None}\n")
