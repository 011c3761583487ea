/* CartPole: gymnasium's CartPole-v1, same constants, Euler integration and episode
 * rules, in float32. Reward 1 on every step, the terminating one included; terminal
 * when |x| > 2.4 or |theta| > 12 degrees; truncated after 500 steps (as gymnasium's
 * TimeLimit, a step may be both); initial state uniform in (-0.05, 0.05).
 *
 * Continuous variant (CARTPOLE_CONTINUOUS_SPEC): the action is one float in [-1, 1]
 * (clipped) and the force is action * 10 N, the convention of the common continuous
 * CartPole ports; everything else is unchanged. */
#ifndef PUFFERCORE_OCEAN_CARTPOLE_H
#define PUFFERCORE_OCEAN_CARTPOLE_H

#include <math.h>

#include "puffercore/env.h"

#define CARTPOLE_GRAVITY 9.8f
#define CARTPOLE_MASSCART 1.0f
#define CARTPOLE_MASSPOLE 0.1f
#define CARTPOLE_TOTAL_MASS (CARTPOLE_MASSCART + CARTPOLE_MASSPOLE)
#define CARTPOLE_INV_TOTAL_MASS (1.0f / CARTPOLE_TOTAL_MASS) /* multiplies: 3 divisions fewer per step */
#define CARTPOLE_LENGTH 0.5f /* half the pole's length */
#define CARTPOLE_POLEMASS_LENGTH (CARTPOLE_MASSPOLE * CARTPOLE_LENGTH)
#define CARTPOLE_FORCE_MAG 10.0f
#define CARTPOLE_TAU 0.02f
#define CARTPOLE_THETA_THRESHOLD (12.0f * 2.0f * 3.14159265358979f / 360.0f)
#define CARTPOLE_X_THRESHOLD 2.4f
#define CARTPOLE_MAX_STEPS 500

typedef struct CartPole {
    PcEnv pc;
    float x, x_dot, theta, theta_dot;
    int tick;
} CartPole;

#define CARTPOLE_LOG(X) X(episode_return) X(episode_length)
PC_LOG(CartPoleLog, CARTPOLE_LOG);

static void cartpole_observe(const CartPole* env, float* obs) {
    obs[0] = env->x;
    obs[1] = env->x_dot;
    obs[2] = env->theta;
    obs[3] = env->theta_dot;
}

static void cartpole_reset(void* self) {
    CartPole* env = (CartPole*)self;
    env->x = pc_rng_uniform(&env->pc.rng, -0.05f, 0.05f);
    env->x_dot = pc_rng_uniform(&env->pc.rng, -0.05f, 0.05f);
    env->theta = pc_rng_uniform(&env->pc.rng, -0.05f, 0.05f);
    env->theta_dot = pc_rng_uniform(&env->pc.rng, -0.05f, 0.05f);
    env->tick = 0;
    cartpole_observe(env, (float*)env->pc.observations);
}

static void cartpole_advance(CartPole* env, float force) {
    float cos_theta = cosf(env->theta), sin_theta = sinf(env->theta);
    float temp = (force + CARTPOLE_POLEMASS_LENGTH * env->theta_dot * env->theta_dot * sin_theta) *
                 CARTPOLE_INV_TOTAL_MASS;
    float theta_acc = (CARTPOLE_GRAVITY * sin_theta - cos_theta * temp) /
                      (CARTPOLE_LENGTH * (4.0f / 3.0f - CARTPOLE_MASSPOLE * cos_theta * cos_theta * CARTPOLE_INV_TOTAL_MASS));
    float x_acc = temp - CARTPOLE_POLEMASS_LENGTH * theta_acc * cos_theta * CARTPOLE_INV_TOTAL_MASS;
    env->x += CARTPOLE_TAU * env->x_dot;
    env->x_dot += CARTPOLE_TAU * x_acc;
    env->theta += CARTPOLE_TAU * env->theta_dot;
    env->theta_dot += CARTPOLE_TAU * theta_acc;
    env->tick += 1;

    int terminal = env->x < -CARTPOLE_X_THRESHOLD || env->x > CARTPOLE_X_THRESHOLD ||
                   env->theta < -CARTPOLE_THETA_THRESHOLD || env->theta > CARTPOLE_THETA_THRESHOLD;
    int truncated = env->tick >= CARTPOLE_MAX_STEPS;
    env->pc.rewards[0] = 1.0f;
    env->pc.terminals[0] = (uint8_t)terminal;
    env->pc.truncations[0] = (uint8_t)truncated;
    if (!terminal && !truncated) {
        cartpole_observe(env, (float*)env->pc.observations);
        return;
    }
    cartpole_observe(env, (float*)env->pc.final_observations);
    /* reward 1 per step: the return is the length */
    CartPoleLog episode = {.episode_return = (float)env->tick, .episode_length = (float)env->tick};
    pc_log_episode(&env->pc, &episode);
    cartpole_reset(env);
}

static void cartpole_step(void* self) {
    CartPole* env = (CartPole*)self;
    int32_t action = ((const int32_t*)env->pc.actions)[0];
    /* 0 -> -10 N, 1 -> +10 N, without a branch that random actions would mispredict */
    cartpole_advance(env, CARTPOLE_FORCE_MAG * (float)(2 * action - 1));
}

static void cartpole_step_continuous(void* self) {
    CartPole* env = (CartPole*)self;
    float action = ((const float*)env->pc.actions)[0];
    cartpole_advance(env, CARTPOLE_FORCE_MAG * fminf(fmaxf(action, -1.0f), 1.0f));
}

/* gymnasium's observation bounds: twice the termination thresholds, velocities unbounded */
#define CARTPOLE_THETA_BOUND ((float)(24.0 * 3.14159265358979323846 / 180.0))
static const float CARTPOLE_OBS_HIGH[4] = {4.8f, INFINITY, CARTPOLE_THETA_BOUND, INFINITY};
static const float CARTPOLE_OBS_LOW[4] = {-4.8f, -INFINITY, -CARTPOLE_THETA_BOUND, -INFINITY};

#define CARTPOLE_SPEC_FIELDS                                                \
    .abi_version = PC_ABI_VERSION,                                          \
    .env_size = sizeof(CartPole),                                           \
    .rows = 1,                                                              \
    .obs_size = 4,                                                          \
    .obs_dtype = PC_FLOAT32,                                                \
    .obs_bounds = {.lows = CARTPOLE_OBS_LOW, .highs = CARTPOLE_OBS_HIGH},   \
    .act_size = 1,                                                          \
    PC_LOG_SPEC(CartPoleLog),                                               \
    .reset = cartpole_reset

static const PcEnvSpec CARTPOLE_SPEC = {
    CARTPOLE_SPEC_FIELDS, .name = "CartPole", .act_dtype = PC_INT32, .act_bounds = PC_DISCRETE(2),
    .step = cartpole_step};
static const PcEnvSpec CARTPOLE_CONTINUOUS_SPEC = {
    CARTPOLE_SPEC_FIELDS, .name = "CartPole (continuous)", .act_dtype = PC_FLOAT32,
    .act_bounds = PC_BOX(-1.0f, 1.0f), .step = cartpole_step_continuous};

#endif
