"""A policy of your own for puffercore's PPO: a small CNN over Connect4's board.

    puffercore train connect4 --policy examples.connect4_cnn:BoardCNN      # from the repository root
    ppo.train(ppo.PPOConfig.for_env("connect4"), "connect4", policy=BoardCNN)

Connect4's observation is Dict(action_mask, board [2, 6, 7]) laid out as one float row;
the framework masks the illegal columns' logits, so the network only reads the board.
"""

from torch import nn

from puffercore import ppo


class BoardCNN(ppo.ActorCritic):
    def __init__(self, observation_space, action_space, observation_tree=None):
        super().__init__(observation_space, action_space, observation_tree)
        channels, height, width = observation_tree.leaf("board").shape
        self.body = nn.Sequential(
            nn.Conv2d(channels, 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
            nn.Flatten(), nn.Linear(32 * height * width, 128), nn.ReLU())
        self.actor = nn.Linear(128, self.head.size)  # one logit per column
        self.critic = nn.Linear(128, 1)

    def forward(self, observations):
        board = self.observation_tree.unflatten(observations)["board"]  # [batch, 2, 6, 7], a view
        hidden = self.body(board)
        return self.actor(hidden), self.critic(hidden).squeeze(-1)
