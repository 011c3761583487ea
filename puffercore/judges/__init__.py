"""Judges of trained agents: `connect4` scores an agent's Connect4 moves with a perfect
solver (bitbully); `strength` plays agents against bots (random, UCT, the game's own,
OpenSpiel's MCTSBot). Their solvers and bots come with `pip install "puffercore[bench]"`;
the commands are `puffercore judge connect4` and `puffercore strength` (`judges.cli`)."""
