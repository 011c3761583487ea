/* Pig, the dice game, for 2-4 players: a small game with chance events and more than
 * two players, to test search code on both. On your turn, roll (action 0) as often as
 * you like: a 1 loses the turn total and ends your turn, 2-6 adds to it. Hold (action
 * 1, legal once the turn total is positive, so the legal actions depend on the dice)
 * banks the turn total and passes the turn. The first to bank PIG_TARGET points wins
 * (+1; the others share -1). A game also ends after PIG_MAX_MOVES actions, shared
 * between the leaders. Dice come from the state's own RNG. */
#ifndef PUFFERCORE_GAMES_PIG_H
#define PUFFERCORE_GAMES_PIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "puffercore/game.h"

#define PIG_TARGET 20
#define PIG_MAX_MOVES 200
#define PIG_ROLL 0
#define PIG_HOLD 1

typedef struct Pig {
    PcRng rng;
    int32_t scores[PC_GAME_MAX_PLAYERS];
    int32_t turn_total;
    int32_t player;
    int32_t num_players;
    int32_t moves;
} Pig;

static int pig_winner_decided(const Pig* pig) {
    for (int p = 0; p < pig->num_players; p++)
        if (pig->scores[p] >= PIG_TARGET) return 1;
    return 0;
}

static void pig_pass_turn(Pig* pig) {
    pig->turn_total = 0;
    pig->player = (pig->player + 1) % pig->num_players;
}

static void pig_init(void* state, uint64_t seed, int32_t num_players) {
    Pig* pig = (Pig*)state;
    memset(pig, 0, sizeof(*pig));
    pc_rng_seed(&pig->rng, seed, 0);
    pig->num_players = num_players;
}

static int32_t pig_is_terminal(const void* state) {
    const Pig* pig = (const Pig*)state;
    return pig_winner_decided(pig) || pig->moves >= PIG_MAX_MOVES;
}

static void pig_legal_mask(const void* state, uint8_t* out) {
    out[PIG_ROLL] = !pig_is_terminal(state);
    out[PIG_HOLD] = out[PIG_ROLL] && ((const Pig*)state)->turn_total > 0;
}

static void pig_apply(void* state, int32_t action) {
    Pig* pig = (Pig*)state;
    pig->moves++;
    if (action == PIG_HOLD) {
        pig->scores[pig->player] += pig->turn_total;
        if (!pig_winner_decided(pig)) pig_pass_turn(pig);
        return;
    }
    int die = 1 + (int)pc_rng_below(&pig->rng, 6);
    if (die == 1)
        pig_pass_turn(pig);
    else
        pig->turn_total += die;
}

/* Zero-sum: the leaders share +1, the others share -1 (all 0 when everyone leads). */
static void pig_returns(const void* state, float* out) {
    const Pig* pig = (const Pig*)state;
    int32_t best = 0, leaders = 0;
    for (int p = 0; p < pig->num_players; p++) best = pig->scores[p] > best ? pig->scores[p] : best;
    for (int p = 0; p < pig->num_players; p++) leaders += pig->scores[p] == best;
    int32_t others = pig->num_players - leaders;
    for (int p = 0; p < pig->num_players; p++) {
        int leads = pig->scores[p] == best;
        out[p] = !pig_is_terminal(state) || others == 0 ? 0.0f : (leads ? 1.0f / leaders : -1.0f / others);
    }
}

static int32_t pig_current_player(const void* state) { return ((const Pig*)state)->player; }

static int32_t pig_num_players(const void* state) { return ((const Pig*)state)->num_players; }

/* [scores of the observer, then the next seats in turn order (0 for absent seats)] / target,
 * turn total / target, one-hot of the mover's seat relative to the observer. */
static void pig_observe(const void* state, int32_t player, float* out) {
    const Pig* pig = (const Pig*)state;
    memset(out, 0, (2 * PC_GAME_MAX_PLAYERS + 1) * sizeof(float));
    for (int k = 0; k < pig->num_players; k++)
        out[k] = (float)pig->scores[(player + k) % pig->num_players] / PIG_TARGET;
    out[PC_GAME_MAX_PLAYERS] = (float)pig->turn_total / PIG_TARGET;
    out[PC_GAME_MAX_PLAYERS + 1 + (pig->player - player + pig->num_players) % pig->num_players] = 1.0f;
}

static int32_t pig_render(const void* state, char* out, int32_t capacity) {
    const Pig* pig = (const Pig*)state;
    char scores[64];
    int at = 0;
    for (int p = 0; p < pig->num_players; p++)
        at += snprintf(scores + at, sizeof(scores) - (size_t)at, "%s%d", p ? " " : "", pig->scores[p]);
    return snprintf(out, (size_t)capacity, "scores %s | player %d to move, turn total %d\n", scores, pig->player,
                    pig->turn_total);
}

static const PcGameSpec PIG_GAME = {
    .abi_version = PC_GAME_ABI_VERSION,
    .name = "pig",
    .state_size = sizeof(Pig),
    .num_actions = 2,
    .obs_size = 2 * PC_GAME_MAX_PLAYERS + 1,
    .obs_rank = 1,
    .obs_shape = {2 * PC_GAME_MAX_PLAYERS + 1},
    .min_players = 2,
    .max_players = PC_GAME_MAX_PLAYERS,
    .max_moves = PIG_MAX_MOVES,
    .rng_offset = offsetof(Pig, rng),
    .init = pig_init,
    .legal_mask = pig_legal_mask,
    .apply = pig_apply,
    .is_terminal = pig_is_terminal,
    .returns = pig_returns,
    .current_player = pig_current_player,
    .num_players = pig_num_players,
    .observe = pig_observe,
    .render = pig_render,
};

#endif
