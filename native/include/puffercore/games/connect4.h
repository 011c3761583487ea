/* Connect Four: 7 columns x 6 rows, two players drop pieces; four in a row (horizontal,
 * vertical or diagonal) wins, a full board without one is a draw.
 *
 * The c4_* rule functions work on their own (an RL env can reuse them); the c4_game_*
 * wrappers adapt them to the game ABI in puffercore/game.h. Row 0 is the bottom row;
 * the action is the column. Player 0 moves first. */
#ifndef PUFFERCORE_GAMES_CONNECT4_H
#define PUFFERCORE_GAMES_CONNECT4_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "puffercore/game.h"

#define C4_ROWS 6
#define C4_COLS 7
#define C4_NO_WINNER (-1)

typedef struct Connect4 {
    int8_t board[C4_ROWS][C4_COLS]; /* 0 empty, 1 + seat of the piece's owner */
    int8_t heights[C4_COLS];        /* pieces in each column */
    int8_t player;                  /* seat to move */
    int8_t winner;                  /* seat, or C4_NO_WINNER */
    int8_t moves;
} Connect4;

static inline void c4_reset(Connect4* c4) {
    memset(c4, 0, sizeof(*c4));
    c4->winner = C4_NO_WINNER;
}

static inline int c4_column_open(const Connect4* c4, int col) {
    return col >= 0 && col < C4_COLS && c4->heights[col] < C4_ROWS;
}

static inline int c4_board_full(const Connect4* c4) { return c4->moves == C4_ROWS * C4_COLS; }

static inline int c4_is_over(const Connect4* c4) {
    return c4->winner != C4_NO_WINNER || c4_board_full(c4);
}

static inline void c4_legal_mask(const Connect4* c4, uint8_t* out) {
    int over = c4_is_over(c4);
    for (int col = 0; col < C4_COLS; col++) out[col] = !over && c4_column_open(c4, col);
}

/* Pieces of the same owner as (row, col) in a line through it along (drow, dcol),
 * the piece itself included. */
static inline int c4_line_length(const Connect4* c4, int row, int col, int drow, int dcol) {
    int owner = c4->board[row][col];
    int length = 1;
    for (int sign = -1; sign <= 1; sign += 2) {
        int r = row + sign * drow, c = col + sign * dcol;
        while (r >= 0 && r < C4_ROWS && c >= 0 && c < C4_COLS && c4->board[r][c] == owner) {
            length++;
            r += sign * drow;
            c += sign * dcol;
        }
    }
    return length;
}

/* Does the piece at (row, col) complete four in a row? Horizontal, vertical, both diagonals. */
static inline int c4_wins_at(const Connect4* c4, int row, int col) {
    static const int8_t directions[4][2] = {{0, 1}, {1, 0}, {1, 1}, {1, -1}};
    for (int d = 0; d < 4; d++)
        if (c4_line_length(c4, row, col, directions[d][0], directions[d][1]) >= 4) return 1;
    return 0;
}

/* Drop the mover's piece into an open column; returns the row it landed in. */
static inline int c4_drop(Connect4* c4, int col) {
    int row = c4->heights[col]++;
    c4->board[row][col] = (int8_t)(1 + c4->player);
    c4->moves++;
    return row;
}

/* One move: drop, record a win, pass the turn. The column must be open and the game live. */
static inline void c4_play(Connect4* c4, int col) {
    int row = c4_drop(c4, col);
    if (c4_wins_at(c4, row, col)) c4->winner = c4->player;
    c4->player ^= 1;
}

/* ---- game ABI ------------------------------------------------------------------------ */

static void c4_game_init(void* state, uint64_t seed, int32_t num_players) {
    (void)seed; /* no chance events */
    (void)num_players;
    c4_reset((Connect4*)state);
}

static void c4_game_legal_mask(const void* state, uint8_t* out) { c4_legal_mask((const Connect4*)state, out); }

static void c4_game_apply(void* state, int32_t action) { c4_play((Connect4*)state, action); }

static int32_t c4_game_is_terminal(const void* state) { return c4_is_over((const Connect4*)state); }

static void c4_game_returns(const void* state, float* out) {
    pc_game_win_loss_returns(((const Connect4*)state)->winner, out);
}

static int32_t c4_game_current_player(const void* state) { return ((const Connect4*)state)->player; }

/* Planes [2, rows, cols]: the observer's pieces, then the opponent's. */
static void c4_game_observe(const void* state, int32_t player, float* out) {
    const Connect4* c4 = (const Connect4*)state;
    const int plane = C4_ROWS * C4_COLS;
    for (int row = 0; row < C4_ROWS; row++)
        for (int col = 0; col < C4_COLS; col++) {
            int cell = c4->board[row][col];
            int at = row * C4_COLS + col;
            out[at] = cell == 1 + player;
            out[plane + at] = cell != 0 && cell != 1 + player;
        }
}

/* Top row first, like the physical board; X is seat 0, O seat 1. */
static int32_t c4_game_render(const void* state, char* out, int32_t capacity) {
    const Connect4* c4 = (const Connect4*)state;
    char text[(C4_COLS * 2 + 1) * (C4_ROWS + 1) + 1];
    int at = 0;
    for (int row = C4_ROWS - 1; row >= 0; row--) {
        for (int col = 0; col < C4_COLS; col++) {
            text[at++] = ".XO"[c4->board[row][col]];
            text[at++] = col + 1 < C4_COLS ? ' ' : '\n';
        }
    }
    for (int col = 0; col < C4_COLS; col++) {
        text[at++] = (char)('0' + col);
        text[at++] = col + 1 < C4_COLS ? ' ' : '\n';
    }
    text[at] = '\0';
    return snprintf(out, (size_t)capacity, "%s", text);
}

static const PcGameSpec CONNECT4_GAME = {
    .abi_version = PC_GAME_ABI_VERSION,
    .name = "connect4",
    .state_size = sizeof(Connect4),
    .num_actions = C4_COLS,
    .obs_size = 2 * C4_ROWS * C4_COLS,
    .obs_rank = 3,
    .obs_shape = {2, C4_ROWS, C4_COLS},
    .min_players = 2,
    .max_players = 2,
    .max_moves = C4_ROWS * C4_COLS,
    .rng_offset = -1,
    .init = c4_game_init,
    .legal_mask = c4_game_legal_mask,
    .apply = c4_game_apply,
    .is_terminal = c4_game_is_terminal,
    .returns = c4_game_returns,
    .current_player = c4_game_current_player,
    .num_players = pc_game_two_players,
    .observe = c4_game_observe,
    .render = c4_game_render,
};

#endif
