/* Busy: a benchmark env whose steps cost an uneven amount of CPU time, like emulators
 * or physics engines whose frames differ in work. Staggered batching (send/recv) pays
 * off exactly when some envs are slower than others, so benchmarks and tests use this
 * env to show it (bench/compare_throughput.py).
 *
 * Each step spins for a time drawn uniformly from [min_cost_us, max_cost_us] with the
 * env's own RNG, so the costs (not only the results) follow the seed. The game: the
 * observation is [tick / length, the coming step's cost as a fraction of the range];
 * action 1 earns reward 1, action 0 nothing; the episode is truncated after `length`
 * steps. */
#ifndef BUSY_H
#define BUSY_H

#include <time.h>

#include "puffercore/env.h"

typedef struct Busy {
    PcEnv pc;
    int32_t length;                   /* config */
    float min_cost_us, max_cost_us;   /* config */
    int32_t tick;
    float next_cost_us; /* drawn one step ahead, so the observation can show it */
    float episode_return;
} Busy;

#define BUSY_LOG(X) X(episode_return) X(episode_length)
PC_LOG(BusyLog, BUSY_LOG);

static inline int64_t busy_now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* Spin, not sleep: a sleep's wake-up latency is as long as the costs measured here. */
static void busy_spin(float microseconds) {
    int64_t deadline = busy_now_ns() + (int64_t)(microseconds * 1000.0f);
    while (busy_now_ns() < deadline) {
    }
}

static void busy_observe(const Busy* env, float* obs) {
    float range = env->max_cost_us - env->min_cost_us;
    obs[0] = (float)env->tick / (float)env->length;
    obs[1] = range > 0.0f ? (env->next_cost_us - env->min_cost_us) / range : 0.0f;
}

static void busy_draw_cost(Busy* env) {
    env->next_cost_us = pc_rng_uniform(&env->pc.rng, env->min_cost_us, env->max_cost_us);
}

static void busy_reset(void* self) {
    Busy* env = (Busy*)self;
    busy_draw_cost(env);
    env->tick = 0;
    env->episode_return = 0.0f;
    busy_observe(env, (float*)env->pc.observations);
}

static void busy_step(void* self) {
    Busy* env = (Busy*)self;
    busy_spin(env->next_cost_us);
    int32_t action = ((const int32_t*)env->pc.actions)[0];
    env->tick += 1;
    env->pc.rewards[0] = action == 1 ? 1.0f : 0.0f;
    env->episode_return += env->pc.rewards[0];
    int truncated = env->tick >= env->length;
    env->pc.terminals[0] = 0;
    env->pc.truncations[0] = (uint8_t)truncated;
    if (!truncated) {
        busy_draw_cost(env);
        busy_observe(env, (float*)env->pc.observations);
        return;
    }
    busy_observe(env, (float*)env->pc.final_observations);
    BusyLog episode = {.episode_return = env->episode_return, .episode_length = (float)env->tick};
    pc_log_episode(&env->pc, &episode);
    busy_reset(env);
}

static const PcEnvSpec BUSY_SPEC = {
    .abi_version = PC_ABI_VERSION,
    .name = "Busy",
    .env_size = sizeof(Busy),
    .rows = 1,
    .obs_size = 2,
    .obs_dtype = PC_FLOAT32,
    .obs_bounds = PC_BOX(0.0f, 1.0f),
    .act_size = 1,
    .act_dtype = PC_INT32,
    .act_bounds = PC_DISCRETE(2),
    PC_LOG_SPEC(BusyLog),
    .reset = busy_reset,
    .step = busy_step,
};

#endif
