/* Plain MCTS, the evaluation baseline: UCT selection
 *     Q_p(child) + uct_c * sqrt(ln N(s) / N(child)),  unvisited children first (random order),
 * expansion of every legal child when a leaf is reached, and one uniformly random
 * rollout per simulation. Values are vectors by seat and chance games are searched
 * open-loop, as in the AlphaZero search (mcts.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mcts.h"

/* The UCT choice among the children `available` allows (all when NULL); -1 if none. */
static int32_t uct_select_child(const MctsNode* nodes, int32_t node_index, int32_t player, float uct_c,
                                const uint8_t* available, PcRng* rng) {
    const MctsNode* node = &nodes[node_index];
    const MctsNode* children = &nodes[node->first_child];
    float log_visits = logf((float)node->visits);
    int32_t best = -1, unvisited_seen = 0;
    float best_score = -INFINITY;
    for (int32_t k = 0; k < node->num_children; k++) {
        const MctsNode* child = &children[k];
        if (available && !available[child->action]) continue;
        if (child->visits == 0) { /* reservoir sampling: a uniform pick among unvisited */
            if (pc_rng_below(rng, (uint32_t)++unvisited_seen) == 0) best = k;
            continue;
        }
        if (unvisited_seen) continue;
        float score = child->value_sum[player] / (float)child->visits +
                      uct_c * sqrtf(log_visits / (float)child->visits);
        if (best < 0 || score > best_score) {
            best_score = score;
            best = k;
        }
    }
    return best < 0 ? -1 : node->first_child + best;
}

static void random_rollout(const PcGameSpec* game, void* state, uint8_t* mask, PcRng* rng) {
    while (!game->is_terminal(state)) {
        game->legal_mask(state, mask);
        uint32_t pick = pc_rng_below(rng, (uint32_t)mcts_count_legal(mask, game->num_actions));
        int32_t action = 0;
        while (!mask[action] || pick-- > 0) action++;
        game->apply(state, action);
    }
}

/* The search proper, on buffers uct_search allocated: nodes[1 + simulations * num_actions]
 * (each simulation expands at most one node, so the pool cannot overflow), path[max_moves
 * + 2], state, mask[num_actions], actions[num_actions]. */
static int32_t uct_run(const PcGameSpec* game, const void* root_state, int32_t simulations, float uct_c,
                       uint64_t seed, int32_t* visits_out, MctsNode* nodes, int32_t* path, uint8_t* state,
                       uint8_t* mask, int16_t* actions) {
    PcRng rng;
    pc_rng_seed(&rng, seed, 0);
    memset(&nodes[0], 0, sizeof(MctsNode));
    nodes[0].first_child = MCTS_NO_CHILDREN;
    nodes[0].action = -1;
    int32_t num_nodes = 1;
    float returns[PC_GAME_MAX_PLAYERS];
    for (int32_t sim = 0; sim < simulations; sim++) {
        memcpy(state, root_state, game->state_size);
        mcts_resample_chance(game, state, &rng);
        int32_t node = 0, path_length = 0, sample_ended = 0;
        path[path_length++] = 0;
        while (nodes[node].first_child != MCTS_NO_CHILDREN) {
            const uint8_t* available = mcts_available(game, state, mask, &sample_ended);
            if (sample_ended) break;
            int32_t child = uct_select_child(nodes, node, game->current_player(state), uct_c, available, &rng);
            if (child < 0) break; /* this sample allows none of the stored actions: roll out here */
            node = child;
            game->apply(state, nodes[node].action);
            path[path_length++] = node;
        }
        if (!game->is_terminal(state) && nodes[node].first_child == MCTS_NO_CHILDREN) {
            game->legal_mask(state, mask);
            nodes[node].first_child = num_nodes;
            nodes[node].num_children = (int16_t)mcts_add_children(nodes, num_nodes, mask, game->num_actions, NULL, actions);
            num_nodes += nodes[node].num_children;
            node = uct_select_child(nodes, node, game->current_player(state), uct_c, NULL, &rng);
            game->apply(state, nodes[node].action);
            path[path_length++] = node;
        }
        random_rollout(game, state, mask, &rng);
        game->returns(state, returns);
        mcts_backup(nodes, path, path_length, returns, game->num_players(state));
    }
    const MctsNode* children = &nodes[nodes[0].first_child];
    int32_t best = 0;
    for (int32_t k = 1; k < nodes[0].num_children; k++)
        if (children[k].visits > children[best].visits) best = k;
    if (visits_out) {
        memset(visits_out, 0, (size_t)game->num_actions * sizeof(int32_t));
        for (int32_t k = 0; k < nodes[0].num_children; k++) visits_out[children[k].action] = children[k].visits;
    }
    return children[best].action;
}

int32_t uct_search(const PcGameSpec* game, const void* root_state, int32_t simulations, float uct_c,
                   uint64_t seed, int32_t* visits_out) {
    MctsNode* nodes = malloc((1 + (size_t)simulations * (size_t)game->num_actions) * sizeof(MctsNode));
    int32_t* path = malloc(((size_t)game->max_moves + 2) * sizeof(int32_t));
    uint8_t* state = malloc(game->state_size);
    uint8_t* mask = malloc((size_t)game->num_actions);
    int16_t* actions = malloc((size_t)game->num_actions * sizeof(int16_t));
    int32_t action = -1;
    if (nodes && path && state && mask && actions)
        action = uct_run(game, root_state, simulations, uct_c, seed, visits_out, nodes, path, state, mask, actions);
    free(nodes);
    free(path);
    free(state);
    free(mask);
    free(actions);
    return action;
}
