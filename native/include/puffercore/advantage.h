/* GAE(gamma, lambda) with V-trace-style importance clipping: the math shared by the CPU
 * kernel (C++) and the CUDA kernel. Semantics, for transition t of one rollout row:
 *
 *   next_value_t = 0                  if terminals[t]   (the episode ended: no bootstrap)
 *                = final_values[t]    else if truncations[t] (value of the final obs)
 *                = value_{t+1}        otherwise
 *   continues_t  = 0 if terminals[t] or truncations[t] else 1  (slot t+1 starts a new episode)
 *   rho_t = min(ratio_t, rho_clip),  c_t = min(ratio_t, c_clip)    (ratio_t = 1 without ratios)
 *   delta_t      = rho_t * (reward_t + gamma * next_value_t - value_t)
 *   advantage_t  = delta_t + gamma * lambda * c_t * continues_t * advantage_{t+1}
 *   return_t     = advantage_t + value_t
 *
 * computed backwards from advantage_{T} = 0. With ratios of 1 and clips >= 1 this is
 * plain GAE. */
#ifndef PUFFERCORE_ADVANTAGE_H
#define PUFFERCORE_ADVANTAGE_H

#include <stdint.h>

#ifdef __CUDACC__
#define PC_HOST_DEVICE __host__ __device__
#else
#define PC_HOST_DEVICE
#endif

typedef struct PcAdvantageParams {
    float gamma;
    float lambda;
    float rho_clip;
    float c_clip;
} PcAdvantageParams;

/* Where the backward recursion stands between two segments of one row: the value that
 * follows the segment (the bootstrap value for the last segment) and the advantage of
 * the step after it (0 for the last segment). */
typedef struct PcAdvantageCarry {
    float next_value;
    float advantage;
} PcAdvantageCarry;

typedef struct PcAdvantageInputs {
    const float* values; /* the segment's own values; value_{t+1} of its last step is in the carry */
    const float* rewards;
    const uint8_t* terminals;
    const uint8_t* truncations;
    const float* final_values; /* may be NULL when no step is truncated */
    const float* ratios;       /* may be NULL: ratio 1 */
} PcAdvantageInputs;

/* Step t as advantage_t = delta + decay * advantage_{t+1}. Sets *missing_final_value
 * if step t is truncated while final_values is NULL (it then bootstraps from 0). */
typedef struct PcAdvantageTerms {
    float delta;
    float decay;
} PcAdvantageTerms;

PC_HOST_DEVICE static inline PcAdvantageTerms pc_advantage_terms(
        PcAdvantageInputs in, int64_t t, float following_value,
        PcAdvantageParams params, int* missing_final_value) {
    const float ratio = in.ratios ? in.ratios[t] : 1.0f;
    const float rho = ratio < params.rho_clip ? ratio : params.rho_clip;
    const float c = ratio < params.c_clip ? ratio : params.c_clip;
    float next_value = following_value;
    float decay = params.gamma * params.lambda * c;
    if (in.terminals[t] | in.truncations[t]) {
        decay = 0.0f;
        if (in.terminals[t]) {
            next_value = 0.0f;
        } else {
            *missing_final_value |= in.final_values == 0;
            next_value = in.final_values ? in.final_values[t] : 0.0f;
        }
    }
    PcAdvantageTerms terms;
    terms.delta = rho * (in.rewards[t] + params.gamma * next_value - in.values[t]);
    terms.decay = decay;
    return terms;
}

/* Computes steps [0, length) of one row segment, last step first, updating *carry so the
 * preceding segment can continue from it; a whole row is one segment with
 * carry = {value_T, 0}. Every input at step t is read before the outputs at step t are
 * written, so `returns` may alias `in.values` and `advantages` may alias `in.rewards`.
 * Returns 0, or 1 if a truncation was met while final_values is NULL.
 *
 * Steps go in pairs: advantage_{t-1} is computed from advantage_{t+1} directly,
 *   advantage_{t-1} = (delta_{t-1} + decay_{t-1} delta_t) + decay_{t-1} decay_t advantage_{t+1},
 * so the chain of dependent float operations (a multiply and an add per link) is half as
 * long as the row. On a CPU that chain, not memory, bounds the plain recursion. */
PC_HOST_DEVICE static inline int pc_advantage_segment(
        PcAdvantageInputs in, float* advantages, float* returns, int64_t length,
        PcAdvantageParams params, PcAdvantageCarry* carry) {
    int missing_final_value = 0;
    float following_value = carry->next_value;
    float advantage = carry->advantage;
    int64_t t = length - 1;
    if (length % 2) {
        const float value = in.values[t];
        const PcAdvantageTerms terms =
            pc_advantage_terms(in, t, following_value, params, &missing_final_value);
        advantage = terms.delta + terms.decay * advantage;
        advantages[t] = advantage;
        returns[t] = advantage + value;
        following_value = value;
        t--;
    }
    for (; t >= 1; t -= 2) {
        const float value = in.values[t];
        const float value_before = in.values[t - 1];
        const PcAdvantageTerms late =
            pc_advantage_terms(in, t, following_value, params, &missing_final_value);
        const PcAdvantageTerms early =
            pc_advantage_terms(in, t - 1, value, params, &missing_final_value);
        const float late_advantage = late.delta + late.decay * advantage;
        advantage = (early.delta + early.decay * late.delta) + (early.decay * late.decay) * advantage;
        advantages[t] = late_advantage;
        returns[t] = late_advantage + value;
        advantages[t - 1] = advantage;
        returns[t - 1] = advantage + value_before;
        following_value = value_before;
    }
    carry->next_value = following_value;
    carry->advantage = advantage;
    return missing_final_value;
}

/* One whole row: values has length + 1 entries, the last is the bootstrap value. */
PC_HOST_DEVICE static inline int pc_advantage_row(
        PcAdvantageInputs in, float* advantages, float* returns, int64_t length,
        PcAdvantageParams params) {
    PcAdvantageCarry carry = {in.values[length], 0.0f};
    return pc_advantage_segment(in, advantages, returns, length, params, &carry);
}

#endif
