/* Snake: num_snakes snakes share a width x height grid with num_food pieces of food;
 * one agent row per snake. Actions: 0 up, 1 down, 2 left, 3 right (absolute).
 *
 * Each tick the snakes move in index order. A snake whose new head leaves the grid or
 * lands on a body (its own included; its own tail, which moves away this tick, is
 * free) dies: reward -1, terminal. Eating food gives reward 1 and grows the snake by
 * one; the food reappears on a random free cell.
 *
 * A dead snake respawns in the same tick as a length-1 snake on a random free cell, so
 * every row always holds a live agent (mask 1) and the row's observation after a
 * death is the new snake's first; final_observations keeps the view at the death.
 * A free cell always exists then: moves and meals never shrink the number of free
 * cells, each death frees at least one, and food is placed only after the respawns.
 * Snakes have no time limit.
 *
 * Observation: the (2 * vision + 1)^2 cells around the head, row-major: 0 empty,
 * 1 food, 2 wall (off the grid), 3 own body, 4 another snake.
 *
 * The grid carries a band of wall cells `vision` wide, so moves and views never check
 * bounds. It and the bodies live in the env's own memory after the struct
 * (snake_env_size), so the binding's one allocation holds everything. */
#ifndef PUFFERCORE_OCEAN_SNAKE_H
#define PUFFERCORE_OCEAN_SNAKE_H

#include "puffercore/env.h"

/* Cell codes, and the observation's: below SNAKE_FIRST_BODY a view shows the cell code. */
enum { SNAKE_EMPTY = 0, SNAKE_FOOD = 1, SNAKE_WALL = 2, SNAKE_FIRST_BODY = 3 }; /* 3 + k: snake k */
enum { SNAKE_SEES_SELF = 3, SNAKE_SEES_OTHER = 4 };

typedef struct SnakeAgent {
    int32_t* body;  /* ring buffer of cell indices, width * height long */
    int32_t tail;   /* slot of the tail in body; the head is length - 1 slots later */
    int32_t length; /* 0 only between a death and the respawn in the same tick */
    float episode_return;
    int32_t episode_length;
} SnakeAgent;

typedef struct Snake {
    PcEnv pc;
    int32_t width, height, num_snakes, num_food, vision; /* config */
    int32_t stride; /* width + 2 * vision: one row of the walled grid */
    int32_t food_count;
    SnakeAgent* agents;
    uint8_t* cells; /* (height + 2 * vision) rows of stride cells */
} Snake;

#define SNAKE_LOG(X) X(episode_return) X(episode_length) X(snake_length)
PC_LOG(SnakeLog, SNAKE_LOG);

static size_t snake_env_size(int32_t width, int32_t height, int32_t num_snakes, int32_t vision) {
    size_t inside = (size_t)width * (size_t)height;
    size_t walled = (size_t)(width + 2 * vision) * (size_t)(height + 2 * vision);
    size_t size = sizeof(Snake) + (size_t)num_snakes * (sizeof(SnakeAgent) + inside * sizeof(int32_t)) + walled;
    return (size + 15) & ~(size_t)15; /* keeps every env of an array 16-byte aligned */
}

static void snake_init(void* self) {
    Snake* env = (Snake*)self;
    env->stride = env->width + 2 * env->vision;
    env->agents = (SnakeAgent*)(env + 1);
    int32_t* bodies = (int32_t*)(env->agents + env->num_snakes);
    size_t inside = (size_t)env->width * (size_t)env->height;
    for (int32_t k = 0; k < env->num_snakes; k++) env->agents[k].body = bodies + (size_t)k * inside;
    env->cells = (uint8_t*)(bodies + (size_t)env->num_snakes * inside);
}

/* Index in cells of the i-th cell inside the walls, row-major. */
static int32_t snake_inside(const Snake* env, int32_t i) {
    return (i / env->width + env->vision) * env->stride + i % env->width + env->vision;
}

static int32_t snake_head(const SnakeAgent* agent, int32_t capacity) {
    return agent->body[(agent->tail + agent->length - 1) % capacity];
}

/* A random empty cell, or -1 when the grid is full: a few random probes, then a scan
 * from a random start so that a crowded grid still finds its last free cells. */
static int32_t snake_free_cell(Snake* env) {
    uint32_t inside = (uint32_t)(env->width * env->height);
    for (int tries = 0; tries < 8; tries++) {
        int32_t cell = snake_inside(env, (int32_t)pc_rng_below(&env->pc.rng, inside));
        if (env->cells[cell] == SNAKE_EMPTY) return cell;
    }
    uint32_t start = pc_rng_below(&env->pc.rng, inside);
    for (uint32_t i = 0; i < inside; i++) {
        int32_t cell = snake_inside(env, (int32_t)((start + i) % inside));
        if (env->cells[cell] == SNAKE_EMPTY) return cell;
    }
    return -1;
}

static void snake_spawn(Snake* env, int32_t k) {
    int32_t cell = snake_free_cell(env);
    if (cell < 0) return; /* unreachable (see the top); the row would stay masked out */
    SnakeAgent* agent = &env->agents[k];
    agent->body[0] = cell;
    agent->tail = 0;
    agent->length = 1;
    agent->episode_return = 0.0f;
    agent->episode_length = 0;
    env->cells[cell] = (uint8_t)(SNAKE_FIRST_BODY + k);
}

static void snake_place_food(Snake* env) {
    while (env->food_count < env->num_food) {
        int32_t cell = snake_free_cell(env);
        if (cell < 0) return;
        env->cells[cell] = SNAKE_FOOD;
        env->food_count += 1;
    }
}

static void snake_observe(const Snake* env, int32_t k, uint8_t* obs) {
    const SnakeAgent* agent = &env->agents[k];
    int32_t side = 2 * env->vision + 1;
    if (agent->length == 0) {
        memset(obs, 0, (size_t)(side * side));
        return;
    }
    const uint8_t own = (uint8_t)(SNAKE_FIRST_BODY + k);
    const uint8_t* corner = env->cells + snake_head(agent, env->width * env->height) - env->vision * (env->stride + 1);
    for (int32_t r = 0; r < side; r++) {
        const uint8_t* row = corner + r * env->stride;
        for (int32_t c = 0; c < side; c++) {
            uint8_t cell = row[c];
            *obs++ = cell < SNAKE_FIRST_BODY ? cell : cell == own ? SNAKE_SEES_SELF : SNAKE_SEES_OTHER;
        }
    }
}

static void snake_die(Snake* env, int32_t k) {
    SnakeAgent* agent = &env->agents[k];
    int32_t capacity = env->width * env->height, side = 2 * env->vision + 1;
    agent->episode_return -= 1.0f;
    env->pc.rewards[k] = -1.0f;
    env->pc.terminals[k] = 1;
    snake_observe(env, k, (uint8_t*)env->pc.final_observations + (size_t)k * side * side);
    SnakeLog episode = {.episode_return = agent->episode_return, .episode_length = (float)agent->episode_length,
                        .snake_length = (float)agent->length};
    pc_log_episode(&env->pc, &episode);
    for (int32_t i = 0; i < agent->length; i++) env->cells[agent->body[(agent->tail + i) % capacity]] = SNAKE_EMPTY;
    agent->length = 0;
}

static void snake_move(Snake* env, int32_t k, int32_t action) {
    const int32_t moves[4] = {-env->stride, env->stride, -1, 1};
    SnakeAgent* agent = &env->agents[k];
    int32_t capacity = env->width * env->height;
    int32_t tail = agent->body[agent->tail];
    int32_t next = snake_head(agent, capacity) + moves[action];
    uint8_t cell = env->cells[next];
    agent->episode_length += 1;
    if (cell == SNAKE_WALL || (cell >= SNAKE_FIRST_BODY && next != tail)) {
        snake_die(env, k);
        return;
    }
    if (cell == SNAKE_FOOD) {
        agent->length += 1;
        agent->episode_return += 1.0f;
        env->pc.rewards[k] = 1.0f;
        env->food_count -= 1;
    } else {
        env->cells[tail] = SNAKE_EMPTY;
        agent->tail = (agent->tail + 1) % capacity;
    }
    agent->body[(agent->tail + agent->length - 1) % capacity] = next;
    env->cells[next] = (uint8_t)(SNAKE_FIRST_BODY + k);
}

static void snake_observe_all(Snake* env) {
    int32_t side = 2 * env->vision + 1;
    for (int32_t k = 0; k < env->num_snakes; k++) {
        snake_observe(env, k, (uint8_t*)env->pc.observations + (size_t)k * side * side);
        env->pc.masks[k] = env->agents[k].length > 0;
    }
}

static void snake_reset(void* self) {
    Snake* env = (Snake*)self;
    memset(env->cells, SNAKE_WALL, (size_t)(env->stride * (env->height + 2 * env->vision)));
    for (int32_t row = 0; row < env->height; row++)
        memset(env->cells + snake_inside(env, row * env->width), SNAKE_EMPTY, (size_t)env->width);
    env->food_count = 0;
    for (int32_t k = 0; k < env->num_snakes; k++) {
        env->agents[k].length = 0;
        snake_spawn(env, k);
    }
    snake_place_food(env);
    snake_observe_all(env);
}

static void snake_step(void* self) {
    Snake* env = (Snake*)self;
    const int32_t* actions = (const int32_t*)env->pc.actions;
    for (int32_t k = 0; k < env->num_snakes; k++) {
        env->pc.rewards[k] = 0.0f;
        env->pc.terminals[k] = 0;
        env->pc.truncations[k] = 0;
        if (env->agents[k].length > 0) snake_move(env, k, actions[k]);
    }
    for (int32_t k = 0; k < env->num_snakes; k++)
        if (env->agents[k].length == 0) snake_spawn(env, k);
    snake_place_food(env);
    snake_observe_all(env);
}

static const PcEnvSpec SNAKE_SPEC = {
    .abi_version = PC_ABI_VERSION,
    .name = "Snake",
    .env_size = 0, /* snake_env_size(width, height, num_snakes, vision) */
    .rows = 0,     /* num_snakes */
    .obs_size = 0, /* (2 * vision + 1)^2 */
    .obs_dtype = PC_UINT8,
    .obs_bounds = PC_BOX(SNAKE_EMPTY, SNAKE_SEES_OTHER),
    .act_size = 1,
    .act_dtype = PC_INT32,
    .act_bounds = PC_DISCRETE(4),
    PC_LOG_SPEC(SnakeLog),
    .init = snake_init,
    .reset = snake_reset,
    .step = snake_step,
};

#endif
