/* Steps every ocean env under AddressSanitizer/UBSan (tests/test_ocean_asan.py builds
 * it). Buffers are separate exact-size heap blocks, so a write past an env's rows is
 * caught. Actions cover the whole valid range. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 (Busy spins on it) */
#include <stdio.h>
#include <stdlib.h>

#include "azul.h"
#include "busy.h"
#include "cartpole.h"
#include "connect4.h"
#include "snake.h"
#include "squared.h"
#include "template.h"

typedef void (*Configure)(void* env);

static void configure_squared(void* env) {
    ((Squared*)env)->size = 7;
    ((Squared*)env)->max_steps = 14;
}
static void configure_template(void* env) { ((Template*)env)->length = 5; }
static void configure_busy(void* env) {
    Busy* busy = (Busy*)env;
    busy->length = 9, busy->min_cost_us = 0.0f, busy->max_cost_us = 2.0f;
}
static void configure_snake(void* env) {
    Snake* snake = (Snake*)env;
    snake->width = 5, snake->height = 4, snake->num_snakes = 6, snake->num_food = 8, snake->vision = 3;
}

static void configure_connect4_heuristic(void* env) {
    ((Connect4Env*)env)->opponent = C4ENV_HEURISTIC, ((Connect4Env*)env)->first_mover = C4ENV_COIN_FLIP;
}
static void configure_connect4_random(void* env) {
    ((Connect4Env*)env)->opponent = C4ENV_RANDOM, ((Connect4Env*)env)->first_mover = C4ENV_OPPONENT_FIRST;
}

static void configure_azul_greedy(void* env) {
    AzulEnv* azul = (AzulEnv*)env;
    azul->num_players = 4, azul->opponent = AZULENV_GREEDY, azul->seat = AZULENV_RANDOM_SEAT;
}
static void configure_azul_random(void* env) {
    AzulEnv* azul = (AzulEnv*)env;
    azul->num_players = 2, azul->opponent = AZULENV_RANDOM, azul->seat = 1, azul->reward = AZULENV_WIN_LOSS;
}

/* A uniformly random action, or with `masked` (the row starts with the env's action
 * mask) mostly a random legal one, so that games run long; every 16th step any action. */
static int32_t draw_action(PcRng* rng, const float* row, int num_actions, int masked, int t) {
    if (!masked || t % 16 == 0) return (int32_t)pc_rng_below(rng, (uint32_t)num_actions);
    int legal = 0;
    for (int a = 0; a < num_actions; a++) legal += row[a] > 0.5f;
    uint32_t pick = pc_rng_below(rng, (uint32_t)(legal ? legal : 1));
    for (int a = 0; a < num_actions; a++)
        if (row[a] > 0.5f && pick-- == 0) return a;
    return 0;
}

static void run(PcEnvSpec spec, Configure configure, int64_t num_envs, int steps, int masked) {
    int num_actions = (int)spec.act_bounds.high + 1; /* discrete specs declare PC_DISCRETE(n): [0, n - 1] */
    size_t rows = (size_t)(num_envs * spec.rows);
    size_t obs_bytes = rows * (size_t)spec.obs_size * pc_dtype_size(spec.obs_dtype);
    void* observations = malloc(obs_bytes);
    void* final_observations = malloc(obs_bytes);
    void* actions = malloc(rows * (size_t)spec.act_size * 4);
    float* rewards = malloc(rows * sizeof(float));
    uint8_t *terminals = malloc(rows), *truncations = malloc(rows), *masks = malloc(rows);
    char* envs = calloc((size_t)num_envs, spec.env_size);
    for (int64_t i = 0; i < num_envs; i++) {
        PcEnv* env = (PcEnv*)pc_env_at(&spec, envs, i);
        if (configure) configure(env);
        pc_env_bind(&spec, env, i, observations, final_observations, actions, rewards, terminals, truncations, masks);
        if (spec.init) spec.init(env);
    }
    pc_reset_range(&spec, envs, 0, num_envs, 42, 0);
    PcRng rng;
    pc_rng_seed(&rng, 7, 0);
    double logs[PC_LOG_SLOTS] = {0};
    for (int t = 0; t < steps; t++) {
        for (size_t a = 0; a < rows * (size_t)spec.act_size; a++) {
            const float* row = (const float*)observations + a / (size_t)spec.act_size * (size_t)spec.obs_size;
            if (spec.act_dtype == PC_INT32) ((int32_t*)actions)[a] = draw_action(&rng, row, num_actions, masked, t);
            else ((float*)actions)[a] = pc_rng_uniform(&rng, -2.0f, 2.0f);
        }
        pc_step_range(&spec, envs, 0, num_envs);
        pc_drain_logs(&spec, envs, 0, num_envs, logs);
    }
    printf("%s: %.0f episodes\n", spec.name, logs[0]);
    for (int64_t i = 0; spec.close && i < num_envs; i++) spec.close(pc_env_at(&spec, envs, i));
    free(envs), free(observations), free(final_observations), free(actions);
    free(rewards), free(terminals), free(truncations), free(masks);
}

int main(void) {
    run(CARTPOLE_SPEC, NULL, 7, 2000, 0);
    run(CARTPOLE_CONTINUOUS_SPEC, NULL, 7, 2000, 0);
    PcEnvSpec squared = SQUARED_SPEC; /* the sizes a binding fills in from the config */
    squared.obs_size = 7 * 7;
    run(squared, configure_squared, 5, 2000, 0);
    run(TEMPLATE_SPEC, configure_template, 5, 500, 0);
    run(BUSY_SPEC, configure_busy, 3, 500, 0);
    PcEnvSpec snake = SNAKE_SPEC;
    snake.env_size = snake_env_size(5, 4, 6, 3), snake.rows = 6, snake.obs_size = 7 * 7;
    run(snake, configure_snake, 3, 3000, 0);
    /* mostly legal moves from the masks, but some random ones: the illegal-move path runs too */
    run(CONNECT4_SPEC, configure_connect4_heuristic, 5, 3000, 1);
    run(CONNECT4_SPEC, configure_connect4_random, 5, 3000, 1);
    run(AZUL_ENV_SPEC, configure_azul_greedy, 3, 3000, 1);
    run(AZUL_ENV_SPEC, configure_azul_random, 3, 3000, 1);
    return 0;
}
