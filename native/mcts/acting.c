/* Reading a searched root: visit counts, values, the search's policy, the move to play
 * (the batched MCTS of mcts.h). */
#include "mcts.h"

#include <math.h>
#include <string.h>

void mcts_visit_counts(const Mcts* m, int32_t i, int32_t* out) {
    const MctsTree* t = &m->trees[i];
    const MctsNode* root = &t->nodes[0];
    memset(out, 0, (size_t)m->game->num_actions * sizeof(int32_t));
    if (t->num_nodes == 0 || root->num_children == 0) return;
    int solve = mcts_solving(m);
    int32_t mover = solve ? m->game->current_player(t->root_state) : 0;
    if (solve && root->proven) { /* the moves proven as good as the root's result */
        float result = mcts_mean_value(root, mover);
        for (int32_t k = 0; k < root->num_children; k++) {
            const MctsNode* child = &t->nodes[root->first_child + k];
            if (child->proven && mcts_mean_value(child, mover) == result)
                out[child->action] = child->visits > 0 ? child->visits : 1;
        }
        return;
    }
    int32_t total = 0, fallback = -1;
    for (int32_t k = 0; k < root->num_children; k++) {
        const MctsNode* child = &t->nodes[root->first_child + k];
        if (solve && mcts_proven_lost(child, mover)) continue;
        out[child->action] = child->visits;
        total += child->visits;
        if (fallback < 0 || child->prior > t->nodes[root->first_child + fallback].prior) fallback = k;
    }
    /* Every visited move was proven lost before the others were tried: the likeliest other. */
    if (total == 0 && fallback >= 0) out[t->nodes[root->first_child + fallback].action] = 1;
}

void mcts_root_value(const Mcts* m, int32_t i, float* out) {
    const MctsTree* t = &m->trees[i];
    int32_t num_players = m->game->num_players(t->root_state);
    for (int32_t p = 0; p < num_players; p++) out[p] = t->nodes[0].visits > 0 ? mcts_mean_value(&t->nodes[0], p) : 0.0f;
}

void mcts_policy(const Mcts* m, int32_t i, float* out) {
    const MctsTree* t = &m->trees[i];
    const MctsNode* root = &t->nodes[0];
    int32_t num_actions = m->game->num_actions;
    memset(out, 0, (size_t)num_actions * sizeof(float));
    if (t->num_nodes == 0 || root->num_children == 0) return;
    if (m->config.gumbel && !(mcts_solving(m) && root->proven)) {
        mcts_gumbel_policy(m, t, m->game->current_player(t->root_state), out);
        return;
    }
    int32_t* counts = m->counts;
    mcts_visit_counts(m, i, counts);
    double total = 0.0;
    for (int32_t a = 0; a < num_actions; a++) total += counts[a];
    for (int32_t a = 0; total > 0.0 && a < num_actions; a++) out[a] = (float)(counts[a] / total);
}

int mcts_root_proven(const Mcts* m, int32_t i, float* out) {
    const MctsTree* t = &m->trees[i];
    if (!mcts_solving(m) || t->num_nodes == 0 || !t->nodes[0].proven) return 0;
    int32_t num_players = m->game->num_players(t->root_state);
    for (int32_t p = 0; p < num_players; p++) out[p] = mcts_mean_value(&t->nodes[0], p);
    return 1;
}

void mcts_root_values(const Mcts* m, int32_t i, float* out, int32_t width) {
    const MctsTree* t = &m->trees[i];
    const MctsNode* root = &t->nodes[0];
    memset(out, 0, (size_t)m->game->num_actions * (size_t)width * sizeof(float));
    if (t->num_nodes == 0) return;
    for (int32_t k = 0; k < root->num_children; k++) {
        const MctsNode* child = &t->nodes[root->first_child + k];
        for (int32_t p = 0; child->visits > 0 && p < width; p++)
            out[(size_t)child->action * (size_t)width + (size_t)p] = child->value_sum[p] / (float)child->visits;
    }
}

int32_t mcts_choose_action(Mcts* m, int32_t i, float temperature) {
    MctsTree* t = &m->trees[i];
    const MctsNode* root = &t->nodes[0];
    if (t->num_nodes == 0 || root->num_children == 0) return -1;
    int32_t mover = m->game->current_player(t->root_state);
    if (mcts_solving(m) && root->proven && (temperature <= 0.0f || m->config.gumbel)) /* fastest win, longest loss */
        return t->nodes[mcts_proof_child(t->nodes, root, mover)].action;
    if (m->config.gumbel) return mcts_gumbel_action(m, t, mover);
    int32_t num_actions = m->game->num_actions, best = -1;
    int32_t* counts = m->counts;
    mcts_visit_counts(m, i, counts);
    for (int32_t a = 0; a < num_actions; a++)
        if (counts[a] > 0 && (best < 0 || counts[a] > counts[best])) best = a;
    if (best < 0) return t->nodes[root->first_child].action; /* nothing visited: the first legal action */
    if (temperature <= 0.0f) return best;
    /* Weights relative to the largest count keep visits^(1/T) finite for small T. */
    double exponent = 1.0 / temperature, total = 0.0;
    for (int32_t a = 0; a < num_actions; a++)
        if (counts[a] > 0) total += pow((double)counts[a] / (double)counts[best], exponent);
    double target = (double)pc_rng_float(&t->rng) * total;
    for (int32_t a = 0; a < num_actions; a++) {
        if (counts[a] == 0) continue;
        double weight = pow((double)counts[a] / (double)counts[best], exponent);
        target -= weight;
        if (target < 0.0 && weight > 0.0) return a;
    }
    return best;
}
