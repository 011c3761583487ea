# cython: language_level=3, boundscheck=False, wraparound=False
"""The native tree searches over C games (mcts.h, uct.c): AlphaZero's batched MCTS and
the plain UCT baseline. Games and states come from the games extension
(puffercore._games), generic over a `PcGameSpec`. Inputs are validated here; the C code
trusts them.
"""

from libc.stdint cimport int32_t, uint8_t, uint64_t
from libc.math cimport isfinite
from libc.string cimport memcpy

import numpy as np

from puffercore._games cimport PC_GAME_MAX_PLAYERS, Game, GameState, PcGameSpec
from puffercore._games import MAX_SEED
from puffercore.checks import check_int
from puffercore.seeding import derive_seed

cdef extern from "mcts.h" nogil:
    enum: MCTS_ERROR_POOL_EXHAUSTED
    ctypedef struct MctsConfig:
        int32_t num_simulations
        int32_t max_nodes
        float c_base
        float c_init
        float dirichlet_alpha
        float dirichlet_epsilon
        int32_t normalize_values
        int32_t solve
        int32_t gumbel
        int32_t max_considered
        float c_visit
        float c_scale
        int32_t lead_returns
        float outcome_weight
    ctypedef struct MctsTree:
        int32_t num_nodes
        uint8_t* root_state
        int32_t searching
    ctypedef struct Mcts:
        MctsTree* trees
        uint8_t* legal
    int mcts_create(Mcts* m, const PcGameSpec* game, int32_t batch_size, MctsConfig config, const uint64_t* seeds)
    void mcts_destroy(Mcts* m)
    void mcts_set_root(Mcts* m, int32_t i, const void* state, int32_t simulations, int32_t noise)
    void mcts_drop_tree(Mcts* m, int32_t i)
    void mcts_advance(Mcts* m, int32_t i, int32_t action)
    int mcts_has_tree(const Mcts* m, int32_t i)
    int mcts_search_done(const Mcts* m)
    int32_t mcts_select_leaves(Mcts* m, float* observations, uint8_t* legal_masks, int32_t* rows_game,
                               int32_t* failed_game)
    void mcts_expand_leaves(Mcts* m, int32_t n, const uint8_t* legal_masks, const int32_t* rows_game,
                            const float* priors, const float* values, int32_t value_width)
    void mcts_visit_counts(const Mcts* m, int32_t i, int32_t* out)
    void mcts_policy(const Mcts* m, int32_t i, float* out)
    int mcts_root_proven(const Mcts* m, int32_t i, float* out)
    void mcts_root_value(const Mcts* m, int32_t i, float* out)
    void mcts_root_values(const Mcts* m, int32_t i, float* out, int32_t width)
    int32_t mcts_choose_action(Mcts* m, int32_t i, float temperature)
    void mcts_utility(const float* returns, int32_t num_players, int32_t lead_returns, float outcome_weight,
                      float* out)
    int32_t uct_search(const PcGameSpec* game, const void* state, int32_t simulations, float uct_c,
                       uint64_t seed, int32_t* visits_out)


cdef Py_ssize_t _first_bad(const float* values, Py_ssize_t count, bint nonnegative) noexcept nogil:
    """The index of the first value that is not finite (or, with `nonnegative`, below 0),
    or -1: one pass in C where numpy's isfinite and < 0 made two arrays a round."""
    cdef Py_ssize_t k
    for k in range(count):
        if not isfinite(values[k]) or (nonnegative and values[k] < 0.0):
            return k
    return -1


cdef float[:, ::1] _checked_output(array, str name, Py_ssize_t rows, Py_ssize_t width, bint nonnegative):
    """An evaluator output as C-contiguous float32 [rows, width] (width -1: any), every
    value finite (and >= 0 with `nonnegative`), or a ValueError naming the first bad one."""
    array = np.ascontiguousarray(array, dtype=np.float32)
    if array.ndim != 2 or array.shape[0] != rows or (width >= 0 and array.shape[1] != width):
        expected = f"[{rows}, {width if width >= 0 else 'num_players'}]"
        raise ValueError(f"evaluator {name} must have shape {expected}, got {array.shape}")
    cdef float[:, ::1] view = array
    cdef Py_ssize_t bad
    with nogil:
        bad = _first_bad(&view[0, 0], view.shape[0] * view.shape[1], nonnegative)
    if bad >= 0:
        row, column = divmod(bad, view.shape[1])
        value = view[row, column]
        requirement = "be finite" if not np.isfinite(value) else "be >= 0"
        raise ValueError(f"evaluator {name} must {requirement}, got {name}[{row}, {column}] = {value}")
    return view


def _check_float(value, name, low, low_inclusive=True, high=None):
    """A finite number checked against its bounds (low exclusive unless low_inclusive)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    value = float(value)
    too_low = value < low if low_inclusive else value <= low
    if not np.isfinite(value) or too_low or (high is not None and value > high):
        bound = f"{'>=' if low_inclusive else '>'} {low}" + (f" and <= {high}" if high is not None else "")
        raise ValueError(f"{name} must be finite and {bound}, got {value}")
    return value


cdef _check_state(Game game, state, str name):
    if not isinstance(state, GameState):
        raise TypeError(f"{name} must be a GameState, got {type(state).__name__}")
    (<GameState>state)._check()
    if (<GameState>state).game != game:
        raise ValueError(f"{name} is a {(<GameState>state).game.name} state, expected {game.name}")


def game_utility(returns, lead_returns=False, outcome_weight=0.0):
    """What the search makes of a finished game's `returns` (by seat) with
    BatchedMCTS(lead_returns=..., outcome_weight=...): outcome_weight * outcome + (1 -
    outcome_weight) * base, base the returns or, with `lead_returns`, each seat's return
    minus the best other seat's, halved (2-player zero-sum returns stay as they are); the
    outcome is zero-sum in [-1, 1] (the seats sharing the highest return split the win; 2
    players: +1 / -1, a tie 0). Self-play's value targets use it too, so the network
    learns what the search backs up."""
    if not isinstance(lead_returns, (bool, np.bool_)):
        raise TypeError(f"lead_returns must be a bool, got {lead_returns!r}")
    cdef float weight = _check_float(outcome_weight, "outcome_weight", 0.0, high=1.0)
    cdef float[::1] values = np.ascontiguousarray(returns, dtype=np.float32).reshape(-1)
    cdef int32_t n = values.shape[0]
    if not 1 <= n <= PC_GAME_MAX_PLAYERS:
        raise ValueError(f"returns must hold 1-{PC_GAME_MAX_PLAYERS} values (one per seat), got {n}")
    out = np.empty(n, dtype=np.float32)
    cdef float[::1] out_view = out
    mcts_utility(&values[0], n, bool(lead_returns), weight, &out_view[0])
    return out


def uniform_evaluator(observations, legal_masks):
    """Uniform priors over the legal actions and zero values: measures the tree code
    alone, and with terminal returns still finds forced wins."""
    masks = np.asarray(legal_masks, dtype=np.float32)
    priors = masks / np.maximum(masks.sum(axis=1, keepdims=True), 1.0)
    return priors, np.zeros((masks.shape[0], PC_GAME_MAX_PLAYERS), dtype=np.float32)


cdef class BatchedMCTS:
    """AlphaZero MCTS over `batch_size` games at once (see native/mcts/mcts.h).

    `search(states, evaluator)` runs `num_simulations` simulations per game; each round
    descends one leaf per game in C, then calls
        priors, values = evaluator(observations [n, *obs_shape], legal_masks [n, A] bool)
    ONCE for all n <= batch_size leaves (leaves that end the game are scored by the
    game's returns instead). priors: [n, A] >= 0 (renormalised over legal actions);
    values: [n, >= num_players], each row [value of the player to move, then of the
    next players in turn order] -- the same perspective as the observation. The arrays passed
    in are reused next round; copy them to keep them.

    Trees live in preallocated node pools (`max_nodes` per game) and persist: after
    `advance(i, action)` the chosen child's subtree is the next root, and a search of a
    state equal to the stored root reuses its tree (any other state starts afresh).
    Games with chance events are searched open-loop: each simulation reseeds a copy of
    the state's RNG, so values average over sampled draws and the search never sees
    the real future ones.
    With `solve` (the default), games without chance events are searched with
    MCTS-solver: won, lost and drawn positions are proven from terminal ones and backed
    up exactly, proven lost moves are never chosen, a proven root stops its search early
    and its policy keeps only the moves proven to keep its result (temperature 0 plays
    the fastest win); `proven_value(i)` reads a proven root's result.
    `root_noise=False` makes searches noise-free unless search() asks for noise (agents
    at play). With `gumbel`, the root is searched as in Gumbel MuZero (Danihelka et al. 2022):
    `max_considered` actions sampled by Gumbel-top-k (Gumbel noise where the root has
    noise, instead of Dirichlet), sequential halving over them, the policy returned is
    the improved policy softmax(logits + sigma(completed Q)) with sigma scaled by
    (`c_visit` + most visits) * `c_scale` (mctx's defaults, 50 and 0.1), and
    `choose_action` plays the surviving action at any temperature.
    A leaf that ends the game is worth `game_utility(returns, lead_returns,
    outcome_weight)`: by default the game's returns.
    Dirichlet noise (alpha, epsilon) is mixed into the root priors at every search and,
    like temperature sampling, drawn from game i's own RNG: `seed` is an int (game i
    gets derive_seed(seed, i)) or a sequence of batch_size ints (one per game), so a
    game searched alone with its own seed gives the same result as inside a batch.
    """

    cdef Mcts m
    cdef readonly Game game
    cdef readonly int batch_size
    cdef readonly int num_simulations
    cdef readonly int max_nodes
    cdef readonly bint root_noise
    cdef object _observations, _masks, _rows_game, _active
    cdef bint _busy  # inside search(): the evaluator must not touch this object

    def __init__(self, game, batch_size, num_simulations=800, c_base=19652.0, c_init=1.25,
                 dirichlet_alpha=0.3, dirichlet_epsilon=0.25, normalize_values=False, max_nodes=None, seed=0,
                 solve=True, gumbel=False, max_considered=16, c_visit=50.0, c_scale=0.1, root_noise=True,
                 lead_returns=False, outcome_weight=0.0):
        if not isinstance(game, Game):
            raise TypeError(f"game must be a puffercore.games.Game, got {type(game).__name__}")
        self.game = game
        self.batch_size = check_int(batch_size, "batch_size", 1, 2**20)
        self.num_simulations = check_int(num_simulations, "num_simulations", 1, 2**30)
        cdef int32_t num_actions = game.num_actions
        if max_nodes is None:  # room for a full search plus an equally big reused subtree
            max_nodes = min(2 * (self.num_simulations + 1) * num_actions + 1, 2**31 - 1)
        self.max_nodes = check_int(max_nodes, "max_nodes", num_actions + 1, 2**31 - 1)
        cdef MctsConfig config
        config.num_simulations = self.num_simulations
        config.max_nodes = self.max_nodes
        config.c_base = _check_float(c_base, "c_base", 0.0, low_inclusive=False)
        config.c_init = _check_float(c_init, "c_init", 0.0)
        config.dirichlet_alpha = _check_float(dirichlet_alpha, "dirichlet_alpha", 0.0, low_inclusive=False)
        config.dirichlet_epsilon = _check_float(dirichlet_epsilon, "dirichlet_epsilon", 0.0, high=1.0)
        if not isinstance(normalize_values, (bool, np.bool_)):
            raise TypeError(f"normalize_values must be a bool, got {normalize_values!r}")
        config.normalize_values = bool(normalize_values)
        if not isinstance(solve, (bool, np.bool_)):
            raise TypeError(f"solve must be a bool, got {solve!r}")
        config.solve = bool(solve)
        if not isinstance(root_noise, (bool, np.bool_)):
            raise TypeError(f"root_noise must be a bool, got {root_noise!r}")
        self.root_noise = bool(root_noise)
        if not isinstance(gumbel, (bool, np.bool_)):
            raise TypeError(f"gumbel must be a bool, got {gumbel!r}")
        config.gumbel = bool(gumbel)
        config.max_considered = check_int(max_considered, "max_considered", 1, 2**15)
        config.c_visit = _check_float(c_visit, "c_visit", 0.0)
        config.c_scale = _check_float(c_scale, "c_scale", 0.0, low_inclusive=False)
        if not isinstance(lead_returns, (bool, np.bool_)):
            raise TypeError(f"lead_returns must be a bool, got {lead_returns!r}")
        config.lead_returns = bool(lead_returns)
        config.outcome_weight = _check_float(outcome_weight, "outcome_weight", 0.0, high=1.0)
        if isinstance(seed, (list, tuple, np.ndarray)):
            if len(seed) != self.batch_size:
                raise ValueError(f"seed must be an int or {self.batch_size} ints (one per game), got {len(seed)}")
            seeds = [check_int(s, f"seed[{i}]", 0, MAX_SEED) for i, s in enumerate(seed)]
        else:
            base = check_int(seed, "seed", 0, MAX_SEED)
            seeds = [derive_seed(base, i) for i in range(self.batch_size)]
        cdef uint64_t[::1] seed_view = np.array(seeds, dtype=np.uint64)
        if mcts_create(&self.m, (<Game>game).spec, self.batch_size, config, &seed_view[0]) != 0:
            mcts_destroy(&self.m)
            raise MemoryError(f"cannot allocate {self.batch_size} node pools of max_nodes={self.max_nodes}")
        self._observations = np.zeros((self.batch_size,) + game.observation_shape, dtype=np.float32)
        self._masks = np.zeros((self.batch_size, num_actions), dtype=np.bool_)
        self._rows_game = np.zeros(self.batch_size, dtype=np.int32)
        self._active = np.zeros(self.batch_size, dtype=np.bool_)

    def __dealloc__(self):
        mcts_destroy(&self.m)

    def _check_index(self, i):
        if self._busy:
            raise RuntimeError("BatchedMCTS is in the middle of search(); the evaluator must not use it")
        if type(i) is int and 0 <= i < self.batch_size:  # the common case, without check_int's calls
            return i
        return check_int(i, "i", 0, self.batch_size - 1)

    cdef int32_t _root_players(self, int32_t i):
        """Players at game i's root, read in place (0 without a tree); i already checked."""
        if not mcts_has_tree(&self.m, i):
            return 0
        return self.game.spec.num_players(self.m.trees[i].root_state)

    def search(self, states, evaluator, simulations=None, noise=None):
        """Search every game; `states[i]` None skips game i. Returns float32 [B, A]
        policies: visit counts normalised, or with `gumbel` the improved policy (rows of
        skipped games are zero).

        `simulations`: per-game simulation counts (B ints in 1..num_simulations; default
        num_simulations for all), e.g. KataGo's playout cap randomization: most moves a
        cheap search, some a full one. `noise`: per-game bools, whether the root gets
        root noise (default: `root_noise` of the constructor; a cheap search usually goes
        without)."""
        if self._busy:
            raise RuntimeError("BatchedMCTS is in the middle of search(); the evaluator must not use it")
        self._busy = True
        try:
            return self._search(states, evaluator, self._per_game(simulations, "simulations", self.num_simulations),
                                self._per_game(noise, "noise", self.root_noise))
        finally:
            self._busy = False

    def _per_game(self, values, name, default):
        if values is None:
            return [default] * self.batch_size
        if len(values) != self.batch_size:
            raise ValueError(f"{name} must have batch_size={self.batch_size} entries, got {len(values)}")
        if name == "noise":
            return [bool(value) for value in values]
        return [check_int(value, f"simulations[{i}]", 1, self.num_simulations) for i, value in enumerate(values)]

    cdef object _search(self, states, evaluator, simulations, noise):
        if len(states) != self.batch_size:
            raise ValueError(f"states must have batch_size={self.batch_size} entries, got {len(states)}")
        if not callable(evaluator):
            raise TypeError("evaluator must be callable (observations, legal_masks) -> (priors, values)")
        value_width = 0
        for i, state in enumerate(states):
            self.m.trees[i].searching = 0
            if state is None:
                continue
            _check_state(self.game, state, f"states[{i}]")
            if state.is_terminal():
                raise ValueError(f"states[{i}] is terminal; there is nothing to search")
            value_width = max(value_width, state.num_players)
        for i, state in enumerate(states):
            if state is not None:
                mcts_set_root(&self.m, i, (<GameState>state).data, simulations[i], noise[i])
        self._active[:] = [state is not None for state in states]

        cdef float[:, ::1] observations = self._observations.reshape(self.batch_size, -1)
        cdef uint8_t[:, ::1] masks = self._masks.view(np.uint8)
        cdef int32_t[::1] rows_game = self._rows_game
        cdef float[:, ::1] priors_view, values_view
        cdef int32_t rows, failed = -1
        while not mcts_search_done(&self.m):
            with nogil:
                rows = mcts_select_leaves(&self.m, &observations[0, 0], &masks[0, 0], &rows_game[0], &failed)
            if rows == MCTS_ERROR_POOL_EXHAUSTED:
                raise RuntimeError(
                    f"MCTS node pool exhausted in game {failed}: max_nodes={self.max_nodes} is too small "
                    f"for this search; raise max_nodes or lower num_simulations")
            if rows == 0:
                continue
            priors, values = evaluator(self._observations[:rows], self._masks[:rows])
            priors_view = _checked_output(priors, "priors", rows, self.game.num_actions, True)
            values_view = _checked_output(values, "values", rows, -1, False)
            if values_view.shape[1] < value_width:
                raise ValueError(f"evaluator values must have >= {value_width} columns (one per player), "
                                 f"got shape {(values_view.shape[0], values_view.shape[1])}")
            with nogil:
                mcts_expand_leaves(&self.m, rows, &masks[0, 0], &rows_game[0], &priors_view[0, 0],
                                   &values_view[0, 0], <int32_t>values_view.shape[1])
        policies = np.zeros((self.batch_size, self.game.num_actions), dtype=np.float32)
        cdef float[:, ::1] policies_view = policies
        for i in np.flatnonzero(self._active):
            mcts_policy(&self.m, i, &policies_view[i, 0])
        return policies

    def root_values(self, i):
        """float32 [num_actions, num_players]: mean backed-up value of each root child
        by seat (0 for unvisited or illegal actions)."""
        root = self.root_state(i)
        width = root.num_players if root is not None else self.game.max_players
        values = np.zeros((self.game.num_actions, width), dtype=np.float32)
        cdef float[:, ::1] view = values
        mcts_root_values(&self.m, i, &view[0, 0], width)
        return values

    def root_value(self, i):
        """float32 [num_players]: game i's root value by seat, the mean of what its last
        search backed up (the exact result once the solver proved it), or None without a tree."""
        i = self._check_index(i)
        players = self._root_players(i)
        if players == 0:
            return None
        values = np.zeros(players, dtype=np.float32)
        cdef float[::1] view = values
        mcts_root_value(&self.m, i, &view[0])
        return values

    def proven_value(self, i):
        """float32 [num_players]: game i's exact result by seat when the solver proved its
        root (1 a win, -1 a loss), else None."""
        i = self._check_index(i)
        players = self._root_players(i)
        if players == 0:
            return None
        values = np.zeros(players, dtype=np.float32)
        cdef float[::1] view = values
        return values if mcts_root_proven(&self.m, i, &view[0]) else None

    def visit_counts(self, i):
        """int32 [num_actions]: visits of game i's root children (reused ones included)."""
        i = self._check_index(i)
        counts = np.zeros(self.game.num_actions, dtype=np.int32)
        cdef int32_t[::1] view = counts
        if mcts_has_tree(&self.m, i):
            mcts_visit_counts(&self.m, i, &view[0])
        return counts

    def choose_action(self, i, temperature=1.0):
        """An action for game i from its last search: sampled from visits^(1/temperature),
        or the most visited (lowest on ties) for temperature 0. The AlphaZero schedule is
        temperature 1 for the first moves, then 0."""
        i = self._check_index(i)
        temperature = _check_float(temperature, "temperature", 0.0)
        action = mcts_choose_action(&self.m, i, temperature)
        if action < 0:
            raise ValueError(f"game {i} has no searched root; call search() first")
        return int(action)

    def advance(self, i, action):
        """Game i played `action`: its subtree becomes the root, the rest is freed."""
        i = self._check_index(i)
        action = check_int(action, "action", 0, self.game.num_actions - 1)
        if not mcts_has_tree(&self.m, i):
            raise ValueError(f"game {i} has no tree to advance; search() or reset(i, state) first")
        cdef const uint8_t* root = self.m.trees[i].root_state  # checked in place, not copied
        cdef bint legal = not self.game.spec.is_terminal(root)
        if legal:
            self.game.spec.legal_mask(root, self.m.legal)  # the search's scratch mask
            legal = self.m.legal[action] != 0
        if not legal:
            raise ValueError(f"action {action} is not legal at game {i}'s root")
        mcts_advance(&self.m, i, action)

    def reset(self, i, state=None):
        """Forget game i's tree; with `state`, plant a fresh root there."""
        i = self._check_index(i)
        mcts_drop_tree(&self.m, i)
        if state is not None:
            _check_state(self.game, state, "state")
            mcts_set_root(&self.m, i, (<GameState>state).data, self.num_simulations, True)
            self.m.trees[i].searching = 0

    def root_state(self, i):
        """A copy of game i's root position, or None without a tree."""
        i = self._check_index(i)
        if not mcts_has_tree(&self.m, i):
            return None
        cdef GameState state = self.game.new_state()
        memcpy(state.data, self.m.trees[i].root_state, self.game.spec.state_size)
        return state

    def tree_size(self, i):
        """Nodes in game i's pool (0 without a tree)."""
        return int(self.m.trees[self._check_index(i)].num_nodes)


def mcts_baseline_move(state, simulations=1000, uct_c=2.0, seed=0):
    """The plain MCTS baseline's move: UCT with one random rollout per simulation
    (native/mcts/uct.c). Returns (action, root visit counts int32 [num_actions])."""
    if not isinstance(state, GameState):
        raise TypeError(f"state must be a GameState, got {type(state).__name__}")
    if state.is_terminal():
        raise ValueError("state is terminal; there is no move to choose")
    simulations = check_int(simulations, "simulations", 1, 2**24)
    cdef float c = _check_float(uct_c, "uct_c", 0.0)
    cdef uint64_t seed_value = check_int(seed, "seed", 0, MAX_SEED)
    cdef GameState root = state
    visits = np.zeros(root.game.num_actions, dtype=np.int32)
    cdef int32_t[::1] visits_view = visits
    cdef int32_t sims = simulations, action
    with nogil:
        action = uct_search(root.game.spec, root.data, sims, c, seed_value, &visits_view[0])
    if action < 0:
        raise MemoryError(f"cannot allocate the UCT tree for {simulations} simulations")
    return int(action), visits
