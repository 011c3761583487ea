/* MCTS-solver with distances (Winands et al. 2008) for the batched search (mcts.h).
 *
 * Deterministic games only (config.solve): terminal leaves are proven, and after each
 * backup the path is walked up while nodes become decided (a child that wins for the
 * node's mover, or every child proven). A proven node's value_sum is reset to its exact result times its
 * visits, so its mean is exact and stays so: a simulation that reaches it backs that
 * result up without an evaluation. */
#include "mcts.h"

int mcts_solving(const Mcts* m) { return m->config.solve && m->game->rng_offset < 0; }

int mcts_proven_lost(const MctsNode* node, int32_t seat) {
    return node->proven && mcts_mean_value(node, seat) <= -MCTS_WIN;
}

/* A visited node's exact result by seat, `plies` from the end. */
void mcts_prove(MctsNode* node, const float* values, int32_t num_players, int32_t plies) {
    node->proven = 1;
    node->proven_plies = (int16_t)plies;
    for (int32_t p = 0; p < num_players; p++) node->value_sum[p] = values[p] * (float)node->visits;
}

/* The child that decides `node` for its mover: a proven win (the fastest), else, once
 * every child is proven, the best for the mover (the longest among losses). -1 while
 * the node is undecided. */
int32_t mcts_proof_child(const MctsNode* nodes, const MctsNode* node, int32_t mover) {
    int32_t best = -1, all_proven = 1;
    for (int32_t k = 0; k < node->num_children; k++) {
        int32_t index = node->first_child + k;
        const MctsNode* child = &nodes[index];
        if (!child->proven) {
            all_proven = 0;
            continue;
        }
        if (best < 0) {
            best = index;
            continue;
        }
        float value = mcts_mean_value(child, mover), best_value = mcts_mean_value(&nodes[best], mover);
        int16_t plies = child->proven_plies, best_plies = nodes[best].proven_plies;
        int better = value > best_value;
        if (value == best_value) better = value < 0.0f ? plies > best_plies : plies < best_plies;
        if (better) best = index;
    }
    if (best < 0) return -1;
    return all_proven || mcts_mean_value(&nodes[best], mover) >= MCTS_WIN ? best : -1;
}

/* After a backup: prove the path's nodes bottom-up while each becomes decided. */
void mcts_prove_path(MctsTree* t, int32_t num_players) {
    for (int32_t d = t->path_length - 2; d >= 0; d--) {
        MctsNode* node = &t->nodes[t->path[d]];
        int32_t child = mcts_proof_child(t->nodes, node, t->movers[d]);
        if (child < 0) return;
        float values[PC_GAME_MAX_PLAYERS];
        for (int32_t p = 0; p < num_players; p++) values[p] = mcts_mean_value(&t->nodes[child], p);
        mcts_prove(node, values, num_players, t->nodes[child].proven_plies + 1);
    }
}

