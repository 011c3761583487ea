# cython: boundscheck=False, wraparound=False, cdivision=True
# The PPO objective of one minibatch for a categorical policy, and its gradient with
# respect to the logits and the values, in one pass over the rows: the elementwise part
# of puffercore.ppo.mlp_gradients (torch runs the matmuls). Autograd on the same loss
# (puffercore.ppo.loss.ppo_loss) is its reference in the tests.
from libc.math cimport exp, fabs, log
from libc.stdint cimport int64_t


def categorical_loss(const float[:, ::1] logits, const float[::1] value, const int64_t[::1] action,
                     const float[::1] old_log_prob, const float[::1] advantage, const float[::1] returns,
                     const float[::1] old_value, const float[::1] row_weight, double advantage_mean,
                     double advantage_scale, double clip_coef, bint clip_vloss, double vf_coef, double ent_coef,
                     float[:, ::1] d_logits, float[::1] d_value, float[::1] scalars):
    """logits: [actions, rows] (transposed); value and the rollout's fields: [rows];
    action: indices in [0, actions); row_weight: each row's share of a mean ([rows]), or
    empty for 1 / rows each. Advantages are used as (advantage - advantage_mean) *
    advantage_scale. Writes d loss / d logits ([actions, rows]), d loss / d value
    ([rows]) and scalars = loss, policy loss, value loss, entropy, approx KL, clip
    fraction."""
    cdef Py_ssize_t actions = logits.shape[0], rows = logits.shape[1], i, a
    for name, length in (("value", value.shape[0]), ("action", action.shape[0]),
                         ("old_log_prob", old_log_prob.shape[0]), ("advantage", advantage.shape[0]),
                         ("returns", returns.shape[0]), ("old_value", old_value.shape[0]),
                         ("d_value", d_value.shape[0])):
        if length != rows:
            raise ValueError(f"{name} must hold {rows} rows (the logits' columns), got {length}")
    if row_weight.shape[0] not in (0, rows):
        raise ValueError(f"row_weight must hold 0 or {rows} rows, got {row_weight.shape[0]}")
    if d_logits.shape[0] != actions or d_logits.shape[1] != rows:
        raise ValueError(f"d_logits must be [{actions}, {rows}], got [{d_logits.shape[0]}, {d_logits.shape[1]}]")
    if scalars.shape[0] != 6:
        raise ValueError(f"scalars must hold 6 values, got {scalars.shape[0]}")
    if actions < 1 or rows < 1:
        raise ValueError(f"logits must be [actions >= 1, rows >= 1], got [{actions}, {rows}]")
    for i in range(rows):
        if not 0 <= action[i] < actions:
            raise ValueError(f"action[{i}] = {action[i]} is outside [0, {actions})")

    cdef double policy_loss = 0.0, value_loss = 0.0, entropy_sum = 0.0, approx_kl = 0.0, clip_fraction = 0.0
    cdef double weight = 1.0 / rows, high, lse, log_p, p, entropy, log_ratio, ratio, adv
    cdef double unclipped, clipped, d_log_prob, error, clipped_error, squared, clipped_squared, d_v
    cdef bint weighted = row_weight.shape[0] == rows
    with nogil:
        for i in range(rows):
            if weighted:
                weight = row_weight[i]
            high = logits[0, i]
            for a in range(1, actions):
                if logits[a, i] > high:
                    high = logits[a, i]
            lse = 0.0
            for a in range(actions):
                lse += exp(logits[a, i] - high)
            lse = high + log(lse)
            entropy = 0.0
            for a in range(actions):
                log_p = logits[a, i] - lse
                entropy -= exp(log_p) * log_p

            log_ratio = (<double>logits[action[i], i] - lse) - old_log_prob[i]
            ratio = exp(log_ratio)
            adv = (<double>advantage[i] - advantage_mean) * advantage_scale
            unclipped = -adv * ratio
            clipped = -adv * (1.0 - clip_coef if ratio < 1.0 - clip_coef else
                              (1.0 + clip_coef if ratio > 1.0 + clip_coef else ratio))
            # d / d log-prob: the unclipped term's own where it is the max (autograd's
            # half-and-half split of a tie sums to the same)
            d_log_prob = unclipped * weight if unclipped >= clipped else 0.0
            policy_loss += weight * (unclipped if unclipped >= clipped else clipped)

            error = <double>value[i] - returns[i]
            d_v = <double>value[i] - old_value[i]
            if clip_vloss and fabs(d_v) > clip_coef:  # within the clip both terms are the error itself
                clipped_error = old_value[i] + (clip_coef if d_v > 0.0 else -clip_coef) - returns[i]
                squared, clipped_squared = error * error, clipped_error * clipped_error
                value_loss += weight * (squared if squared >= clipped_squared else clipped_squared)
                d_v = error if squared >= clipped_squared else 0.0
            else:
                value_loss += weight * error * error
                d_v = error
            d_value[i] = <float>(d_v * vf_coef * weight)
            entropy_sum += weight * entropy
            approx_kl += weight * ((ratio - 1.0) - log_ratio)
            if fabs(ratio - 1.0) > clip_coef:
                clip_fraction += weight

            # d loss / d logits = d_log_prob (onehot - p) + ent_coef w p (log p + H)
            for a in range(actions):
                log_p = logits[a, i] - lse
                p = exp(log_p)
                d_logits[a, i] = <float>(p * (ent_coef * weight * (log_p + entropy) - d_log_prob)
                                         + (d_log_prob if a == action[i] else 0.0))
    value_loss *= 0.5
    scalars[0] = <float>(policy_loss - ent_coef * entropy_sum + vf_coef * value_loss)
    scalars[1] = <float>policy_loss
    scalars[2] = <float>value_loss
    scalars[3] = <float>entropy_sum
    scalars[4] = <float>approx_kl
    scalars[5] = <float>clip_fraction
