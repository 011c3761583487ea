/* Batched AlphaZero MCTS; the contract is in mcts.h.
 *
 * Selection is PUCT with AlphaZero's growing exploration constant
 *     score = Q_p(child) + c(s) * prior * sqrt(N(s)) / (1 + N(child)),
 *     c(s)  = log((1 + N(s) + c_base) / c_base) + c_init,
 * where p is the player to move at s and Q_p is the child's mean backed-up return for
 * seat p (0 for an unvisited child, as in the AlphaZero pseudocode). Values are vectors
 * by seat, so each node maximises its own mover's value and 2-4 player games work.
 *
 * Chance games are searched open-loop: every simulation replays the path from a copy of
 * the root whose chance RNG is reseeded from the tree's own RNG, so a node stands for an
 * action sequence, its statistics average over sampled draws, and the search never sees
 * the real future draws. Children were created from the legal actions of the sample
 * that expanded the node; selection skips the ones another sample does not allow.

 *
 * The solver (config.solve) is in solver.c, the Gumbel root (config.gumbel) in gumbel.c. */
#include "mcts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static MctsNode empty_root(void) {
    MctsNode root = {.first_child = MCTS_NO_CHILDREN, .num_children = 0, .action = -1};
    return root;
}

int32_t mcts_count_legal(const uint8_t* legal_mask, int32_t num_actions) {
    int32_t count = 0;
    for (int32_t a = 0; a < num_actions; a++) count += legal_mask[a] != 0;
    return count;
}

/* Children for the legal actions at nodes[at..]; priors renormalised over the legal
 * actions (uniform when priors is NULL or puts no mass on them). Returns the count.
 * Branch-free over the mask (an illegal action adds 0 to the mass, and its entry in
 * the list of legal actions is overwritten by the next): legal masks are irregular, and
 * mispredicted branches were most of this function's time. */
int32_t mcts_add_children(MctsNode* nodes, int32_t at, const uint8_t* legal_mask, int32_t num_actions,
                          const float* priors, int16_t* legal /* [num_actions] scratch */) {
    double legal_mass = 0.0;
    int32_t count = 0;
    for (int32_t a = 0; a < num_actions; a++) {
        int is_legal = legal_mask[a] != 0;
        legal_mass += priors ? (double)priors[a] * is_legal : 0.0;
        legal[count] = (int16_t)a;
        count += is_legal;
    }
    int uniform = !(legal_mass > 0.0);
    for (int32_t k = 0; k < count; k++) {
        int32_t a = legal[k];
        MctsNode* child = &nodes[at + k];
        *child = empty_root();
        child->action = (int16_t)a;
        child->prior = uniform ? 1.0f / (float)count : (float)(priors[a] / legal_mass);
    }
    return count;
}

void mcts_backup(MctsNode* nodes, const int32_t* path, int32_t path_length, const float* values,
                 int32_t num_players) {
    for (int32_t d = 0; d < path_length; d++) {
        MctsNode* node = &nodes[path[d]];
        node->visits++;
        for (int32_t p = 0; p < num_players; p++) node->value_sum[p] += values[p];
    }
}

void mcts_utility(const float* returns, int32_t num_players, int32_t lead_returns, float outcome_weight,
                  float* out) {
    /* the two highest returns: a seat's best other is the first, or the second for its holder */
    float best = -INFINITY, second = -INFINITY;
    for (int32_t p = 0; p < num_players; p++) {
        if (returns[p] > best) {
            second = best;
            best = returns[p];
        } else if (returns[p] > second) {
            second = returns[p];
        }
    }
    int32_t winners = 0;
    for (int32_t p = 0; p < num_players; p++) winners += returns[p] == best;
    float others = (float)(num_players > 1 ? num_players - 1 : 1);
    float winner_share = ((float)num_players / (float)winners - 1.0f) / others;
    for (int32_t p = 0; p < num_players; p++) {
        float base = returns[p];
        if (lead_returns && num_players > 1) base = (returns[p] - (returns[p] == best ? second : best)) * 0.5f;
        float outcome = returns[p] == best ? winner_share : -1.0f / others;
        out[p] = outcome_weight * outcome + (1.0f - outcome_weight) * base;
    }
}

/* The state's chance RNG, or NULL in a game without chance. */
static PcRng* chance_rng(const PcGameSpec* game, void* state) {
    return game->rng_offset < 0 ? NULL : (PcRng*)((char*)state + game->rng_offset);
}

/* Chance games: replace the state's RNG with a fresh sample from `source`. */
void mcts_resample_chance(const PcGameSpec* game, void* state, PcRng* source) {
    PcRng* rng = chance_rng(game, state);
    if (!rng) return;
    uint64_t seed = ((uint64_t)pc_rng_next(source) << 32) | pc_rng_next(source);
    pc_rng_seed(rng, seed, pc_rng_next(source));
}

/* The mask selection must respect at an expanded node: NULL in deterministic games (all
 * stored children are legal); in chance games the sample's legal mask written to
 * `scratch`, or NULL with *sample_ended set when this sample's game is already over. */
const uint8_t* mcts_available(const PcGameSpec* game, const void* state, uint8_t* scratch, int* sample_ended) {
    *sample_ended = 0;
    if (game->rng_offset < 0) return NULL;
    if (game->is_terminal(state)) {
        *sample_ended = 1;
        return NULL;
    }
    game->legal_mask(state, scratch);
    return scratch;
}

/* ---- random numbers for root noise ----------------------------------------------------- */

static float sample_normal(PcRng* rng) {
    float u1 = 1.0f - pc_rng_float(rng); /* (0, 1]: log stays finite */
    float u2 = pc_rng_float(rng);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

/* Marsaglia & Tsang (2000); alpha < 1 through Gamma(alpha + 1) * U^(1/alpha). */
static float sample_gamma(PcRng* rng, float alpha) {
    if (alpha < 1.0f) {
        float u = pc_rng_float(rng);
        return sample_gamma(rng, alpha + 1.0f) * powf(u, 1.0f / alpha);
    }
    float d = alpha - 1.0f / 3.0f;
    float c = 1.0f / sqrtf(9.0f * d);
    for (;;) {
        float x, v;
        do {
            x = sample_normal(rng);
            v = 1.0f + c * x;
        } while (v <= 0.0f);
        v = v * v * v;
        float u = pc_rng_float(rng);
        if (u < 1.0f - 0.0331f * x * x * x * x) return d * v;
        if (logf(u) < 0.5f * x * x + d * (1.0f - v + logf(v))) return d * v;
    }
}

/* root_priors = (1 - eps) * prior + eps * Dirichlet(alpha), fresh for every search
 * (eps 0 for a search without noise). */
static void draw_root_noise(const Mcts* m, MctsTree* t) {
    const MctsNode* root = &t->nodes[0];
    const MctsNode* children = &t->nodes[root->first_child];
    float eps = t->root_noise ? m->config.dirichlet_epsilon : 0.0f;
    float* noise = t->root_priors; /* gamma draws first, mixed in place below */
    float total = 0.0f;
    for (int32_t k = 0; k < root->num_children; k++) {
        noise[k] = eps > 0.0f ? sample_gamma(&t->rng, m->config.dirichlet_alpha) : 0.0f;
        total += noise[k];
    }
    if (eps > 0.0f && !(total > 0.0f)) { /* every draw underflowed (tiny alpha): one spike */
        noise[pc_rng_below(&t->rng, (uint32_t)root->num_children)] = 1.0f;
        total = 1.0f;
    }
    for (int32_t k = 0; k < root->num_children; k++)
        t->root_priors[k] = (1.0f - eps) * children[k].prior + (eps > 0.0f ? eps * noise[k] / total : 0.0f);
}

/* ---- tree lifetime --------------------------------------------------------------------- */

int mcts_create(Mcts* m, const PcGameSpec* game, int32_t batch_size, MctsConfig config, const uint64_t* seeds) {
    memset(m, 0, sizeof(*m));
    m->game = game;
    m->config = config;
    m->batch_size = batch_size;
    m->trees = calloc((size_t)batch_size, sizeof(MctsTree));
    m->compact = malloc((size_t)config.max_nodes * sizeof(MctsNode));
    m->legal = malloc((size_t)game->num_actions);
    m->counts = malloc((size_t)game->num_actions * sizeof(int32_t));
    m->actions = malloc((size_t)game->num_actions * sizeof(int16_t));
    if (!m->trees || !m->compact || !m->legal || !m->counts || !m->actions) return -1;
    for (int32_t i = 0; i < batch_size; i++) {
        MctsTree* t = &m->trees[i];
        t->nodes = malloc((size_t)config.max_nodes * sizeof(MctsNode));
        t->root_state = calloc(1, game->state_size);
        t->leaf_state = calloc(1, game->state_size);
        t->root_priors = malloc((size_t)game->num_actions * sizeof(float));
        t->path = malloc(((size_t)game->max_moves + 1) * sizeof(int32_t));
        t->movers = malloc((size_t)game->max_moves + 1);
        t->gumbel = malloc((size_t)game->num_actions * sizeof(float));
        t->start_visits = malloc((size_t)game->num_actions * sizeof(int32_t));
        t->considered_visits = malloc((size_t)config.num_simulations * sizeof(int32_t));
        t->scratch = malloc((size_t)game->num_actions * sizeof(float));
        if (!t->nodes || !t->root_state || !t->leaf_state || !t->root_priors || !t->path || !t->movers ||
            !t->gumbel || !t->start_visits || !t->considered_visits || !t->scratch)
            return -1;
        pc_rng_seed(&t->rng, seeds[i], 0);
    }
    return 0;
}

void mcts_destroy(Mcts* m) {
    for (int32_t i = 0; m->trees && i < m->batch_size; i++) {
        MctsTree* t = &m->trees[i];
        free(t->nodes);
        free(t->root_state);
        free(t->leaf_state);
        free(t->root_priors);
        free(t->path);
        free(t->movers);
        free(t->gumbel);
        free(t->start_visits);
        free(t->considered_visits);
        free(t->scratch);
    }
    free(m->trees);
    free(m->compact);
    free(m->legal);
    free(m->counts);
    free(m->actions);
    memset(m, 0, sizeof(*m));
}

static void plant_root(MctsTree* t) {
    t->nodes[0] = empty_root();
    t->num_nodes = 1;
    t->consistent = 1;
    t->value_low = INFINITY;
    t->value_high = -INFINITY;
}

/* Back up a simulation's values along the tree's current path and widen the bounds of
 * the mean values seen, which normalize_values rescales Q with. */
static void back_up_path(MctsTree* t, const float* values, int32_t num_players) {
    mcts_backup(t->nodes, t->path, t->path_length, values, num_players);
    for (int32_t d = 1; d < t->path_length; d++) {
        const MctsNode* node = &t->nodes[t->path[d]];
        for (int32_t p = 0; p < num_players; p++) {
            float mean = node->value_sum[p] / (float)node->visits;
            t->value_low = fminf(t->value_low, mean);
            t->value_high = fmaxf(t->value_high, mean);
        }
    }
}

int mcts_has_tree(const Mcts* m, int32_t i) { return m->trees[i].num_nodes > 0; }

void mcts_drop_tree(Mcts* m, int32_t i) {
    m->trees[i].num_nodes = 0;
    m->trees[i].searching = 0;
}

void mcts_set_root(Mcts* m, int32_t i, const void* state, int32_t simulations, int32_t noise) {
    MctsTree* t = &m->trees[i];
    if (t->num_nodes == 0 || memcmp(t->root_state, state, m->game->state_size) != 0) {
        memcpy(t->root_state, state, m->game->state_size);
        plant_root(t);
    }
    t->simulations_left = simulations;
    t->search_simulations = simulations;
    t->searching = 1;
    t->root_priors_pending = 1;
    t->root_noise = noise;
}

/* In chance games a node's children come from the sample that expanded it: a new root
 * must have exactly the real position's legal actions as children, or be replanted. */
static int children_match_legal(const Mcts* m, const void* state, const MctsNode* nodes) {
    const PcGameSpec* game = m->game;
    const MctsNode* root = &nodes[0];
    if (game->rng_offset < 0 || root->first_child == MCTS_NO_CHILDREN) return 1;
    uint8_t* legal = m->legal;
    game->legal_mask(state, legal);
    if (mcts_count_legal(legal, game->num_actions) != root->num_children) return 0;
    for (int32_t k = 0; k < root->num_children; k++)
        if (!legal[nodes[root->first_child + k].action]) return 0;
    return 1;
}

/* Apply `action` to `state`; 1 if that drew a chance outcome (the state's RNG moved). */
static int apply_noting_draw(const PcGameSpec* game, void* state, int32_t action) {
    const PcRng* rng = chance_rng(game, state);
    PcRng before = rng ? *rng : (PcRng){0, 0};
    game->apply(state, action);
    return rng && memcmp(&before, rng, sizeof(PcRng)) != 0;
}

/* The child of the root that `action` leads to becomes the root; its subtree is copied
 * breadth-first to the front of a fresh pool (sibling blocks stay contiguous), the rest
 * is freed. A subtree that would not leave room for a full next search (root expansion
 * plus simulations, each adding at most num_actions nodes) is dropped, so reuse never
 * exhausts a pool that fits one search from scratch; so is one whose root children do
 * not fit the real draws. */
void mcts_advance(Mcts* m, int32_t i, int32_t action) {
    MctsTree* t = &m->trees[i];
    const MctsNode* root = &t->nodes[0];
    int32_t kept = MCTS_NO_CHILDREN;
    for (int32_t k = 0; k < root->num_children; k++)
        if (t->nodes[root->first_child + k].action == action) kept = root->first_child + k;
    int drew = apply_noting_draw(m->game, t->root_state, action);
    t->searching = 0;
    if (kept == MCTS_NO_CHILDREN) {
        plant_root(t);
        return;
    }
    MctsNode* out = m->compact;
    out[0] = t->nodes[kept];
    int32_t count = 1;
    for (int32_t q = 0; q < count; q++) {
        MctsNode* node = &out[q];
        if (node->first_child == MCTS_NO_CHILDREN) continue;
        memcpy(&out[count], &t->nodes[node->first_child], (size_t)node->num_children * sizeof(MctsNode));
        node->first_child = count;
        count += node->num_children;
    }
    int64_t room_needed = ((int64_t)m->config.num_simulations + 1) * m->game->num_actions;
    if (count + room_needed > m->config.max_nodes || !children_match_legal(m, t->root_state, out)) {
        plant_root(t);
        return;
    }
    /* The compacted pool becomes the tree's and the old one the scratch: every pool has
     * max_nodes, and swapping saves copying the subtree back. */
    m->compact = t->nodes;
    t->nodes = out;
    t->num_nodes = count;
    if (drew) t->consistent = 0;
}

/* ---- one simulation -------------------------------------------------------------------- */

/* The best child by PUCT among those `available` allows (all when NULL); -1 if none. */
static int32_t select_child(const Mcts* m, const MctsTree* t, int32_t node_index, int32_t player,
                            const uint8_t* available, int skip_lost) {
    const MctsNode* node = &t->nodes[node_index];
    const MctsNode* children = &t->nodes[node->first_child];
    const float* root_priors = node_index == 0 ? t->root_priors : NULL;
    float c = logf((1.0f + (float)node->visits + m->config.c_base) / m->config.c_base) + m->config.c_init;
    float exploration = c * sqrtf((float)node->visits);
    /* Normalized: q -> (q - low) * scale, and an unvisited child is valued like its
     * parent, because 0 is not "even" when returns are not centred on it (in Azul, a
     * player far ahead would otherwise never try a new move and one far behind try
     * every one). Without normalization an unvisited child's q is 0. */
    float low = 0.0f, scale = 1.0f, unvisited = 0.0f;
    if (m->config.normalize_values && t->value_high > t->value_low) {
        low = t->value_low;
        scale = 1.0f / (t->value_high - t->value_low);
        if (node->visits > 0) unvisited = node->value_sum[player] / (float)node->visits;
    }
    float unvisited_q = (unvisited - low) * scale;
    int32_t best = -1;
    float best_score = -INFINITY;
    for (int32_t k = 0; k < node->num_children; k++) {
        const MctsNode* child = &children[k];
        if (available && !available[child->action]) continue;
        if (skip_lost && mcts_proven_lost(child, player)) continue; /* known: nothing to learn there */
        float prior = root_priors ? root_priors[k] : child->prior;
        /* Most children are unvisited: their score needs no division (x / 1 is x). */
        float score = unvisited_q + exploration * prior;
        if (child->visits > 0) {
            float q = (child->value_sum[player] / (float)child->visits - low) * scale;
            score = q + exploration * prior / (1.0f + (float)child->visits);
        }
        if (best < 0 || score > best_score) {
            best_score = score;
            best = k;
        }
    }
    return best < 0 ? -1 : node->first_child + best;
}

int mcts_search_done(const Mcts* m) {
    for (int32_t i = 0; i < m->batch_size; i++)
        if (m->trees[i].searching) return 0;
    return 1;
}

int32_t mcts_select_leaves(Mcts* m, float* observations, uint8_t* legal_masks, int32_t* rows_game,
                           int32_t* failed_game) {
    const PcGameSpec* game = m->game;
    int solve = mcts_solving(m);
    int32_t rows = 0;
    for (int32_t i = 0; i < m->batch_size; i++) {
        MctsTree* t = &m->trees[i];
        if (!t->searching) continue;
        int root_expanded = t->nodes[0].first_child != MCTS_NO_CHILDREN;
        if (root_expanded && (t->simulations_left == 0 || (solve && t->nodes[0].proven))) {
            t->searching = 0;
            continue;
        }
        if (root_expanded) { /* the first round only expands the root; it is not a simulation */
            if (t->root_priors_pending && m->config.gumbel)
                mcts_gumbel_begin(m, t, game->current_player(t->root_state));
            else if (t->root_priors_pending)
                draw_root_noise(m, t);
            t->root_priors_pending = 0;
            t->simulations_left--;
        }
        memcpy(t->leaf_state, t->root_state, game->state_size);
        mcts_resample_chance(game, t->leaf_state, &t->rng);
        /* A chance game's sample needs its own legal mask at a node only once a draw has
         * happened on the way there (its RNG moved) or the tree is not `consistent`:
         * before, its position is the one every sample reached there. */
        const PcRng* rng_now = chance_rng(game, t->leaf_state);
        PcRng sampled = rng_now ? *rng_now : (PcRng){0, 0};
        int32_t node = 0, sample_ended = 0;
        t->path[0] = 0;
        t->movers[0] = (int8_t)game->current_player(t->leaf_state);
        t->path_length = 1;
        uint8_t* mask = legal_masks + (size_t)rows * (size_t)game->num_actions;
        while (t->nodes[node].first_child != MCTS_NO_CHILDREN && !(solve && t->nodes[node].proven)) {
            const uint8_t* available = NULL;
            if (rng_now && (!t->consistent || memcmp(rng_now, &sampled, sizeof(PcRng)) != 0)) {
                available = mcts_available(game, t->leaf_state, mask, &sample_ended);
                if (sample_ended) break;
            }
            int32_t mover = t->movers[t->path_length - 1];
            int32_t child = node == 0 && m->config.gumbel ? mcts_gumbel_select(m, t, mover)
                                                          : select_child(m, t, node, mover, available, solve);
            if (child < 0) break; /* this sample allows none of the stored actions: evaluate here */
            node = child;
            game->apply(t->leaf_state, t->nodes[node].action);
            t->movers[t->path_length] = (int8_t)game->current_player(t->leaf_state);
            t->path[t->path_length++] = node;
        }
        int32_t num_players = game->num_players(t->leaf_state);
        if (solve && t->nodes[node].proven) { /* the exact result is known: no evaluation */
            float values[PC_GAME_MAX_PLAYERS];
            for (int32_t p = 0; p < num_players; p++) values[p] = mcts_mean_value(&t->nodes[node], p);
            back_up_path(t, values, num_players);
            continue;
        }
        if (game->is_terminal(t->leaf_state)) {
            float returns[PC_GAME_MAX_PLAYERS], utility[PC_GAME_MAX_PLAYERS];
            game->returns(t->leaf_state, returns);
            mcts_utility(returns, num_players, m->config.lead_returns, m->config.outcome_weight, utility);
            back_up_path(t, utility, num_players);
            if (solve) {
                mcts_prove(&t->nodes[node], utility, num_players, 0);
                mcts_prove_path(t, num_players);
            }
            continue;
        }
        game->legal_mask(t->leaf_state, mask);
        int expands = t->nodes[node].first_child == MCTS_NO_CHILDREN;
        if (expands && t->num_nodes + mcts_count_legal(mask, game->num_actions) > m->config.max_nodes) {
            *failed_game = i;
            return MCTS_ERROR_POOL_EXHAUSTED;
        }
        game->observe(t->leaf_state, t->movers[t->path_length - 1], observations + (size_t)rows * (size_t)game->obs_size);
        rows_game[rows++] = i;
    }
    return rows;
}

void mcts_expand_leaves(Mcts* m, int32_t n, const uint8_t* legal_masks, const int32_t* rows_game,
                        const float* priors, const float* values, int32_t value_width) {
    const PcGameSpec* game = m->game;
    for (int32_t row = 0; row < n; row++) {
        MctsTree* t = &m->trees[rows_game[row]];
        MctsNode* leaf = &t->nodes[t->path[t->path_length - 1]];
        if (leaf->first_child == MCTS_NO_CHILDREN) { /* else an open-loop re-evaluation */
            leaf->first_child = t->num_nodes;
            leaf->num_children = (int16_t)mcts_add_children(
                t->nodes, t->num_nodes, legal_masks + (size_t)row * (size_t)game->num_actions, game->num_actions,
                priors + (size_t)row * (size_t)game->num_actions, m->actions);
            t->num_nodes += leaf->num_children;
        }
        int32_t num_players = game->num_players(t->leaf_state);
        int32_t mover = game->current_player(t->leaf_state);
        float by_seat[PC_GAME_MAX_PLAYERS];
        for (int32_t k = 0; k < num_players; k++)
            by_seat[(mover + k) % num_players] = values[(size_t)row * (size_t)value_width + (size_t)k];
        back_up_path(t, by_seat, num_players);
    }
}
