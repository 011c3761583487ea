# cython: boundscheck=False, wraparound=False, cdivision=True
# The PPO objective of one minibatch and its gradient with respect to the policy head's
# outputs (logits, or a Gaussian's means and log std) and the values, in one pass over
# the rows: the elementwise part of puffercore.ppo.mlp_gradients (torch runs the
# matmuls). Autograd on the same loss (puffercore.ppo.loss.ppo_loss) is its reference in
# the tests.
from libc.math cimport M_PI, exp, fabs, log, sqrt
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

cdef struct Totals:  # the minibatch's weighted sums
    double policy, value, entropy, approx_kl, clip_fraction, weight


cdef inline double row_terms(double log_ratio, double advantage, double value, double returns, double old_value,
                             double weight, double clip_coef, bint clip_vloss, double vf_coef, Totals* totals,
                             float* d_value) noexcept nogil:
    """Adds one row's clipped surrogate, value loss, KL and clipping to `totals`; writes
    d loss / d value and returns d loss / d log-prob (both with the row's weight)."""
    cdef double ratio = exp(log_ratio)
    cdef double unclipped = -advantage * ratio
    cdef double clipped = -advantage * (1.0 - clip_coef if ratio < 1.0 - clip_coef else
                                        (1.0 + clip_coef if ratio > 1.0 + clip_coef else ratio))
    # d / d log-prob: the unclipped term's own where it is the max (autograd's
    # half-and-half split of a tie sums to the same)
    cdef double d_log_prob = unclipped * weight if unclipped >= clipped else 0.0
    totals.policy += weight * (unclipped if unclipped >= clipped else clipped)

    cdef double error = value - returns, d_v = value - old_value, clipped_error, squared, clipped_squared
    if clip_vloss and fabs(d_v) > clip_coef:  # within the clip both terms are the error itself
        clipped_error = old_value + (clip_coef if d_v > 0.0 else -clip_coef) - returns
        squared, clipped_squared = error * error, clipped_error * clipped_error
        totals.value += weight * (squared if squared >= clipped_squared else clipped_squared)
        d_v = error if squared >= clipped_squared else 0.0
    else:
        totals.value += weight * error * error
        d_v = error
    d_value[0] = <float>(d_v * vf_coef * weight)
    totals.approx_kl += weight * ((ratio - 1.0) - log_ratio)
    if fabs(ratio - 1.0) > clip_coef:
        totals.clip_fraction += weight
    totals.weight += weight
    return d_log_prob


cdef void write_scalars(Totals* totals, double vf_coef, double ent_coef, float[::1] scalars) noexcept:
    cdef double value_loss = 0.5 * totals.value
    scalars[0] = <float>(totals.policy - ent_coef * totals.entropy + vf_coef * value_loss)
    scalars[1] = <float>totals.policy
    scalars[2] = <float>value_loss
    scalars[3] = <float>totals.entropy
    scalars[4] = <float>totals.approx_kl
    scalars[5] = <float>totals.clip_fraction


cdef int check_rows(Py_ssize_t rows, dict lengths, Py_ssize_t weights, Py_ssize_t scalars) except -1:
    for name, length in lengths.items():
        if length != rows:
            raise ValueError(f"{name} must hold {rows} rows (the head's columns), got {length}")
    if weights not in (0, rows):
        raise ValueError(f"row_weight must hold 0 or {rows} rows, got {weights}")
    if scalars != 6:
        raise ValueError(f"scalars must hold 6 values, got {scalars}")
    return 0


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
    check_rows(rows, {"value": value.shape[0], "action": action.shape[0], "old_log_prob": old_log_prob.shape[0],
                      "advantage": advantage.shape[0], "returns": returns.shape[0],
                      "old_value": old_value.shape[0], "d_value": d_value.shape[0]},
               row_weight.shape[0], scalars.shape[0])
    if d_logits.shape[0] != actions or d_logits.shape[1] != rows:
        raise ValueError(f"d_logits must be [{actions}, {rows}], got [{d_logits.shape[0]}, {d_logits.shape[1]}]")
    if actions < 1 or rows < 1:
        raise ValueError(f"logits must be [actions >= 1, rows >= 1], got [{actions}, {rows}]")
    for i in range(rows):
        if not 0 <= action[i] < actions:
            raise ValueError(f"action[{i}] = {action[i]} is outside [0, {actions})")

    cdef Totals totals = Totals(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    cdef double weight = 1.0 / rows, high, total, lse, log_p, p, entropy, d_log_prob
    cdef bint weighted = row_weight.shape[0] == rows
    cdef double* scaled = <double*>malloc(actions * sizeof(double))  # exp(logit - high), one exp per action
    if scaled == NULL:
        raise MemoryError()
    with nogil:
        for i in range(rows):
            if weighted:
                weight = row_weight[i]
            high = logits[0, i]
            for a in range(1, actions):
                if logits[a, i] > high:
                    high = logits[a, i]
            total = 0.0
            for a in range(actions):
                scaled[a] = exp(logits[a, i] - high)
                total += scaled[a]
            lse = high + log(total)
            entropy = 0.0
            for a in range(actions):
                entropy -= scaled[a] / total * (logits[a, i] - lse)
            totals.entropy += weight * entropy
            d_log_prob = row_terms((<double>logits[action[i], i] - lse) - old_log_prob[i],
                                   (<double>advantage[i] - advantage_mean) * advantage_scale, value[i], returns[i],
                                   old_value[i], weight, clip_coef, clip_vloss, vf_coef, &totals, &d_value[i])
            # d loss / d logits = d_log_prob (onehot - p) + ent_coef w p (log p + H)
            for a in range(actions):
                log_p = logits[a, i] - lse
                p = scaled[a] / total
                d_logits[a, i] = <float>(p * (ent_coef * weight * (log_p + entropy) - d_log_prob)
                                         + (d_log_prob if a == action[i] else 0.0))
    free(scaled)
    write_scalars(&totals, vf_coef, ent_coef, scalars)


def moments(const float[::1] values, const float[::1] row_weight):
    """(mean, std) of `values` with each entry's share of the mean in `row_weight`
    (empty: 1 / n each), in float64, two passes: the minibatch statistics with which
    the losses above normalize advantages (loss.global_mean_std's, on one process)."""
    cdef Py_ssize_t n = values.shape[0], i
    cdef bint weighted = row_weight.shape[0] == n
    cdef double total = 0.0, weight_sum = 0.0, mean, variance = 0.0, deviation
    if row_weight.shape[0] not in (0, n):
        raise ValueError(f"row_weight must hold 0 or {n} values, got {row_weight.shape[0]}")
    if n == 0:
        raise ValueError("values must hold at least one value")
    with nogil:
        for i in range(n):
            total += values[i] * row_weight[i] if weighted else values[i]
            weight_sum += row_weight[i] if weighted else 1.0
        if weight_sum > 0.0:  # else no live entry: nothing to normalize
            mean = total / weight_sum
            for i in range(n):
                deviation = values[i] - mean
                variance += deviation * deviation * (row_weight[i] if weighted else 1.0)
    if weight_sum <= 0.0:
        return 0.0, 0.0
    return mean, sqrt(variance / weight_sum)


def gaussian_loss(const float[:, ::1] mean, const float[::1] log_std, const float[::1] value,
                  const float[:, ::1] action, const float[::1] old_log_prob, const float[::1] advantage,
                  const float[::1] returns, const float[::1] old_value, const float[::1] row_weight,
                  double advantage_mean, double advantage_scale, double clip_coef, bint clip_vloss, double vf_coef,
                  double ent_coef, float[:, ::1] d_mean, float[::1] d_log_std, float[::1] d_value,
                  float[::1] scalars):
    """A diagonal Gaussian with a state-independent log std, as categorical_loss: mean
    [dims, rows] (transposed), log_std [dims], action [rows, dims]. Writes d loss / d mean
    ([dims, rows]), d loss / d log_std ([dims]), d loss / d value and the scalars.

    log p(a) = sum_k -(a_k - mean_k)^2 / (2 sigma_k^2) - log sigma_k - log(2 pi) / 2, so
    d log p / d mean_k = z_k / sigma_k and d log p / d log sigma_k = z_k^2 - 1 (z_k =
    (a_k - mean_k) / sigma_k); the entropy, sum_k log sigma_k + (1 + log(2 pi)) / 2, is
    the same for every row."""
    cdef Py_ssize_t dims = mean.shape[0], rows = mean.shape[1], i, k
    check_rows(rows, {"value": value.shape[0], "action": action.shape[0], "old_log_prob": old_log_prob.shape[0],
                      "advantage": advantage.shape[0], "returns": returns.shape[0],
                      "old_value": old_value.shape[0], "d_value": d_value.shape[0]},
               row_weight.shape[0], scalars.shape[0])
    if dims < 1 or rows < 1:
        raise ValueError(f"mean must be [dims >= 1, rows >= 1], got [{dims}, {rows}]")
    for name, shape, expected in (("log_std", [log_std.shape[0]], [dims]),
                                  ("d_log_std", [d_log_std.shape[0]], [dims]),
                                  ("action", [action.shape[0], action.shape[1]], [rows, dims]),
                                  ("d_mean", [d_mean.shape[0], d_mean.shape[1]], [dims, rows])):
        if shape != expected:
            raise ValueError(f"{name} must be {expected}, got {shape}")

    cdef Totals totals = Totals(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    cdef double weight = 1.0 / rows, log_p, d_log_prob, entropy = dims * 0.5 * (1.0 + log(2.0 * M_PI))
    cdef double normalizer = -dims * 0.5 * log(2.0 * M_PI)
    cdef bint weighted = row_weight.shape[0] == rows
    cdef double* inverse_std = <double*>malloc(3 * dims * sizeof(double))
    if inverse_std == NULL:
        raise MemoryError()
    cdef double* d_log_std_sum = inverse_std + dims
    cdef double* z = inverse_std + 2 * dims  # this row's (a_k - mean_k) / sigma_k
    for k in range(dims):
        entropy += log_std[k]
        normalizer -= log_std[k]
        inverse_std[k] = exp(-<double>log_std[k])
        d_log_std_sum[k] = 0.0
    with nogil:
        for i in range(rows):
            if weighted:
                weight = row_weight[i]
            log_p = normalizer
            for k in range(dims):
                z[k] = (<double>action[i, k] - mean[k, i]) * inverse_std[k]
                log_p -= 0.5 * z[k] * z[k]
            totals.entropy += weight * entropy
            d_log_prob = row_terms(log_p - old_log_prob[i], (<double>advantage[i] - advantage_mean) * advantage_scale,
                                   value[i], returns[i], old_value[i], weight, clip_coef, clip_vloss, vf_coef,
                                   &totals, &d_value[i])
            for k in range(dims):
                d_mean[k, i] = <float>(d_log_prob * z[k] * inverse_std[k])
                d_log_std_sum[k] += d_log_prob * (z[k] * z[k] - 1.0)
    for k in range(dims):  # the entropy bonus: d H / d log sigma_k = 1 in every row
        d_log_std[k] = <float>(d_log_std_sum[k] - ent_coef * totals.weight)
    free(inverse_std)
    write_scalars(&totals, vf_coef, ent_coef, scalars)
