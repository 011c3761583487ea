/* Connect4 as a single-agent RL env: the agent plays one colour against an opponent
 * built into the env, which replies inside the same step. The rules are the game's
 * (puffercore/games/connect4.h); this header adds the opponent, the observation and
 * the episode bookkeeping.
 *
 * Seats. Seat 0 moves first (X). `agent_first` chooses the agent's seat per episode:
 * always first, always second, or a coin flip from the env's RNG. When the opponent
 * moves first, its opening move is already on the board in the episode's first
 * observation.
 *
 * Opponents (their draws come from the env's RNG):
 *   C4ENV_RANDOM     a uniformly random open column;
 *   C4ENV_HEURISTIC  the first non-empty choice of: a column that wins at once; a
 *                    column the agent would win in next (a block); a column that does
 *                    not let the agent win on top of the new piece; any open column;
 *                    uniformly at random within that choice.
 *
 * Action: the agent's column (int32, 0..6). A full column is an illegal move. The
 * binding rejects it before stepping unless configured to let it through; one that
 * reaches `step` ends the episode as a loss (reward -1, counted in "illegal_move_rate"),
 * so no input can write outside the board.
 *
 * Reward +1 when the agent wins, -1 when it loses, 0 for a draw and for every move that
 * does not end the game. Games always end (42 moves at most): terminal, never truncated.
 *
 * Observation, float32 [C4ENV_OBS_SIZE], the flat row of the Dict space
 * {"action_mask": [7], "board": [2, 6, 7]} (keys in sorted order, as gymnasium lays
 * them out): the agent's legal columns (1 = open), then the board from the agent's
 * side, the game's own encoding (c4_game_observe): plane 0 the agent's pieces, plane 1
 * the opponent's, row 0 the bottom row. After a win or a full board (the final
 * observation) the mask is all zeros. */
#ifndef PUFFERCORE_OCEAN_CONNECT4_H
#define PUFFERCORE_OCEAN_CONNECT4_H

#include "puffercore/env.h"
#include "puffercore/games/connect4.h"

#define C4ENV_MASK_OFFSET 0
#define C4ENV_BOARD_OFFSET C4_COLS
#define C4ENV_OBS_SIZE (C4_COLS + 2 * C4_ROWS * C4_COLS)

enum { C4ENV_RANDOM = 0, C4ENV_HEURISTIC = 1 };
enum { C4ENV_AGENT_FIRST = 0, C4ENV_OPPONENT_FIRST = 1, C4ENV_COIN_FLIP = 2 };

typedef struct Connect4Env {
    PcEnv pc;
    int32_t opponent, first_mover; /* config, written by the binding */
    Connect4 game;
    int32_t agent;                 /* the agent's seat this episode */
    int32_t agent_moves;
} Connect4Env;

#define C4ENV_LOG(X) \
    X(episode_return) X(episode_length) X(win_rate) X(loss_rate) X(draw_rate) X(illegal_move_rate)
PC_LOG(Connect4Log, C4ENV_LOG);

/* The binding's legality check (NativeEnv.reject_illegal_actions): the env's action slot. */
static inline int c4env_action_is_legal(const void* self, const void* actions) {
    return c4_column_open(&((const Connect4Env*)self)->game, ((const int32_t*)actions)[0]);
}

static void c4env_observe(const Connect4Env* env, float* obs) {
    uint8_t legal[C4_COLS];
    c4_legal_mask(&env->game, legal);
    for (int col = 0; col < C4_COLS; col++) obs[C4ENV_MASK_OFFSET + col] = legal[col];
    c4_game_observe(&env->game, env->agent, obs + C4ENV_BOARD_OFFSET);
}

/* Would a piece of `seat` at the empty cell (row, col) make four in a row? The cell is
 * empty again afterwards. */
static int c4env_wins_with(Connect4* game, int row, int col, int seat) {
    game->board[row][col] = (int8_t)(1 + seat);
    int wins = c4_wins_at(game, row, col);
    game->board[row][col] = 0;
    return wins;
}

/* The column the opponent (the seat to move) plays. Candidates are gathered per
 * preference; the first non-empty list is drawn from uniformly. */
static int c4env_opponent_column(Connect4Env* env) {
    Connect4* game = &env->game;
    int me = game->player, agent = me ^ 1;
    int8_t lists[4][C4_COLS]; /* winning, blocking, safe, open */
    int counts[4] = {0, 0, 0, 0};
    enum { WINNING, BLOCKING, SAFE, OPEN };
    for (int col = 0; col < C4_COLS; col++) {
        if (!c4_column_open(game, col)) continue;
        lists[OPEN][counts[OPEN]++] = (int8_t)col;
        if (env->opponent == C4ENV_RANDOM) continue;
        int row = game->heights[col];
        if (c4env_wins_with(game, row, col, me)) lists[WINNING][counts[WINNING]++] = (int8_t)col;
        if (c4env_wins_with(game, row, col, agent)) lists[BLOCKING][counts[BLOCKING]++] = (int8_t)col;
        int gives_win_above = 0;
        if (row + 1 < C4_ROWS) {
            game->board[row][col] = (int8_t)(1 + me);
            gives_win_above = c4env_wins_with(game, row + 1, col, agent);
            game->board[row][col] = 0;
        }
        if (!gives_win_above) lists[SAFE][counts[SAFE]++] = (int8_t)col;
    }
    int choice = WINNING;
    while (counts[choice] == 0) choice++;
    return lists[choice][pc_rng_below(&env->pc.rng, (uint32_t)counts[choice])];
}

static void c4env_reset(void* self) {
    Connect4Env* env = (Connect4Env*)self;
    c4_reset(&env->game);
    env->agent = env->first_mover == C4ENV_COIN_FLIP ? (int32_t)pc_rng_below(&env->pc.rng, 2)
                                                     : (env->first_mover == C4ENV_OPPONENT_FIRST);
    env->agent_moves = 0;
    if (env->agent == 1) c4_play(&env->game, c4env_opponent_column(env));
    c4env_observe(env, (float*)env->pc.observations);
}

static void c4env_step(void* self) {
    Connect4Env* env = (Connect4Env*)self;
    Connect4* game = &env->game;
    int col = ((const int32_t*)env->pc.actions)[0];
    int illegal = !c4_column_open(game, col);
    env->agent_moves += 1;
    if (!illegal) {
        c4_play(game, col);
        if (!c4_is_over(game)) c4_play(game, c4env_opponent_column(env));
    }
    int over = illegal || c4_is_over(game);
    int won = !illegal && game->winner == env->agent;
    int lost = illegal || game->winner == (env->agent ^ 1);
    env->pc.rewards[0] = (float)(won - lost);
    env->pc.terminals[0] = (uint8_t)over;
    env->pc.truncations[0] = 0;
    if (!over) {
        c4env_observe(env, (float*)env->pc.observations);
        return;
    }
    c4env_observe(env, (float*)env->pc.final_observations);
    Connect4Log episode = {.episode_return = env->pc.rewards[0], .episode_length = (float)env->agent_moves,
                           .win_rate = (float)won, .loss_rate = (float)lost, .draw_rate = (float)(!won && !lost),
                           .illegal_move_rate = (float)illegal};
    pc_log_episode(&env->pc, &episode);
    c4env_reset(env);
}

static const PcEnvSpec CONNECT4_SPEC = {
    .abi_version = PC_ABI_VERSION,
    .name = "Connect4",
    .env_size = sizeof(Connect4Env),
    .rows = 1,
    .obs_size = C4ENV_OBS_SIZE,
    .obs_dtype = PC_FLOAT32,
    .obs_bounds = PC_BOX(0.0f, 1.0f), /* the mask and both planes */
    .act_size = 1,
    .act_dtype = PC_INT32,
    .act_bounds = PC_DISCRETE(C4_COLS),
    PC_LOG_SPEC(Connect4Log),
    .reset = c4env_reset,
    .step = c4env_step,
};

#endif
