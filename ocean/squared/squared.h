/* Squared: reach the target. The agent starts at the centre of a size x size grid
 * (size odd) and a target sits on a random border cell. Actions: 0 stay, 1 up, 2 down,
 * 3 left, 4 right; a move off the grid leaves the agent in place. Reaching the target
 * gives reward 1 and ends the episode (terminal); after max_steps without it the
 * episode is truncated with reward 0. Observation: the grid, row-major, 0 empty,
 * 1 agent, 2 target. A learning smoke test: a policy must read the target's position
 * and walk to it. */
#ifndef PUFFERCORE_OCEAN_SQUARED_H
#define PUFFERCORE_OCEAN_SQUARED_H

#include "puffercore/env.h"

enum { SQUARED_EMPTY = 0, SQUARED_AGENT = 1, SQUARED_TARGET = 2 };

typedef struct Squared {
    PcEnv pc;
    int32_t size, max_steps; /* config */
    int32_t agent_row, agent_col, target_row, target_col, tick;
} Squared;

#define SQUARED_LOG(X) X(episode_return) X(episode_length)
PC_LOG(SquaredLog, SQUARED_LOG);

static void squared_observe(const Squared* env, uint8_t* obs) {
    memset(obs, SQUARED_EMPTY, (size_t)(env->size * env->size));
    obs[env->target_row * env->size + env->target_col] = SQUARED_TARGET;
    obs[env->agent_row * env->size + env->agent_col] = SQUARED_AGENT;
}

static void squared_reset(void* self) {
    Squared* env = (Squared*)self;
    int32_t last = env->size - 1;
    env->agent_row = env->agent_col = last / 2;
    /* The border has 4 * last cells: walk it clockwise from the top-left corner. */
    int32_t k = (int32_t)pc_rng_below(&env->pc.rng, (uint32_t)(4 * last));
    int32_t side = k / last, offset = k % last;
    int32_t rows[4] = {0, offset, last, last - offset};
    int32_t cols[4] = {offset, last, last - offset, 0};
    env->target_row = rows[side];
    env->target_col = cols[side];
    env->tick = 0;
    squared_observe(env, (uint8_t*)env->pc.observations);
}

static void squared_step(void* self) {
    Squared* env = (Squared*)self;
    static const int32_t row_moves[5] = {0, -1, 1, 0, 0}, col_moves[5] = {0, 0, 0, -1, 1};
    int32_t action = ((const int32_t*)env->pc.actions)[0];
    int32_t row = env->agent_row + row_moves[action], col = env->agent_col + col_moves[action];
    if (row >= 0 && row < env->size && col >= 0 && col < env->size) {
        env->agent_row = row;
        env->agent_col = col;
    }
    env->tick += 1;
    int reached = env->agent_row == env->target_row && env->agent_col == env->target_col;
    int truncated = !reached && env->tick >= env->max_steps;
    env->pc.rewards[0] = reached ? 1.0f : 0.0f;
    env->pc.terminals[0] = (uint8_t)reached;
    env->pc.truncations[0] = (uint8_t)truncated;
    if (!reached && !truncated) {
        squared_observe(env, (uint8_t*)env->pc.observations);
        return;
    }
    squared_observe(env, (uint8_t*)env->pc.final_observations);
    SquaredLog episode = {.episode_return = env->pc.rewards[0], .episode_length = (float)env->tick};
    pc_log_episode(&env->pc, &episode);
    squared_reset(env);
}

static const PcEnvSpec SQUARED_SPEC = {
    .abi_version = PC_ABI_VERSION,
    .name = "Squared",
    .env_size = sizeof(Squared),
    .rows = 1,
    .obs_size = 0, /* size * size, from the config */
    .obs_dtype = PC_UINT8,
    .obs_bounds = PC_BOX(SQUARED_EMPTY, SQUARED_TARGET),
    .act_size = 1,
    .act_dtype = PC_INT32,
    .act_bounds = PC_DISCRETE(5),
    PC_LOG_SPEC(SquaredLog),
    .reset = squared_reset,
    .step = squared_step,
};

#endif
