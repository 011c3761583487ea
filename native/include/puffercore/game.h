/* puffercore game ABI, version 1: turn-based games for search (MCTS, AlphaZero).
 *
 * A game is one C header: a state struct that is plain data (no pointers, so a clone
 * is a memcpy of spec.state_size bytes), functions over it, and a `PcGameSpec`. No
 * globals. Chance events (dice, tile draws) come from a PcRng kept INSIDE the state, so
 * a cloned state replays the same draws and two games never share a stream. Such a
 * game sets spec.rng_offset to offsetof(State, rng) and draws every hidden outcome
 * from that RNG at the moment it happens (a bag is counts, not a pre-shuffled order):
 * search code then reseeds its copies to sample draws of its own, so it never learns
 * the real future ones. Deterministic games set rng_offset = -1.
 *
 * init must write every byte of the state (memset first): search code compares states
 * with memcmp to recognise a position it already has a tree for.
 *
 * Players are seats 0..num_players-1. `returns` gives one value per seat, in seat
 * order; it is only meaningful once the game is terminal. `observe(state, player, out)`
 * writes the position as seen by `player` (that player's own things first, then the
 * others in turn order), so one network serves every seat.
 *
 * Callers validate before calling: apply gets only actions whose legal_mask entry is 1,
 * on non-terminal states; init gets min_players <= num_players <= max_players.
 */
#ifndef PUFFERCORE_GAME_H
#define PUFFERCORE_GAME_H

#include <stddef.h>
#include <stdint.h>

#include "puffercore/rng.h"

#define PC_GAME_ABI_VERSION 1
#define PC_GAME_MAX_PLAYERS 4
#define PC_GAME_MAX_OBS_RANK 4

typedef struct PcGameSpec {
    int32_t abi_version; /* PC_GAME_ABI_VERSION */
    const char* name;
    size_t state_size;   /* sizeof the state struct */
    int32_t num_actions; /* fixed action space for every player count */
    int32_t obs_size;    /* floats per observation = product of obs_shape[:obs_rank] */
    int32_t obs_rank;
    int32_t obs_shape[PC_GAME_MAX_OBS_RANK];
    int32_t min_players;
    int32_t max_players; /* <= PC_GAME_MAX_PLAYERS */
    int32_t max_moves;   /* no game lasts more actions (search sizes its paths by it) */
    int32_t rng_offset;  /* byte offset of the state's chance PcRng, or -1 without chance */
    void (*init)(void* state, uint64_t seed, int32_t num_players);
    void (*legal_mask)(const void* state, uint8_t* out); /* out[num_actions], 1 = legal */
    void (*apply)(void* state, int32_t action);
    int32_t (*is_terminal)(const void* state);
    void (*returns)(const void* state, float* out); /* out[num_players] */
    int32_t (*current_player)(const void* state);
    int32_t (*num_players)(const void* state);
    void (*observe)(const void* state, int32_t player, float* out); /* out[obs_size] */
    /* Readable board as NUL-terminated text; returns the length it needed (like snprintf). */
    int32_t (*render)(const void* state, char* out, int32_t capacity);
} PcGameSpec;

/* Helpers for two-player win/lose/draw games. */
static inline int32_t pc_game_two_players(const void* state) {
    (void)state;
    return 2;
}

/* +1 for the winner and -1 for the loser; 0 each on a draw or before the end (winner < 0). */
static inline void pc_game_win_loss_returns(int winner, float* out) {
    for (int seat = 0; seat < 2; seat++) out[seat] = winner < 0 ? 0.0f : (winner == seat ? 1.0f : -1.0f);
}

#endif
