"""Old home of `FrozenCopy` (`puffercore.frozen_copy`, once `InferenceCopy`) and of the
precision names (`puffercore.precision`): "inference" names the forward pass that acts,
in PPO's collection and AlphaZero's search alike, not one module. These names warn and
go next release."""

from puffercore.deprecation import renamed

__getattr__ = renamed(__name__, {
    "InferenceCopy": "puffercore.frozen_copy.FrozenCopy", "fold_batch_norms": "puffercore.frozen_copy.fold_batch_norms",
    "PRECISIONS": "puffercore.precision.PRECISIONS", "native_bf16": "puffercore.precision.native_bf16",
    "resolve_precision": "puffercore.precision.resolve_precision"})
