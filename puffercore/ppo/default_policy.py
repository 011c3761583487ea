"""The policy PPOConfig describes (`DefaultPolicy`, an `ppo.policy.ActorCritic`): an MLP
actor and an MLP critic (or one shared MLP trunk, optionally followed by an LSTM cell)
with an action head for Discrete, MultiDiscrete or Box actions. Image observations
(uint8 [C, H, W], e.g. Atari's stacked frames) get the Nature CNN instead of the MLP.

    policy = DefaultPolicy(vec.single_observation_space, vec.single_action_space,
                           observation_tree=vec.observation_tree, hidden_size=64, lstm=False)
    out = policy.output(observations, state)   # out.params (masked), out.value, out.state
    actions, log_prob = policy.sample(out, generator)
    log_prob, entropy = policy.evaluate(out, actions)

Separate actor and critic networks are the default for MLP policies (as in CleanRL's
ppo.py): with one shared trunk the value loss, whose returns can be in the hundreds,
sends the trunk gradients 100-1000x those of the policy loss, so the trunk learns only
value features and the global norm clip shrinks the policy's share to nothing (measured
on CartPole-v1: approx KL 1e-4..1e-7 per update, no learning). A recurrent policy keeps
the shared trunk: its critic needs the LSTM's memory.

Initialisation follows the PPO implementation details (Huang et al. 2022): orthogonal
weights with the gain of the hidden activation (torch's `calculate_gain`; sqrt(2) for
GELU), 0.01 for the policy head (near-uniform first actions), 1.0 for the value head,
zero biases; `ortho_init=False` keeps torch's default init of the linear and conv layers
instead (SB3's ortho_init=False). The Nature CNN (Mnih et al. 2015, as in CleanRL's
ppo_atari) is conv 32x8 stride 4, 64x4 s2, 64x3 s1, linear 512, ReLUs, orthogonal
sqrt(2); images stay uint8 in the rollout and become floats in [0, 1] only inside
`forward`, on the device, one minibatch at a time (float rollouts of 84x84x4 frames
would take 4x the memory).
"""

from __future__ import annotations

import functools
import math

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from puffercore.ppo.policy import ActorCritic, PolicyOutput

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU}
# Orthogonal-init gain of the layers each activation follows (GELU is ReLU-like).
GAINS = {"tanh": nn.init.calculate_gain("tanh"), "relu": nn.init.calculate_gain("relu"), "gelu": math.sqrt(2)}


def layer_init(layer: nn.Module, gain: float) -> nn.Module:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def nature_cnn(image_shape: tuple[int, int, int], output_size: int = 512) -> nn.Sequential:
    channels = image_shape[0]
    convs = nn.Sequential(
        layer_init(nn.Conv2d(channels, 32, 8, stride=4), math.sqrt(2)), nn.ReLU(),
        layer_init(nn.Conv2d(32, 64, 4, stride=2), math.sqrt(2)), nn.ReLU(),
        layer_init(nn.Conv2d(64, 64, 3, stride=1), math.sqrt(2)), nn.ReLU(),
        nn.Flatten(),
    )
    with torch.no_grad():
        flat_size = convs(torch.zeros(1, *image_shape)).shape[1]
    # Channels-last filters (and inputs, Policy.features): oneDNN's faster convolutions
    # on CPU (bench/bench_update.py --cleanrl).
    return nn.Sequential(*convs, layer_init(nn.Linear(flat_size, output_size), math.sqrt(2)), nn.ReLU()).to(
        memory_format=torch.channels_last)


def image_shape_of(observation_space: spaces.Box, observation_tree=None) -> tuple[int, int, int] | None:
    """[C, H, W] when the observations are one uint8 image: a 3-D uint8 Box, or a flat
    row whose tree (puffercore.emulation) is one such Box; else None."""
    if observation_tree is not None and len(observation_tree.leaves) == 1 and not observation_tree.leaves[0].path:
        observation_space = observation_tree.leaves[0].space
    if isinstance(observation_space, spaces.Box) and observation_space.dtype == np.uint8 \
            and len(observation_space.shape) == 3:
        return tuple(int(size) for size in observation_space.shape)
    return None


ENCODERS = ("auto", "mlp", "cnn")


def mlp(input_size: int, hidden_size: int, num_layers: int, activation: str) -> nn.Sequential:
    layers, width = [], input_size
    for _ in range(num_layers):
        layers += [layer_init(nn.Linear(width, hidden_size), GAINS[activation]), ACTIVATIONS[activation]()]
        width = hidden_size
    return nn.Sequential(*layers)


class DefaultPolicy(ActorCritic):
    """Actor encoder -> policy head and critic encoder -> value head; or (`shared_trunk`)
    one encoder -> optional LSTM cell -> both heads. The encoder is an MLP, or the Nature
    CNN (`encoder="cnn"`, and what "auto" picks for one uint8 [C, H, W] image); CleanRL's
    ppo_atari shares the CNN trunk (puffercore's Atari preset sets shared_trunk).

    Observations are rows of the flat observation space (any dtype; cast to float).
    With `observation_tree` (from puffercore.emulation) rows of mixed-dtype leaves are
    decoded leaf by leaf; a leaf named `action_mask` masks the logits in `output`, as for
    every ActorCritic."""

    def __init__(
        self,
        observation_space: spaces.Box,
        action_space: gymnasium.Space,
        observation_tree=None,
        hidden_size: int = 64,
        num_layers: int = 2,
        activation: str = "tanh",
        lstm: bool = False,
        forget_bias: float = 0.0,
        shared_trunk: bool | None = None,
        encoder: str = "auto",
        log_std_init: float = 0.0,
        ortho_init: bool = True,
    ):
        super().__init__(observation_space, action_space, observation_tree, log_std_init)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        if num_layers < 1 or hidden_size < 1:
            raise ValueError(f"num_layers and hidden_size must be >= 1, got {num_layers} and {hidden_size}")
        if encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {list(ENCODERS)}, got {encoder!r}")
        self.image_shape = image_shape_of(observation_space, observation_tree)
        if encoder == "cnn" and self.image_shape is None:
            raise ValueError(f"encoder='cnn' needs uint8 [C, H, W] image observations, got {observation_space}")
        if encoder == "mlp":
            self.image_shape = None
        self.decode_leaves = observation_tree is not None and observation_tree.is_bytes
        input_size = self.decoded_size

        if shared_trunk is None:
            shared_trunk = lstm
        if lstm and not shared_trunk:
            raise ValueError("lstm=True needs shared_trunk=True: the critic reads the LSTM state")
        if self.image_shape is not None:
            make_encoder, features_size = functools.partial(nature_cnn, self.image_shape), 512
        else:
            make_encoder = functools.partial(mlp, input_size, hidden_size, num_layers, activation)
            features_size = hidden_size
        self.encoder = make_encoder()
        # None: the critic reads the shared encoder's output.
        self.critic_encoder = None if shared_trunk else make_encoder()
        self.lstm = None
        if lstm:
            self.lstm = nn.LSTMCell(features_size, hidden_size)
            for name, parameter in self.lstm.named_parameters():
                if "weight" in name:
                    nn.init.orthogonal_(parameter, 1.0)
                else:
                    nn.init.zeros_(parameter)
            # Gate order i, f, g, o: a positive forget bias keeps memory by default.
            self.lstm.bias_ih.data[hidden_size : 2 * hidden_size] = forget_bias
        head_input = hidden_size if lstm else features_size
        self.actor = layer_init(nn.Linear(head_input, self.head.size), 0.01)
        self.critic = layer_init(nn.Linear(head_input, 1), 1.0)
        if not ortho_init:  # torch's default init, as SB3's ortho_init=False (the LSTM stays orthogonal)
            for layer in self.modules():
                if isinstance(layer, (nn.Linear, nn.Conv2d)):
                    layer.reset_parameters()
        if self.log_std is not None:  # registered last, as before ActorCritic: the optimizer's flat layout
            self._parameters["log_std"] = self._parameters.pop("log_std")  # in earlier checkpoints is in this order

    @property
    def hidden_size(self) -> int:
        return self.actor.in_features

    def parameter_groups(self) -> dict[str, list[nn.Parameter]]:
        """Parameters by the loss that trains them, for per-group gradient clipping: actor
        and critic apart, or one group when they share a trunk."""
        if self.critic_encoder is None:
            return {"": list(self.parameters())}
        critic = [*self.critic_encoder.parameters(), *self.critic.parameters()]
        critic_ids = {id(parameter) for parameter in critic}
        return {"actor": [p for p in self.parameters() if id(p) not in critic_ids], "critic": critic}

    def initial_state(self, batch: int, device) -> tuple[torch.Tensor, torch.Tensor] | None:
        if self.lstm is None:
            return None
        zeros = torch.zeros(batch, self.hidden_size, device=device)
        return zeros, zeros.clone()

    def features(self, observations: torch.Tensor) -> torch.Tensor:
        """Observations as the encoder's input, in its weights' dtype (float32, or a
        frozen copy's bfloat16)."""
        dtype = self.actor.weight.dtype
        if self.image_shape is not None:
            images = observations.reshape(observations.shape[0], *self.image_shape)
            return images.contiguous(memory_format=torch.channels_last).to(dtype).div_(255.0)  # as nature_cnn's
        return self.decode(observations, dtype)

    def forward(self, observations: torch.Tensor, state=None) -> PolicyOutput:
        features = self.features(observations)
        hidden = self.encoder(features)
        critic_hidden = hidden if self.critic_encoder is None else self.critic_encoder(features)
        if self.lstm is not None:
            state = self.lstm(hidden, state)
            hidden = critic_hidden = state[0]
        return PolicyOutput(self.actor(hidden), self.critic(critic_hidden).squeeze(-1), state)
