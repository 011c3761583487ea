/* Gumbel root search (Danihelka et al., "Policy improvement by planning with Gumbel",
 * ICLR 2022) for the batched MCTS; the contract is MctsConfig.gumbel in mcts.h.
 *
 * At a search's first simulation the root draws a Gumbel variable g(a) per child (zero
 * without root noise) and lays out its schedule: the target visit count of each
 * simulation under sequential halving over the max_considered best of g + logits. A
 * simulation descends to the child whose visits in this search equal its target and
 * whose g + logits + sigma(q) is highest; each halving keeps the better half by that
 * score. Visits from a reused subtree count in Q, not in the schedule. */
#include "mcts.h"

#include <math.h>
#include <string.h>

static float draw_gumbel(PcRng* rng) {
    float u = fminf(fmaxf(pc_rng_float(rng), 1e-7f), 1.0f - 1e-7f);
    return -logf(-logf(u));
}

static float logit(const MctsNode* child) { return logf(fmaxf(child->prior, 1e-30f)); }

/* The target visits of each of `simulations` simulations: `considered` actions visited in
 * rounds, the better half kept after each of the ceil(log2(considered)) phases. */
static void considered_schedule(int32_t considered, int32_t simulations, int32_t* out) {
    if (considered <= 1) {
        for (int32_t k = 0; k < simulations; k++) out[k] = k;
        return;
    }
    int32_t phases = (int32_t)ceil(log2((double)considered));
    int32_t count = 0, level = 0;
    while (count < simulations) {
        int32_t rounds = simulations / (phases * considered);
        for (int32_t round = 0; round < (rounds > 1 ? rounds : 1); round++, level++)
            for (int32_t c = 0; c < considered && count < simulations; c++) out[count++] = level;
        considered = considered / 2 > 2 ? considered / 2 : 2;
    }
}

/* sigma(completed Q) of every root child for `mover`, out[action]: visited children's
 * mean value, unvisited ones the mixed value of the root's estimate and its visited
 * children's prior-weighted Q, rescaled to [0, 1] over the children, times
 * (c_visit + most visits) * c_scale. */
static void transformed_q(const Mcts* m, const MctsTree* t, int32_t mover, float* out) {
    const MctsNode* root = &t->nodes[0];
    const MctsNode* children = &t->nodes[root->first_child];
    double visits = 0.0, visited_prior = 0.0, weighted_q = 0.0;
    int32_t most_visits = 0;
    for (int32_t k = 0; k < root->num_children; k++) {
        if (children[k].visits == 0) continue;
        visits += children[k].visits;
        visited_prior += children[k].prior;
        weighted_q += children[k].prior * mcts_mean_value(&children[k], mover);
        if (children[k].visits > most_visits) most_visits = children[k].visits;
    }
    float mixed = t->root_value;
    if (visited_prior > 0.0) mixed = (float)((t->root_value + visits * weighted_q / visited_prior) / (1.0 + visits));
    float low = INFINITY, high = -INFINITY;
    for (int32_t k = 0; k < root->num_children; k++) {
        float q = children[k].visits > 0 ? mcts_mean_value(&children[k], mover) : mixed;
        out[children[k].action] = q;
        low = fminf(low, q);
        high = fmaxf(high, q);
    }
    float scale = (m->config.c_visit + (float)most_visits) * m->config.c_scale / fmaxf(high - low, 1e-8f);
    for (int32_t k = 0; k < root->num_children; k++)
        out[children[k].action] = (out[children[k].action] - low) * scale;
}

static int excluded(const Mcts* m, const MctsNode* child, int32_t mover) {
    return mcts_solving(m) && mcts_proven_lost(child, mover);
}

void mcts_gumbel_begin(const Mcts* m, MctsTree* t, int32_t mover) {
    const MctsNode* root = &t->nodes[0];
    const MctsNode* children = &t->nodes[root->first_child];
    int32_t candidates = 0;
    for (int32_t k = 0; k < root->num_children; k++) {
        t->gumbel[k] = t->root_noise ? draw_gumbel(&t->rng) : 0.0f;
        t->start_visits[k] = children[k].visits;
        candidates += !excluded(m, &children[k], mover);
    }
    t->root_value = mcts_mean_value(root, mover);
    int32_t considered = candidates < m->config.max_considered ? candidates : m->config.max_considered;
    considered_schedule(considered, t->search_simulations, t->considered_visits);
}

/* The child (pool index) with the best g + logits + sigma(q) among those whose visits in
 * this search equal `target` (-1: none), or with target < 0, among those visited most. */
static int32_t best_scored(const Mcts* m, MctsTree* t, int32_t mover, int32_t target) {
    const MctsNode* root = &t->nodes[0];
    const MctsNode* children = &t->nodes[root->first_child];
    float* sigma = t->scratch;
    transformed_q(m, t, mover, sigma);
    int32_t most = -1;
    for (int32_t k = 0; target < 0 && k < root->num_children; k++)
        if (!excluded(m, &children[k], mover) && children[k].visits - t->start_visits[k] > most)
            most = children[k].visits - t->start_visits[k];
    int32_t wanted = target < 0 ? most : target, best = -1;
    float best_score = -INFINITY;
    for (int32_t k = 0; k < root->num_children; k++) {
        if (excluded(m, &children[k], mover) || children[k].visits - t->start_visits[k] != wanted) continue;
        float score = t->gumbel[k] + logit(&children[k]) + sigma[children[k].action];
        if (best < 0 || score > best_score) {
            best = k;
            best_score = score;
        }
    }
    return best < 0 ? -1 : root->first_child + best;
}

int32_t mcts_gumbel_select(const Mcts* m, MctsTree* t, int32_t mover) {
    int32_t done = t->search_simulations - t->simulations_left - 1; /* this simulation's index */
    int32_t child = best_scored(m, t, mover, t->considered_visits[done]);
    if (child >= 0) return child;
    /* A considered child was proven lost mid-search: its turn goes to the least visited. */
    const MctsNode* root = &t->nodes[0];
    int32_t fewest = -1;
    for (int32_t k = 0; k < root->num_children; k++) {
        const MctsNode* candidate = &t->nodes[root->first_child + k];
        int32_t visits = candidate->visits - t->start_visits[k];
        if (!excluded(m, candidate, mover) && (fewest < 0 || visits < fewest)) fewest = visits;
    }
    return fewest < 0 ? -1 : best_scored(m, t, mover, fewest);
}

int32_t mcts_gumbel_action(const Mcts* m, MctsTree* t, int32_t mover) {
    int32_t child = best_scored(m, t, mover, -1);
    return child < 0 ? -1 : t->nodes[child].action;
}

void mcts_gumbel_policy(const Mcts* m, const MctsTree* t, int32_t mover, float* out) {
    const MctsNode* root = &t->nodes[0];
    const MctsNode* children = &t->nodes[root->first_child];
    memset(out, 0, (size_t)m->game->num_actions * sizeof(float));
    transformed_q(m, t, mover, out);
    float largest = -INFINITY;
    for (int32_t k = 0; k < root->num_children; k++) {
        float* z = &out[children[k].action];
        *z = excluded(m, &children[k], mover) ? -INFINITY : logit(&children[k]) + *z;
        largest = fmaxf(largest, *z);
    }
    double total = 0.0;
    for (int32_t k = 0; k < root->num_children; k++) {
        float* z = &out[children[k].action];
        *z = *z == -INFINITY ? 0.0f : expf(*z - largest);
        total += *z;
    }
    for (int32_t k = 0; k < root->num_children; k++) out[children[k].action] /= (float)total;
}
