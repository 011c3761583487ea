/* Tic-tac-toe on a 3x3 board, for fast tests of search code. Action = cell index
 * row * 3 + col; player 0 (X) moves first; three in a row wins, a full board draws. */
#ifndef PUFFERCORE_GAMES_TICTACTOE_H
#define PUFFERCORE_GAMES_TICTACTOE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "puffercore/game.h"

#define TTT_CELLS 9
#define TTT_NO_WINNER (-1)

typedef struct TicTacToe {
    int8_t cells[TTT_CELLS]; /* 0 empty, 1 + seat of the owner */
    int8_t player;
    int8_t winner;
    int8_t moves;
} TicTacToe;

static inline int ttt_is_over(const TicTacToe* t) { return t->winner != TTT_NO_WINNER || t->moves == TTT_CELLS; }

static inline int ttt_completes_line(const TicTacToe* t, int cell) {
    static const int8_t lines[8][3] = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {0, 3, 6},
                                       {1, 4, 7}, {2, 5, 8}, {0, 4, 8}, {2, 4, 6}};
    int owner = t->cells[cell];
    for (int l = 0; l < 8; l++) {
        const int8_t* line = lines[l];
        if (line[0] != cell && line[1] != cell && line[2] != cell) continue;
        if (t->cells[line[0]] == owner && t->cells[line[1]] == owner && t->cells[line[2]] == owner) return 1;
    }
    return 0;
}

static void ttt_game_init(void* state, uint64_t seed, int32_t num_players) {
    (void)seed; /* no chance events */
    (void)num_players;
    TicTacToe* t = (TicTacToe*)state;
    memset(t, 0, sizeof(*t));
    t->winner = TTT_NO_WINNER;
}

static void ttt_game_legal_mask(const void* state, uint8_t* out) {
    const TicTacToe* t = (const TicTacToe*)state;
    int over = ttt_is_over(t);
    for (int cell = 0; cell < TTT_CELLS; cell++) out[cell] = !over && t->cells[cell] == 0;
}

static void ttt_game_apply(void* state, int32_t action) {
    TicTacToe* t = (TicTacToe*)state;
    t->cells[action] = (int8_t)(1 + t->player);
    t->moves++;
    if (ttt_completes_line(t, action)) t->winner = t->player;
    t->player ^= 1;
}

static int32_t ttt_game_is_terminal(const void* state) { return ttt_is_over((const TicTacToe*)state); }

static void ttt_game_returns(const void* state, float* out) {
    pc_game_win_loss_returns(((const TicTacToe*)state)->winner, out);
}

static int32_t ttt_game_current_player(const void* state) { return ((const TicTacToe*)state)->player; }

/* Planes [2, 3, 3]: the observer's marks, then the opponent's. */
static void ttt_game_observe(const void* state, int32_t player, float* out) {
    const TicTacToe* t = (const TicTacToe*)state;
    for (int cell = 0; cell < TTT_CELLS; cell++) {
        out[cell] = t->cells[cell] == 1 + player;
        out[TTT_CELLS + cell] = t->cells[cell] != 0 && t->cells[cell] != 1 + player;
    }
}

static int32_t ttt_game_render(const void* state, char* out, int32_t capacity) {
    const TicTacToe* t = (const TicTacToe*)state;
    char text[3 * 6 + 1];
    int at = 0;
    for (int cell = 0; cell < TTT_CELLS; cell++) {
        text[at++] = ".XO"[t->cells[cell]];
        text[at++] = cell % 3 == 2 ? '\n' : ' ';
    }
    text[at] = '\0';
    return snprintf(out, (size_t)capacity, "%s", text);
}

static const PcGameSpec TICTACTOE_GAME = {
    .abi_version = PC_GAME_ABI_VERSION,
    .name = "tictactoe",
    .state_size = sizeof(TicTacToe),
    .num_actions = TTT_CELLS,
    .obs_size = 2 * TTT_CELLS,
    .obs_rank = 3,
    .obs_shape = {2, 3, 3},
    .min_players = 2,
    .max_players = 2,
    .max_moves = TTT_CELLS,
    .rng_offset = -1,
    .init = ttt_game_init,
    .legal_mask = ttt_game_legal_mask,
    .apply = ttt_game_apply,
    .is_terminal = ttt_game_is_terminal,
    .returns = ttt_game_returns,
    .current_player = ttt_game_current_player,
    .num_players = pc_game_two_players,
    .observe = ttt_game_observe,
    .render = ttt_game_render,
};

#endif
