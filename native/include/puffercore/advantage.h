/* GAE(gamma, lambda) with V-trace-style importance clipping: the math shared by the CPU
 * kernel (C++) and the CUDA kernel. Semantics, for transition t of one rollout row:
 *
 *   next_value_t = 0                  if terminals[t]   (the episode ended: no bootstrap)
 *                = final_values[t]    else if truncations[t] (value of the final obs)
 *                = value_{t+1}        otherwise
 *   carry_t      = 0 if terminals[t] or truncations[t] else 1  (slot t+1 starts a new episode)
 *   rho_t = min(ratio_t, rho_clip),  c_t = min(ratio_t, c_clip)    (ratio_t = 1 without ratios)
 *   delta_t      = rho_t * (reward_t + gamma * next_value_t - value_t)
 *   advantage_t  = delta_t + gamma * lambda * c_t * carry_t * advantage_{t+1}
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

/* Computes steps [0, length) of one row segment, last step first, updating *carry so the
 * preceding segment can continue from it; a whole row is one segment with
 * carry = {value_T, 0}. `values` holds the segment's own `length` values (value_{t+1}
 * comes from the carry, so the CUDA kernel can stage the row tile by tile). `ratios` and
 * `final_values` may be NULL (ratio 1; no final values). Every input at step t is read
 * before the outputs at step t are written, so `returns` may alias `values` and
 * `advantages` may alias `rewards`. Returns 0, or 1 if a truncation was met while
 * final_values is NULL (that step then bootstraps from 0). */
PC_HOST_DEVICE static inline int pc_advantage_segment(
        const float* values, const float* rewards, const uint8_t* terminals,
        const uint8_t* truncations, const float* final_values, const float* ratios,
        float* advantages, float* returns, int64_t length, PcAdvantageParams params,
        PcAdvantageCarry* carry) {
    const float gamma_lambda = params.gamma * params.lambda;
    float next_value = carry->next_value;
    float advantage = carry->advantage;
    int missing_final_value = 0;
    for (int64_t t = length - 1; t >= 0; t--) {
        const float value = values[t];
        const float reward = rewards[t];
        const float ratio = ratios ? ratios[t] : 1.0f;
        const int terminal = terminals[t] != 0;
        const int truncated = truncations[t] != 0;
        if (terminal) {
            next_value = 0.0f;
        } else if (truncated) {
            missing_final_value |= final_values == 0;
            next_value = final_values ? final_values[t] : 0.0f;
        }
        const float rho = ratio < params.rho_clip ? ratio : params.rho_clip;
        const float c = ratio < params.c_clip ? ratio : params.c_clip;
        const float carried = (terminal || truncated) ? 0.0f : gamma_lambda * c * advantage;
        advantage = rho * (reward + params.gamma * next_value - value) + carried;
        advantages[t] = advantage;
        returns[t] = advantage + value;
        next_value = value;
    }
    carry->next_value = next_value;
    carry->advantage = advantage;
    return missing_final_value;
}

/* One whole row: values has length + 1 entries, the last is the bootstrap value. */
PC_HOST_DEVICE static inline int pc_advantage_row(
        const float* values, const float* rewards, const uint8_t* terminals,
        const uint8_t* truncations, const float* final_values, const float* ratios,
        float* advantages, float* returns, int64_t length, PcAdvantageParams params) {
    PcAdvantageCarry carry = {values[length], 0.0f};
    return pc_advantage_segment(values, rewards, terminals, truncations, final_values,
                                ratios, advantages, returns, length, params, &carry);
}

#endif
