"""The PPO kernels in C (native/ppo/), built as extension modules of this package:

- `mlp`: a small MLP's forward, backward and sampling (`puffercore.ppo.native_mlp`);
- `loss`: the PPO loss and its gradient with respect to the head's outputs
  (`puffercore.ppo.mlp_gradients`);
- `adam`: the clipped Adam step over a flat buffer (`puffercore.ppo.flat_adam`).
"""
