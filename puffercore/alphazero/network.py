"""The AlphaZero policy-value network: a small residual tower with a policy head (one
logit per action, illegal actions masked) and a value head (one tanh value per player,
in observation order: the player to move first, then the others in turn order).

Board games with [C, H, W] observations get a convolutional tower; flat observations
get the same tower with linear layers instead of 3x3 convolutions. `build_network` sizes
one for a config's game; `make_evaluator` turns one into BatchedMCTS's leaf evaluator.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from puffercore.alphazero.config import GAMES, AlphaZeroConfig
from puffercore.alphazero.device import DeviceEvaluator
from puffercore.checks import check_int
from puffercore.frozen_copy import FrozenCopy

# Masked logits are very negative but finite, so a zero target probability times its
# log-probability stays 0 in the cross-entropy instead of becoming NaN.
ILLEGAL_LOGIT = -1e9


class ResidualBlock(nn.Module):
    def __init__(self, width: int, convolutional: bool):
        super().__init__()
        if convolutional:
            self.first = nn.Conv2d(width, width, 3, padding=1, bias=False)
            self.second = nn.Conv2d(width, width, 3, padding=1, bias=False)
            self.first_norm, self.second_norm = nn.BatchNorm2d(width), nn.BatchNorm2d(width)
        else:
            self.first, self.second = nn.Linear(width, width, bias=False), nn.Linear(width, width, bias=False)
            self.first_norm, self.second_norm = nn.BatchNorm1d(width), nn.BatchNorm1d(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.first_norm(self.first(x)))
        return torch.relu(x + self.second_norm(self.second(hidden)))


class PolicyValueNet(nn.Module):
    """`forward(observations [B, *observation_shape], legal_masks [B, num_actions] bool)`
    -> (masked policy logits [B, num_actions], values [B, num_players] in [-1, 1])."""

    def __init__(self, observation_shape: tuple[int, ...], num_actions: int, num_players: int,
                 channels: int = 64, blocks: int = 3):
        super().__init__()
        for name, value in (("num_actions", num_actions), ("num_players", num_players),
                            ("channels", channels)):
            check_int(value, name, 1)
        check_int(blocks, "blocks", 0)
        self.observation_shape = tuple(int(size) for size in observation_shape)
        self.num_actions = num_actions
        self.convolutional = len(self.observation_shape) == 3
        if self.convolutional:
            in_channels, height, width = self.observation_shape
            self.stem = nn.Sequential(nn.Conv2d(in_channels, channels, 3, padding=1, bias=False),
                                      nn.BatchNorm2d(channels), nn.ReLU())
            cells = height * width
            # 1x1 convolutions shrink the tower to 2 (policy) and 1 (value) planes, as in AlphaZero.
            self.policy_head = nn.Sequential(nn.Conv2d(channels, 2, 1, bias=False), nn.BatchNorm2d(2), nn.ReLU(),
                                             nn.Flatten(), nn.Linear(2 * cells, num_actions))
            self.value_head = nn.Sequential(nn.Conv2d(channels, 1, 1, bias=False), nn.BatchNorm2d(1), nn.ReLU(),
                                            nn.Flatten(), nn.Linear(cells, channels), nn.ReLU(),
                                            nn.Linear(channels, num_players), nn.Tanh())
        else:
            self.stem = nn.Sequential(nn.Flatten(), nn.Linear(math.prod(self.observation_shape), channels, bias=False),
                                      nn.BatchNorm1d(channels), nn.ReLU())
            self.policy_head = nn.Linear(channels, num_actions)
            self.value_head = nn.Sequential(nn.Linear(channels, channels), nn.ReLU(),
                                            nn.Linear(channels, num_players), nn.Tanh())
        self.tower = nn.Sequential(*(ResidualBlock(channels, self.convolutional) for _ in range(blocks)))

    def forward(self, observations: torch.Tensor, legal_masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.tower(self.stem(observations))
        logits = self.policy_head(features).masked_fill(~legal_masks, ILLEGAL_LOGIT)
        return logits, self.value_head(features)


class PriorsAndValues(nn.Module):
    """A network's evaluation as the search takes it: priors (the softmax of the masked
    logits, in float32) and values, in one graph with the forward."""

    def __init__(self, network: PolicyValueNet):
        super().__init__()
        self.network = network

    def forward(self, observations: torch.Tensor, legal_masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits, values = self.network(observations, legal_masks)
        return torch.softmax(logits.float(), dim=1), values.float()


def make_evaluator(network: PolicyValueNet, precision: str = "float32", trace: bool = True, lanes: int = 0,
                   max_rows: int | None = None):
    """The BatchedMCTS evaluator of a network: priors (softmax over legal actions) and
    values for a batch of leaves, one forward pass, no gradients, on a frozen copy
    of the network's current weights (`puffercore.frozen_copy`: batch norms folded, in
    `precision`, traced unless `trace` is false), the softmax traced with it.
    A network on a CUDA device gets a `device.DeviceEvaluator` instead (one copy each
    way per batch, CUDA graphs rather than a trace): `lanes` threads may call it at once,
    each with batches of at most `max_rows` (0 lanes: one thread, any rows)."""
    if next(network.parameters()).device.type != "cpu":
        model = FrozenCopy(PriorsAndValues(network), precision, trace=False)
        return DeviceEvaluator(model, network.observation_shape, network.num_actions, lanes, max_rows)
    model = FrozenCopy(PriorsAndValues(network), precision, trace)

    def evaluate(observations: np.ndarray, legal_masks: np.ndarray):
        with torch.inference_mode():
            priors, values = model(torch.from_numpy(observations), torch.from_numpy(legal_masks))
        return priors.numpy(), values.numpy()

    return evaluate


class CachedEvaluator:
    """An evaluator that remembers: a position (observation and legal mask, byte for
    byte) evaluated once is answered from the table afterwards, and repeats within a
    batch are evaluated once. Exact for one network version: make a new one after the
    weights change. In self-play over half of the leaves are positions already seen
    (every game starts from the same board, and trees of different games overlap). The
    table is cleared when it reaches `capacity` entries."""

    def __init__(self, evaluate, capacity: int):
        check_int(capacity, "capacity", 1)
        self.evaluate, self.capacity = evaluate, capacity
        self.table: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        self.hits = self.lookups = 0

    def __call__(self, observations: np.ndarray, legal_masks: np.ndarray):
        keys = [observation.tobytes() + mask.tobytes() for observation, mask in zip(observations, legal_masks)]
        new_rows = {}  # each unseen key -> the first row holding it
        for row, key in enumerate(keys):
            if key not in self.table and key not in new_rows:
                new_rows[key] = row
        self.lookups += len(keys)
        self.hits += len(keys) - len(new_rows)
        fresh = {}
        if new_rows:
            rows = list(new_rows.values())
            priors, values = self.evaluate(observations[rows], legal_masks[rows])
            fresh = dict(zip(new_rows, zip(priors, values)))
        answers = [fresh.get(key) or self.table[key] for key in keys]
        if len(self.table) + len(fresh) > self.capacity:
            self.table.clear()
        self.table.update(fresh)
        return np.stack([prior for prior, _ in answers]), np.stack([value for _, value in answers])


def build_network(config: AlphaZeroConfig) -> PolicyValueNet:
    game = GAMES[config.game]()
    return PolicyValueNet(game.observation_shape, game.num_actions, config.num_players,
                          channels=config.channels, blocks=config.blocks)
