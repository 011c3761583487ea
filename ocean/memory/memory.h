/* Memory: only an agent that remembers can solve it (the test env of recurrent policies).
 *
 * An episode shows a cue (left or right, one-hot) on its first observation, then `delay`
 * blank observations, the last with a query flag set. The action taken on the query
 * observation earns +1 if it names the cue (0 = left, 1 = right) and -1 otherwise, and
 * terminates the episode; earlier actions earn nothing. The query observation is the
 * same for both cues, so a memoryless policy expects return 0; one that remembers, 1.
 * Observation: float32 [cue_left, cue_right, query]. */
#ifndef MEMORY_H
#define MEMORY_H

#include "puffercore/env.h"

typedef struct Memory {
    PcEnv pc;      /* first member: buffer pointers, RNG, episode log */
    int32_t delay; /* config, written by the binding's _configure */
    int32_t cue, tick;
} Memory;

#define MEMORY_LOG(X) X(episode_return) X(episode_length)
PC_LOG(MemoryLog, MEMORY_LOG);

static void memory_observe(const Memory* env, float* obs) {
    obs[0] = (float)(env->tick == 0 && env->cue == 0);
    obs[1] = (float)(env->tick == 0 && env->cue == 1);
    obs[2] = (float)(env->tick == env->delay);
}

static void memory_reset(void* self) {
    Memory* env = (Memory*)self;
    env->cue = (int32_t)pc_rng_below(&env->pc.rng, 2);
    env->tick = 0;
    memory_observe(env, (float*)env->pc.observations);
}

static void memory_step(void* self) {
    Memory* env = (Memory*)self;
    int32_t action = ((const int32_t*)env->pc.actions)[0];
    env->tick += 1;
    int terminal = env->tick > env->delay;
    env->pc.rewards[0] = terminal ? (action == env->cue ? 1.0f : -1.0f) : 0.0f;
    env->pc.terminals[0] = (uint8_t)terminal;
    env->pc.truncations[0] = 0;
    if (!terminal) {
        memory_observe(env, (float*)env->pc.observations);
        return;
    }
    /* Same-step autoreset: keep the last observation, log the episode, start anew. */
    memory_observe(env, (float*)env->pc.final_observations);
    MemoryLog episode = {.episode_return = env->pc.rewards[0], .episode_length = (float)env->tick};
    pc_log_episode(&env->pc, &episode);
    memory_reset(env);
}

static const PcEnvSpec MEMORY_SPEC = {
    .abi_version = PC_ABI_VERSION,
    .name = "Memory",
    .env_size = sizeof(Memory),
    .rows = 1,
    .obs_size = 3,
    .obs_dtype = PC_FLOAT32,
    .obs_bounds = PC_BOX(0.0f, 1.0f),
    .act_size = 1,
    .act_dtype = PC_INT32,
    .act_bounds = PC_DISCRETE(2),
    PC_LOG_SPEC(MemoryLog),
    .reset = memory_reset,
    .step = memory_step,
};

#endif
