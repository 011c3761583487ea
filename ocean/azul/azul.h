/* Azul as a single-agent RL env: the agent plays one seat of a 2-4 player game and the
 * other seats are opponents built into the env, which play their turns inside the same
 * step. The rules are the game's (puffercore/games/azul.h); this header adds the
 * opponents, the observation and the episode bookkeeping.
 *
 * Episodes. Each starts a fresh game whose tile draws are seeded from the env's RNG, and
 * the agent's seat is fixed by the config or drawn from the env's RNG. Opponents seated
 * before the agent move first, so their moves are already made in the first observation.
 * A step plays the agent's move, then every opponent's until it is the agent's turn
 * again or the game is over.
 *
 * Opponents (the random one draws from the env's RNG):
 *   AZULENV_GREEDY  the greedy bot of puffercore/games/azul_greedy.h (deterministic);
 *   AZULENV_RANDOM  a uniformly random legal move.
 *
 * Action: int32 in [0, 300), the game's action index (source, colour, destination). An
 * illegal move is rejected by the binding unless it is configured to let it through;
 * one that reaches `step` ends the episode as a loss with reward -1 (counted in
 * "illegal_move_rate"), so no input can corrupt the game.
 *
 * Reward, terminal only (0 for every step that does not end the game):
 *   AZULENV_SCORE_MARGIN  (agent's score - mean score of all seats) / 100, the game's
 *                         returns (the AlphaZero seed's outcome): zero-sum, in a 2-player
 *                         game +-margin/200;
 *   AZULENV_WIN_LOSS      +1 when the agent is the only winner, 0 when it shares the win
 *                         (equal score and complete rows), -1 otherwise.
 * Every game ends (the engine caps games at AZUL_MAX_MOVES, scores as they stand, which
 * is the engine's game end too): terminal, never truncated.
 *
 * Observation, float32 [AZULENV_OBS_SIZE]: the flat row of the Dict space
 * {"action_mask": [300], "board": [412]}: the agent's legal moves (1 = legal; all zeros
 * in the final observation of a finished game), then azul_observe from the agent's
 * seat (the agent's board first, the others in turn order). */
#ifndef PUFFERCORE_OCEAN_AZUL_H
#define PUFFERCORE_OCEAN_AZUL_H

#include <math.h>

#include "puffercore/env.h"
#include "puffercore/games/azul.h"
#include "puffercore/games/azul_greedy.h"

#define AZULENV_MASK_OFFSET 0
#define AZULENV_BOARD_OFFSET AZUL_NUM_ACTIONS
#define AZULENV_OBS_SIZE (AZUL_NUM_ACTIONS + AZUL_OBS_SIZE)

enum { AZULENV_GREEDY = 0, AZULENV_RANDOM = 1 };
enum { AZULENV_SCORE_MARGIN = 0, AZULENV_WIN_LOSS = 1 };
#define AZULENV_RANDOM_SEAT (-1)

typedef struct AzulEnv {
    PcEnv pc;
    int32_t num_players, opponent, seat, reward; /* config, written by the binding */
    Azul game;
    int32_t agent; /* the agent's seat this episode */
    int32_t agent_moves;
} AzulEnv;

#define AZULENV_LOG(X) X(episode_return) X(episode_length) X(score) X(score_margin) \
    X(win_rate) X(loss_rate) X(draw_rate) X(illegal_move_rate)
PC_LOG(AzulEnvLog, AZULENV_LOG);

/* Whether `action` is a legal move of the player to move. */
static inline int azulenv_is_legal(const Azul* game, int32_t action) {
    if (action < 0 || action >= AZUL_NUM_ACTIONS || azul_is_over(game)) return 0;
    int source = azul_action_source(action), color = azul_action_color(action);
    int destination = azul_action_destination(action);
    if (source != AZUL_CENTRE && source >= game->num_factories) return 0;
    if (azul_source(game, source)[color] == 0) return 0;
    return destination == AZUL_FLOOR || (azul_line_colors(&game->boards[game->player], destination) >> color & 1u);
}

/* The binding's legality check (NativeEnv.reject_illegal_actions): the env's action slot. */
static inline int azulenv_action_is_legal(const void* self, const void* actions) {
    return azulenv_is_legal(&((const AzulEnv*)self)->game, ((const int32_t*)actions)[0]);
}

static void azulenv_observe(const AzulEnv* env, float* obs) {
    uint8_t legal[AZUL_NUM_ACTIONS];
    azul_legal_mask(&env->game, legal);
    for (int a = 0; a < AZUL_NUM_ACTIONS; a++) obs[AZULENV_MASK_OFFSET + a] = legal[a];
    azul_observe(&env->game, env->agent, obs + AZULENV_BOARD_OFFSET);
}

/* Uniform over the legal moves: a uniform (offered source-colour pair, destination)
 * until the destination takes the colour. The floor takes any colour, so at least one
 * draw in 6 succeeds, and a live game always has a pair on offer (a round ends when the
 * table is empty, and a game when a new round has no tile to draw). */
static int32_t azulenv_random_action(AzulEnv* env) {
    const Azul* game = &env->game;
    int8_t offers[AZUL_SOURCES * AZUL_COLORS]; /* source * AZUL_COLORS + colour */
    uint32_t count = 0;
    for (int source = 0; source < AZUL_SOURCES; source++) {
        if (source < AZUL_CENTRE && source >= game->num_factories) continue;
        for (int color = 0; color < AZUL_COLORS; color++)
            if (azul_source(game, source)[color]) offers[count++] = (int8_t)(source * AZUL_COLORS + color);
    }
    const AzulBoard* board = &game->boards[game->player];
    for (;;) {
        uint32_t draw = pc_rng_below(&env->pc.rng, count * AZUL_DESTINATIONS);
        int offer = offers[draw / AZUL_DESTINATIONS], destination = (int)(draw % AZUL_DESTINATIONS);
        if (destination == AZUL_FLOOR || (azul_line_colors(board, destination) >> (offer % AZUL_COLORS) & 1u))
            return offer * AZUL_DESTINATIONS + destination;
    }
}

/* Opponents move until it is the agent's turn or the game is over. */
static void azulenv_play_opponents(AzulEnv* env) {
    Azul* game = &env->game;
    while (!azul_is_over(game) && game->player != env->agent)
        azul_play(game, env->opponent == AZULENV_GREEDY ? azul_greedy_action(game) : azulenv_random_action(env));
}

static void azulenv_reset(void* self) {
    AzulEnv* env = (AzulEnv*)self;
    PcRng* rng = &env->pc.rng;
    env->agent = env->seat == AZULENV_RANDOM_SEAT ? (int32_t)pc_rng_below(rng, (uint32_t)env->num_players) : env->seat;
    uint64_t game_seed = (uint64_t)pc_rng_next(rng) << 32;
    game_seed |= pc_rng_next(rng);
    azul_init(&env->game, game_seed, env->num_players);
    env->agent_moves = 0;
    azulenv_play_opponents(env);
    azulenv_observe(env, (float*)env->pc.observations);
}

static void azulenv_step(void* self) {
    AzulEnv* env = (AzulEnv*)self;
    Azul* game = &env->game;
    int32_t action = ((const int32_t*)env->pc.actions)[0];
    int illegal = !azulenv_is_legal(game, action);
    env->agent_moves += 1;
    if (!illegal) {
        azul_play(game, action);
        azulenv_play_opponents(env);
    }
    int over = illegal || azul_is_over(game);
    env->pc.rewards[0] = 0.0f;
    env->pc.terminals[0] = (uint8_t)over;
    env->pc.truncations[0] = 0;
    if (!over) {
        azulenv_observe(env, (float*)env->pc.observations);
        return;
    }
    int winners = azul_winners(game), me = 1 << env->agent;
    int won = !illegal && winners == me;
    int shared = !illegal && (winners & me) && winners != me;
    int lost = !won && !shared;
    float returns[PC_GAME_MAX_PLAYERS];
    azul_returns(game, returns);
    float reward = env->reward == AZULENV_SCORE_MARGIN ? returns[env->agent] : (float)(won - lost);
    env->pc.rewards[0] = illegal ? -1.0f : reward;
    int best_other = 0;
    for (int p = 0; p < game->num_players; p++)
        if (p != env->agent && game->boards[p].score > best_other) best_other = game->boards[p].score;

    azulenv_observe(env, (float*)env->pc.final_observations);
    int score = game->boards[env->agent].score;
    AzulEnvLog episode = {.episode_return = env->pc.rewards[0], .episode_length = (float)env->agent_moves,
                          .score = (float)score, .score_margin = (float)(score - best_other), .win_rate = (float)won,
                          .loss_rate = (float)lost, .draw_rate = (float)shared, .illegal_move_rate = (float)illegal};
    pc_log_episode(&env->pc, &episode);
    azulenv_reset(env);
}

/* The mask's entries are 0 or 1; board entries are 0 or more (scores above 100 give
 * entries above 1). */
static const float AZULENV_OBS_HIGH[AZULENV_OBS_SIZE] = {
    [AZULENV_MASK_OFFSET ... AZULENV_BOARD_OFFSET - 1] = 1.0f,
    [AZULENV_BOARD_OFFSET ... AZULENV_OBS_SIZE - 1] = INFINITY};

static const PcEnvSpec AZUL_ENV_SPEC = {
    .abi_version = PC_ABI_VERSION,
    .name = "Azul",
    .env_size = sizeof(AzulEnv),
    .rows = 1,
    .obs_size = AZULENV_OBS_SIZE,
    .obs_dtype = PC_FLOAT32,
    .obs_bounds = {.low = 0.0f, .highs = AZULENV_OBS_HIGH},
    .act_size = 1,
    .act_dtype = PC_INT32,
    .act_bounds = PC_DISCRETE(AZUL_NUM_ACTIONS),
    PC_LOG_SPEC(AzulEnvLog),
    .reset = azulenv_reset,
    .step = azulenv_step,
};

#endif
