"""What a PPO trainer is built from: the vector env (with the transforms the config asks
for), the policy and its optimizer; also used by evaluation and deployment.

The policy argument of `ppo.train`, `ppo.evaluate` and `ppo.Policy.load` (`--policy` on
the command line) is None (`DefaultPolicy`, which PPOConfig's policy fields describe), an
`ActorCritic` class or a function making one, or "module:attribute" naming one, which is
imported. A checkpoint records the policy's name (`policy_record`) and
`resolve_saved_policy` is the one rule for it, as `env_sources.resolve_saved` is for
envs: a name read from a file is never imported; a policy of the user's is passed again.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

import torch

from puffercore import checkpoint, env_sources
from puffercore.config_files import saved_config
from puffercore.ppo.config import PPOConfig
from puffercore.ppo.default_policy import DefaultPolicy
from puffercore.ppo.flat_adam import FlatAdam
from puffercore.ppo.policy import ActorCritic
from puffercore.spaces import SpaceTree, space_from_data, space_to_data
from puffercore.transforms import FrameStack, Normalize

BUILTIN_POLICY = "builtin"  # a checkpoint's name for DefaultPolicy
# How a caller passes the policy of a checkpoint that can't make its own.
PASS_THE_POLICY = ("on the command line, `--policy my_module:MyPolicy` (train --resume, eval, export); in Python, "
                   "`ppo.train(resume=RUN, policy=MyPolicy)`, `ppo.evaluate(RUN, policy=MyPolicy)` or "
                   "`ppo.Policy.load(RUN, policy=MyPolicy)`")


def transformed(vec, config: PPOConfig):
    """`vec` wrapped in the transforms `config` asks for: frame stacking, then
    normalization (of the stacked rows); `vec` itself when none."""
    if config.frame_stack > 1:
        vec = FrameStack(vec, config.frame_stack)
    if not (config.norm_obs or config.norm_reward):
        return vec
    return Normalize(vec, observations=config.norm_obs, rewards=config.norm_reward, gamma=config.gamma,
                     clip_observations=config.clip_obs, clip_rewards=config.clip_reward)


def make_vector(source: env_sources.EnvSource, config: PPOConfig, seed: int):
    """The vector env of `source` (the env, resolved once by its caller) under `config`."""
    return env_sources.make_vector(source, backend=config.backend, num_envs=config.num_envs,
                                   num_workers=config.num_workers or None, batch_size=config.batch_size or None,
                                   seed=seed)


def free_cores(vec) -> int:
    """Torch threads: the cores left after the env workers and the main thread, which
    steps serial envs and hands batches to the engine (at least one). Oversubscribing
    makes torch's intra-op threads spin against the env workers: on 2 loaded cores, two
    torch threads made small-MLP inference 4x slower than one."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores - 1 - (getattr(vec, "num_workers", 0) or 0))


@dataclasses.dataclass(frozen=True)
class PolicySource:
    name: str | None  # what a checkpoint records: BUILTIN_POLICY, module:attribute, None (no importable name)
    factory: Callable[..., ActorCritic] | None  # None: DefaultPolicy, from the config


def resolve_policy(policy: Any) -> PolicySource:
    """The PolicySource of a `policy` argument (see the module docstring)."""
    if policy is None:
        return PolicySource(BUILTIN_POLICY, None)
    if isinstance(policy, PolicySource):
        return policy
    if isinstance(policy, str):
        if ":" not in policy:
            raise ValueError(f"policy must be module:attribute naming an ActorCritic class (e.g. my_policies:MyPolicy), "
                             f"got {policy!r}")
        return PolicySource(policy, env_sources.import_attribute(policy, "policy"))
    if not callable(policy):
        raise TypeError(f"policy must be an ActorCritic class, a function making one or module:attribute, got {policy!r}")
    return PolicySource(env_sources.importable_name(policy), policy)


def resolve_saved_policy(saved_name: str | None, policy: Any, where: str) -> PolicySource:
    """The PolicySource of a run whose checkpoint (at `where`) names its policy
    `saved_name`: the built-in one by name; any other only as the caller passes it
    (refused when its name is another), never imported from the name."""
    if policy is not None:
        source = resolve_policy(policy)
        if saved_name == BUILTIN_POLICY and source.name != BUILTIN_POLICY:
            raise ValueError(f"{where} was trained with puffercore's built-in policy (PPOConfig's policy fields), "
                             f"not {source.name or policy!r}: leave the policy out")
        if saved_name is not None and source.name is not None and source.name != saved_name:
            raise ValueError(f"{where} was trained with the policy {saved_name!r}, not {source.name!r}")
        return source
    if saved_name == BUILTIN_POLICY:
        return PolicySource(BUILTIN_POLICY, None)
    if saved_name is None:
        raise ValueError(f"{where} was trained with a policy that has no importable name (a lambda or a partial); "
                         f"pass it again: {PASS_THE_POLICY}")
    raise ValueError(f"{where} was trained with the policy {saved_name!r}; code a checkpoint names is never imported. "
                     f"If you trust it, pass it yourself (`--policy {saved_name}`): {PASS_THE_POLICY}")


def make_policy(vec, config: PPOConfig, policy: Any = None) -> ActorCritic:
    """The policy (`resolve_policy`; default: the one `config` describes) for the spaces
    and observation tree of `vec`."""
    return build_policy(resolve_policy(policy), vec.single_observation_space, vec.single_action_space,
                        getattr(vec, "observation_tree", None), config)


def build_policy(source: PolicySource, observation_space, action_space, observation_tree,
                 config: PPOConfig) -> ActorCritic:
    if source.factory is None:
        return DefaultPolicy(observation_space, action_space, observation_tree, hidden_size=config.hidden_size,
                             num_layers=config.num_layers, activation=config.activation, lstm=config.lstm,
                             forget_bias=config.forget_bias, shared_trunk=config.shared_trunk or config.lstm,
                             log_std_init=config.log_std_init, ortho_init=config.ortho_init)
    policy = source.factory(observation_space, action_space, observation_tree)
    if not isinstance(policy, ActorCritic):
        raise TypeError(f"policy {source.name or source.factory!r} made a {type(policy).__name__}, not a "
                        f"puffercore.ppo.ActorCritic (subclass it; see puffercore.ppo.policy)")
    return policy


def policy_record(source: PolicySource, policy: ActorCritic) -> dict[str, Any]:
    """What a checkpoint says of its policy: the name and the spaces it was built for
    (so that `ppo.Policy.load` builds it without the env), as plain data."""
    tree = policy.observation_tree
    return {"name": source.name, "observation_space": space_to_data(policy.observation_space),
            "action_space": space_to_data(policy.head.space),
            "observation_tree": None if tree is None else space_to_data(tree.space)}


def saved_policy_name(state: dict[str, Any]) -> str | None:
    """The policy name a checkpoint `state` records (earlier checkpoints had only the built-in one)."""
    return (state.get("policy") or {"name": BUILTIN_POLICY})["name"]


def saved_policy(state: dict[str, Any], policy: Any, where: str, vec=None) -> ActorCritic:
    """The policy of a checkpoint `state` read from `where`, its weights loaded, built for
    the spaces of `vec`, or without one for the spaces the checkpoint records. `policy`:
    the user's, for a run not trained with the built-in one (`resolve_saved_policy`)."""
    source = resolve_saved_policy(saved_policy_name(state), policy, where)
    config = saved_config(PPOConfig, state["config"], where)
    if vec is not None:
        spaces = (vec.single_observation_space, vec.single_action_space, getattr(vec, "observation_tree", None))
    else:
        spaces = saved_spaces(state, where)
        if spaces is None:
            raise ValueError(f"{where} records no spaces for its policy (written by an earlier puffercore); "
                             f"evaluate it with its env instead (ppo.evaluate)")
    check_saved_sizes(state, source, config, where, spaces)
    network = build_policy(source, *spaces, config)
    try:
        network.load_state_dict(state["model"])
    except RuntimeError as error:
        raise ValueError(f"{where}: the checkpoint's weights do not fit {type(network).__name__} "
                         f"({str(error).splitlines()[0]} ...)") from None
    return network


def saved_spaces(state: dict[str, Any], where: str) -> tuple | None:
    """(observation space, action space, observation tree) of the policy a checkpoint
    `state` (read from `where`) records; None for an earlier checkpoint that records none."""
    record = state.get("policy") or {}
    if "observation_space" not in record:
        return None
    try:
        tree = None if record["observation_tree"] is None else SpaceTree(space_from_data(record["observation_tree"]))
        return space_from_data(record["observation_space"]), space_from_data(record["action_space"]), tree
    except (KeyError, TypeError, ValueError, AttributeError, MemoryError) as error:  # none of these in a file save wrote
        raise ValueError(f"{where}: the spaces it records for its policy are not readable "
                         f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'no detail'})") from None


def check_saved_sizes(state: dict[str, Any], source: PolicySource, config: PPOConfig, where: str,
                      spaces: tuple | None = None) -> None:
    """The weights of checkpoint `state` checked against the DefaultPolicy `config`
    describes for `spaces` (default: the ones it records) before that policy is built
    (`checkpoint.check_weights`): a saved config saying hidden_size 10**6 is refused, not
    allocated. A policy of the user's takes no sizes from the config."""
    spaces = spaces or saved_spaces(state, where)
    if source.factory is None and spaces is not None:
        checkpoint.check_weights(lambda: build_policy(source, *spaces, config), state["model"], where)


def make_optimizer(policy: ActorCritic, learning_rate: float, device: torch.device, step: str | None = None) -> FlatAdam:
    """Adam with CleanRL's eps over one flat buffer holding every parameter, each parameter
    group's together (`FlatAdam`: the policy's parameters become views of it), fused where
    this torch has the kernel for `device`: one kernel updates every parameter, where torch's
    default on CPU loops over them tensor by tensor (bench/bench_update.py --cleanrl).
    `step`: an UpdatePlan's optimizer choice (ppo.plan; default the same rule's)."""
    return FlatAdam(policy, lr=learning_rate, eps=1e-5, groups=policy.parameter_groups(), step=step)
