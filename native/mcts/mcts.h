/* Tree search over the game ABI (puffercore/game.h).
 *
 * Batched AlphaZero MCTS (mcts.c): B independent searches advance in lock step, one
 * simulation per game per round, so the caller evaluates all B leaves with ONE network
 * call per round (native/mcts/search.pyx is the real caller):
 *
 *     mcts_create(&m, game, B, config, seeds);                // once; mcts_destroy at the end
 *     for each game i: mcts_set_root(&m, i, state_i, simulations_i, noise_i);
 *     while (!mcts_search_done(&m)) {
 *         n = mcts_select_leaves(&m, obs, masks, rows_game, &failed_game);  // descend, fill rows
 *         if (n == MCTS_ERROR_POOL_EXHAUSTED) ...              // game failed_game's tree is full
 *         priors, values = evaluate(obs[:n], masks[:n])        // caller: one batched call
 *         mcts_expand_leaves(&m, n, masks, rows_game, priors, values, value_width);  // expand, back up
 *     }
 *     mcts_visit_counts(&m, i, counts); action = mcts_choose_action(&m, i, temperature);
 *     mcts_advance(&m, i, action);                             // keep the chosen subtree
 *
 * Plain UCT with random rollouts (uct.c): the evaluation baseline, one state at a time.
 */
#ifndef PUFFERCORE_MCTS_H
#define PUFFERCORE_MCTS_H

#include <stdint.h>

#include "puffercore/game.h"

#define MCTS_NO_CHILDREN (-1)
#define MCTS_ERROR_POOL_EXHAUSTED (-1)

/* One node = one edge from its parent (int16 actions: games have <= 32767 actions).
 * Children of a node are contiguous in the pool, in increasing action order. States are not stored: a leaf's state is rebuilt by
 * replaying the path's actions from the root state, which keeps nodes small. */
typedef struct MctsNode {
    int32_t first_child; /* pool index, MCTS_NO_CHILDREN until expanded */
    int16_t num_children;
    int16_t action; /* action from the parent that leads here */
    int32_t visits;
    float prior;
    float value_sum[PC_GAME_MAX_PLAYERS]; /* backed-up returns, by seat */
    /* Solver (MctsConfig.solve): 1 once the node's result under perfect play is known
     * (a terminal, or proven from its children); its mean value_sum is then that exact
     * result and proven_plies the plies to the game's end along the proof. */
    int8_t proven;
    int16_t proven_plies;
} MctsNode;

typedef struct MctsConfig {
    int32_t num_simulations;
    int32_t max_nodes; /* per game */
    float c_base;
    float c_init;
    float dirichlet_alpha;
    float dirichlet_epsilon; /* 0 disables root noise */
    /* 1: PUCT sees Q rescaled to [0, 1] by the smallest and largest mean value backed up
     * in this tree so far (MuZero), for games whose returns are far smaller or larger
     * than the [-1, 1] that c_init assumes (Azul's score margins / 100); unvisited
     * children then take their parent's value instead of 0. */
    int32_t normalize_values;
    /* 1: MCTS-solver in games without chance events (returns in [-1, 1], 1 = a win):
     * terminal results are proven and propagate up (a node is won when one child wins
     * for its mover, decided when every child is proven), a proven node is backed up
     * exactly and never evaluated again, children proven lost are not selected, and a
     * proven root ends its search. */
    int32_t solve;
    /* 1: Gumbel root search (Danihelka et al., ICLR 2022; gumbel.c): the root samples
     * max_considered actions without replacement by Gumbel-top-k over the prior's logits
     * (Gumbel noise only where the search has root noise), spreads the simulations over
     * them by sequential halving, plays the survivor and learns the improved policy
     * softmax(logits + sigma(completed Q)), sigma(q) = (c_visit + max visits) * c_scale
     * * q rescaled to [0, 1]. Below the root, PUCT as without it. */
    int32_t gumbel;
    int32_t max_considered;
    float c_visit;
    float c_scale;
    /* What a terminal leaf is worth (mcts_utility): with lead_returns, each seat's
     * return against the best other seat's (its lead, or its gap to the leader) in place
     * of the returns; then mixed with the win/loss outcome the returns imply,
     * outcome_weight * outcome + (1 - outcome_weight) * that. Both off keep the returns
     * (Azul: score - mean score); outcome_weight 1 counts only who won. Two-player
     * zero-sum games are the same with or without lead_returns, and games whose returns
     * are already a win/loss/draw (Connect4) the same at any weight. */
    int32_t lead_returns;
    float outcome_weight;
} MctsConfig;

/* One game's search. Node 0 is the root; num_nodes == 0 means no tree yet. */
typedef struct MctsTree {
    MctsNode* nodes; /* [max_nodes] */
    int32_t num_nodes;
    uint8_t* root_state;
    uint8_t* leaf_state;
    float* root_priors; /* priors of the root's children with Dirichlet noise mixed in */
    int32_t* path;      /* node indices root..leaf of the current simulation */
    int8_t* movers;     /* the player to move at each path node */
    int32_t path_length;
    int32_t simulations_left;
    int32_t searching;
    int32_t root_priors_pending; /* root_priors are drawn at the first simulation of a search */
    int32_t root_noise;          /* this search mixes Dirichlet noise into them */
    float value_low, value_high; /* bounds of the mean values seen (normalize_values) */
    /* Chance games: 1 while every node's stored children are exactly its legal moves along
     * any path without a chance event (a fresh tree; an advance keeps that unless the real
     * move drew), so selection needs a sample's legal mask only after a draw; 0 after a
     * subtree was kept across a real draw, until the tree is replanted. */
    int32_t consistent;
    /* Gumbel root (config.gumbel): per root child, its Gumbel draw and its visits when
     * this search began; the target visits of each simulation (sequential halving). */
    float* gumbel;
    int32_t* start_visits;
    int32_t* considered_visits;
    int32_t search_simulations;
    float root_value; /* the root's mean value for its mover when this search began */
    float* scratch;   /* [num_actions] */
    PcRng rng; /* Dirichlet noise and temperature sampling */
} MctsTree;

typedef struct Mcts {
    const PcGameSpec* game;
    MctsConfig config;
    int32_t batch_size;
    MctsTree* trees;
    MctsNode* compact; /* [max_nodes] the spare pool mcts_advance compacts into, then swaps with the tree's */
    uint8_t* legal;    /* [num_actions] scratch for mcts_advance */
    int32_t* counts;   /* [num_actions] scratch for mcts_choose_action */
    int16_t* actions;  /* [num_actions] scratch for mcts_add_children */
} Mcts;

/* Returns 0, or -1 when memory runs out (m is then left empty and safe to destroy). */
int mcts_create(Mcts* m, const PcGameSpec* game, int32_t batch_size, MctsConfig config,
                const uint64_t* seeds /* [batch_size], one RNG per game */);
void mcts_destroy(Mcts* m);

/* Start a search of game i from `state` with `simulations` (<= config.num_simulations,
 * which sizes the pools) and root noise if `noise`, keeping the tree when its root is
 * that state. */
void mcts_set_root(Mcts* m, int32_t i, const void* state, int32_t simulations, int32_t noise);
void mcts_drop_tree(Mcts* m, int32_t i);
/* Move game i's root along `action` (legal at the root), keeping that subtree. */
void mcts_advance(Mcts* m, int32_t i, int32_t action);
int mcts_has_tree(const Mcts* m, int32_t i);

int mcts_search_done(const Mcts* m);
/* One simulation per searching game: leaves needing evaluation become rows 0..n-1 of
 * observations [B, obs_size] / legal_masks [B, num_actions], rows_game[row] = game.
 * Terminal leaves are backed up at once. Returns n, or MCTS_ERROR_POOL_EXHAUSTED with
 * *failed_game set (nothing of that game's tree changed). */
int32_t mcts_select_leaves(Mcts* m, float* observations, uint8_t* legal_masks, int32_t* rows_game,
                           int32_t* failed_game);
/* priors [n, num_actions] (>= 0, renormalised over legal actions), values
 * [n, value_width >= num_players] with values[row][k] for seat (leaf mover + k) %
 * num_players: the mover's own value first, like the observation. */
void mcts_expand_leaves(Mcts* m, int32_t n, const uint8_t* legal_masks, const int32_t* rows_game,
                        const float* priors, const float* values, int32_t value_width);

/* The search's policy over num_actions: visit counts normalised (mcts_visit_counts), or
 * with config.gumbel the improved policy; a proven root: its proof moves by visits. */
void mcts_policy(const Mcts* m, int32_t i, float* out);
/* Root visit counts over num_actions (zero for unvisited and illegal actions). With the
 * solver, children proven lost for the mover count zero, and a proven root counts only
 * the children proven to keep its result (every winning move of a won position). */
void mcts_visit_counts(const Mcts* m, int32_t i, int32_t* out);
/* The root's mean backed-up value by seat, out[num_players] (its exact result once proven). */
void mcts_root_value(const Mcts* m, int32_t i, float* out);
/* 1 and the root's exact result by seat in out[num_players] when the solver proved it. */
int mcts_root_proven(const Mcts* m, int32_t i, float* out);
/* Mean backed-up value of each root child by seat, out[num_actions][width] (0 where unvisited). */
void mcts_root_values(const Mcts* m, int32_t i, float* out, int32_t width);
/* temperature 0: most visited (lowest action on ties), or a proven root's proof move (the
 * fastest win, the longest loss); else sample visits^(1/temperature) over
 * mcts_visit_counts. With config.gumbel, the Gumbel search's action whatever the
 * temperature (its noise is the exploration). -1 when the root has not been expanded. */
int32_t mcts_choose_action(Mcts* m, int32_t i, float temperature);

/* Plain UCT with one uniformly random rollout per simulation. Returns the most visited
 * root action, or -1 when memory runs out; visits_out[num_actions] may be NULL. */
int32_t uct_search(const PcGameSpec* game, const void* state, int32_t simulations, float uct_c,
                   uint64_t seed, int32_t* visits_out);

/* A proven value at or above this is a win for that player (returns lie in [-1, 1]). */
#define MCTS_WIN 0.9999f

static inline float mcts_mean_value(const MctsNode* node, int32_t seat) {
    return node->value_sum[seat] / (float)node->visits;
}

/* The solver (solver.c). */
int mcts_solving(const Mcts* m);
int mcts_proven_lost(const MctsNode* node, int32_t seat);
void mcts_prove(MctsNode* node, const float* values, int32_t num_players, int32_t plies);
int32_t mcts_proof_child(const MctsNode* nodes, const MctsNode* node, int32_t mover);
void mcts_prove_path(MctsTree* t, int32_t num_players);

/* The Gumbel root (gumbel.c): set up a search's draws and schedule at its first
 * simulation; the root child (pool index) a simulation descends to; the improved policy;
 * the action to play. */
void mcts_gumbel_begin(const Mcts* m, MctsTree* t, int32_t mover);
int32_t mcts_gumbel_select(const Mcts* m, MctsTree* t, int32_t mover);
void mcts_gumbel_policy(const Mcts* m, const MctsTree* t, int32_t mover, float* out);
int32_t mcts_gumbel_action(const Mcts* m, MctsTree* t, int32_t mover);

/* out[num_players] = outcome_weight * outcome + (1 - outcome_weight) * base, base the
 * returns, or with lead_returns (returns[p] - the highest other return) / 2; the outcome
 * is zero-sum in [-1, 1]: the k seats sharing the highest return get (n / k - 1) / (n - 1)
 * each, the others -1 / (n - 1) (2 players: +1 / -1, a tie 0). All stay in [-1, 1]. */
void mcts_utility(const float* returns, int32_t num_players, int32_t lead_returns, float outcome_weight,
                  float* out);

/* Shared by both searches. */
void mcts_resample_chance(const PcGameSpec* game, void* state, PcRng* source);
const uint8_t* mcts_available(const PcGameSpec* game, const void* state, uint8_t* scratch, int* sample_ended);
int32_t mcts_add_children(MctsNode* nodes, int32_t at, const uint8_t* legal_mask, int32_t num_actions,
                          const float* priors, int16_t* scratch /* [num_actions] */);
void mcts_backup(MctsNode* nodes, const int32_t* path, int32_t path_length, const float* values,
                 int32_t num_players);
int32_t mcts_count_legal(const uint8_t* legal_mask, int32_t num_actions);

#endif
