/* Template: the smallest complete puffercore env. Copy this folder, rename Template /
 * template / TEMPLATE, and replace the game. See docs/authoring.md.
 *
 * The game: a corridor of `length` cells. The agent starts on a random cell left of
 * the exit (the last cell) and moves left (action 0) or right (action 1). Reaching the
 * exit gives reward 1 and ends the episode; after 2 * length steps it is truncated.
 * Observation: the agent's position as a fraction of the corridor, one float. */
#ifndef TEMPLATE_H
#define TEMPLATE_H

#include "puffercore/env.h"

typedef struct Template {
    PcEnv pc;       /* first member: buffer pointers, RNG, episode log */
    int32_t length; /* config, written by the binding's _configure */
    int32_t position, tick;
} Template;

/* The episode statistics, named once: PC_LOG makes the struct TemplateLog (a float per
 * name) and the names the spec gives the binding, which reports them in `info`. */
#define TEMPLATE_LOG(X) X(episode_return) X(episode_length)
PC_LOG(TemplateLog, TEMPLATE_LOG);

static void template_observe(const Template* env, float* obs) {
    obs[0] = (float)env->position / (float)(env->length - 1);
}

static void template_reset(void* self) {
    Template* env = (Template*)self;
    env->position = (int32_t)pc_rng_below(&env->pc.rng, (uint32_t)(env->length - 1));
    env->tick = 0;
    template_observe(env, (float*)env->pc.observations);
}

static void template_step(void* self) {
    Template* env = (Template*)self;
    int32_t action = ((const int32_t*)env->pc.actions)[0];
    if (action == 0 && env->position > 0) env->position -= 1;
    if (action == 1) env->position += 1;
    env->tick += 1;

    int terminal = env->position == env->length - 1;
    int truncated = !terminal && env->tick >= 2 * env->length;
    env->pc.rewards[0] = terminal ? 1.0f : 0.0f;
    env->pc.terminals[0] = (uint8_t)terminal;
    env->pc.truncations[0] = (uint8_t)truncated;
    if (!terminal && !truncated) {
        template_observe(env, (float*)env->pc.observations);
        return;
    }
    /* Same-step autoreset: keep the last observation, log the episode, start anew. */
    template_observe(env, (float*)env->pc.final_observations);
    TemplateLog episode = {.episode_return = env->pc.rewards[0], .episode_length = (float)env->tick};
    pc_log_episode(&env->pc, &episode);
    template_reset(env);
}

static const PcEnvSpec TEMPLATE_SPEC = {
    .abi_version = PC_ABI_VERSION,
    .name = "Template",
    .env_size = sizeof(Template),
    .rows = 1,
    .obs_size = 1,
    .obs_dtype = PC_FLOAT32,
    .obs_bounds = PC_BOX(0.0f, 1.0f), /* observation space: Box(0, 1, (obs_size,)) */
    .act_size = 1,
    .act_dtype = PC_INT32,
    .act_bounds = PC_DISCRETE(2),     /* action space: Discrete(2) */
    PC_LOG_SPEC(TemplateLog),
    .reset = template_reset,
    .step = template_step,
};

#endif
