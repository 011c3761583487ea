# cython: language_level=3, boundscheck=False, wraparound=False
"""Python views of C games (puffercore/game.h) and the native tree searches (mcts.h).

Everything here is generic over a `PcGameSpec`: a game is handed in as a PyCapsule named
"puffercore.PcGameSpec" holding a pointer to its static spec, so a game compiled in
another extension (Azul) plugs in with `Game(capsule)`. Inputs are validated here; the
C code trusts them.
"""

from cpython.buffer cimport PyBuffer_FillInfo
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid, PyCapsule_New
from libc.stdint cimport int32_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy

import numpy as np

from puffercore.seeding import derive_seed

cdef extern from "puffercore/game.h":
    enum: PC_GAME_ABI_VERSION
    enum: PC_GAME_MAX_PLAYERS
    ctypedef struct PcGameSpec:
        int32_t abi_version
        const char* name
        size_t state_size
        int32_t num_actions
        int32_t obs_size
        int32_t obs_rank
        int32_t obs_shape[4]
        int32_t min_players
        int32_t max_players
        int32_t max_moves
        void (*init)(void* state, uint64_t seed, int32_t num_players) nogil
        void (*legal_mask)(const void* state, uint8_t* out) nogil
        void (*apply)(void* state, int32_t action) nogil
        int32_t (*is_terminal)(const void* state) nogil
        void (*returns)(const void* state, float* out) nogil
        int32_t (*current_player)(const void* state) nogil
        int32_t (*num_players)(const void* state) nogil
        void (*observe)(const void* state, int32_t player, float* out) nogil
        int32_t (*render)(const void* state, char* out, int32_t capacity) nogil

cdef extern from "puffercore/games/connect4.h":
    const PcGameSpec CONNECT4_GAME

cdef extern from "puffercore/games/tictactoe.h":
    const PcGameSpec TICTACTOE_GAME

cdef extern from "puffercore/games/pig.h":
    const PcGameSpec PIG_GAME

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
    ctypedef struct MctsTree:
        int32_t num_nodes
        uint8_t* root_state
        int32_t searching
    ctypedef struct Mcts:
        MctsTree* trees
    int mcts_create(Mcts* m, const PcGameSpec* game, int32_t batch_size, MctsConfig config, const uint64_t* seeds)
    void mcts_destroy(Mcts* m)
    void mcts_set_root(Mcts* m, int32_t i, const void* state)
    void mcts_drop_tree(Mcts* m, int32_t i)
    void mcts_advance(Mcts* m, int32_t i, int32_t action)
    int mcts_has_tree(const Mcts* m, int32_t i)
    int mcts_search_done(const Mcts* m)
    int32_t mcts_select_leaves(Mcts* m, float* observations, uint8_t* legal_masks, int32_t* rows_game,
                               int32_t* failed_game)
    void mcts_expand_leaves(Mcts* m, int32_t n, const uint8_t* legal_masks, const int32_t* rows_game,
                            const float* priors, const float* values, int32_t value_width)
    void mcts_visit_counts(const Mcts* m, int32_t i, int32_t* out)
    void mcts_root_values(const Mcts* m, int32_t i, float* out, int32_t width)
    int32_t mcts_choose_action(Mcts* m, int32_t i, float temperature)
    int32_t uct_search(const PcGameSpec* game, const void* state, int32_t simulations, float uct_c,
                       uint64_t seed, int32_t* visits_out)

MAX_PLAYERS = PC_GAME_MAX_PLAYERS
MAX_ACTIONS = 32767
cdef const char* SPEC_CAPSULE_NAME = "puffercore.PcGameSpec"
_MAX_SEED = 2**64 - 1


def connect4_spec():
    return PyCapsule_New(<void*>&CONNECT4_GAME, SPEC_CAPSULE_NAME, NULL)


def tictactoe_spec():
    return PyCapsule_New(<void*>&TICTACTOE_GAME, SPEC_CAPSULE_NAME, NULL)


def pig_spec():
    return PyCapsule_New(<void*>&PIG_GAME, SPEC_CAPSULE_NAME, NULL)


def _check_int(value, name, low, high=None):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < low or (high is not None and value > high):
        bounds = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {bounds}, got {value}")
    return int(value)


def _check_float(value, name, low, low_inclusive=True, high=None):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    value = float(value)
    too_low = value < low if low_inclusive else value <= low
    if not np.isfinite(value) or too_low or (high is not None and value > high):
        bound = f"{'>=' if low_inclusive else '>'} {low}" + (f" and <= {high}" if high is not None else "")
        raise ValueError(f"{name} must be finite and {bound}, got {value}")
    return value


cdef class Game:
    """A C game seen from Python: `Game(spec_capsule).new_state(seed, num_players)`.

    A subclass may set `state_class` (a GameState subclass with game-specific views) and,
    to let `state_from_bytes` build states, override `check_state_bytes`."""

    cdef const PcGameSpec* spec
    state_class = None  # GameState unless a subclass says otherwise
    # The board's symmetries other than the identity, for training-data augmentation:
    # (observation_map, action_map) index arrays such that a position seen through the
    # symmetry has observation.ravel()[observation_map] and policy[action_map].
    symmetries = ()

    cdef const PcGameSpec* _spec(self) except NULL:
        """The spec, or TypeError for a Game that skipped __init__ (Game.__new__(Game))."""
        if self.spec == NULL:
            raise TypeError(f"{type(self).__name__} was not initialized: create games with their class, "
                            f"e.g. Connect4()")
        return self.spec

    def __init__(self, spec_capsule):
        if not PyCapsule_IsValid(spec_capsule, SPEC_CAPSULE_NAME):
            raise TypeError(f"spec_capsule must be a PyCapsule named 'puffercore.PcGameSpec'")
        self.spec = <const PcGameSpec*>PyCapsule_GetPointer(spec_capsule, SPEC_CAPSULE_NAME)
        if self.spec.abi_version != PC_GAME_ABI_VERSION:
            raise ValueError(f"game ABI version {self.spec.abi_version}, expected {PC_GAME_ABI_VERSION}")
        if not 1 <= self.spec.min_players <= self.spec.max_players <= PC_GAME_MAX_PLAYERS:
            raise ValueError(f"game players must satisfy 1 <= min <= max <= {PC_GAME_MAX_PLAYERS}")
        if not 1 <= self.spec.num_actions <= MAX_ACTIONS:
            raise ValueError(f"game num_actions must be in [1, {MAX_ACTIONS}] (search nodes store int16 actions)")

    @property
    def name(self):
        return self._spec().name.decode()

    @property
    def num_actions(self):
        return self._spec().num_actions

    @property
    def observation_shape(self):
        return tuple(self._spec().obs_shape[k] for k in range(self._spec().obs_rank))

    @property
    def observation_size(self):
        return self._spec().obs_size

    @property
    def min_players(self):
        return self._spec().min_players

    @property
    def max_players(self):
        return self._spec().max_players

    @property
    def max_moves(self):
        return self._spec().max_moves

    def new_state(self, seed=0, num_players=None):
        """A fresh game. `seed` feeds the state's own RNG (chance events)."""
        seed = _check_int(seed, "seed", 0, _MAX_SEED)
        if num_players is None:
            num_players = self._spec().min_players
        num_players = _check_int(num_players, "num_players", self._spec().min_players, self._spec().max_players)
        cdef GameState state = self._blank_state()
        self._spec().init(state.data, <uint64_t>seed, <int32_t>num_players)
        return state

    cdef GameState _blank_state(self):
        cls = self.state_class or GameState
        cdef GameState state = cls.__new__(cls)
        state._allocate(self)
        return state

    def check_state_bytes(self, data):
        """Raise ValueError unless `data` is a consistent state of this game. Games that can
        check their states override this; the rest cannot build states from bytes."""
        raise NotImplementedError(f"{self.name} cannot check raw states, so it cannot build them from bytes")

    def state_from_bytes(self, data):
        """A state from raw bytes (`bytes(state)` of a state of this game), after
        `check_state_bytes`: native code never sees bytes the game has not checked."""
        cdef const unsigned char[::1] view = memoryview(data).cast("B")
        if view.shape[0] != self._spec().state_size:
            raise ValueError(f"a {self.name} state has {self._spec().state_size} bytes, got {view.shape[0]}")
        self.check_state_bytes(view)
        cdef GameState state = self._blank_state()
        memcpy(state.data, &view[0], self._spec().state_size)
        return state

    def __eq__(self, other):
        return isinstance(other, Game) and (<Game>other).spec == self.spec

    def __hash__(self):
        return hash(<size_t>self.spec)

    def __repr__(self):
        return f"{type(self).__name__}()"


cdef class GameState:
    """One game position (plain bytes in C). Create with `game.new_state()`."""

    cdef readonly Game game
    cdef unsigned char* data

    def __init__(self):
        raise TypeError("create states with game.new_state()")

    cdef _check(self):
        if self.data == NULL:
            raise TypeError("this GameState was not created by Game.new_state() (or clone, state_from_bytes)")

    cdef _allocate(self, Game game):
        self.game = game
        self.data = <unsigned char*>malloc(game.spec.state_size)
        if self.data == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.data)

    def __getbuffer__(self, Py_buffer* buffer, int flags):
        """The raw C state, read-only (`bytes(state)`, `memoryview(state)`): game-specific
        views decode it; `game.state_from_bytes` turns it back into a state."""
        self._check()
        PyBuffer_FillInfo(buffer, self, self.data, self.game.spec.state_size, 1, flags)

    def clone(self):
        self._check()
        cdef GameState copy = self.game._blank_state()
        memcpy(copy.data, self.data, self.game.spec.state_size)
        return copy

    def legal_mask(self):
        """bool [num_actions]; all False once the game is over."""
        self._check()
        mask = np.empty(self.game.spec.num_actions, dtype=np.bool_)
        cdef uint8_t[::1] view = mask.view(np.uint8)
        self.game.spec.legal_mask(self.data, &view[0])
        return mask

    def legal_actions(self):
        self._check()
        return [int(a) for a in np.flatnonzero(self.legal_mask())]

    def apply(self, action):
        """Play `action` for the current player; ValueError if it is not legal here."""
        self._check()
        action = _check_int(action, "action", 0, self.game.spec.num_actions - 1)
        if self.game.spec.is_terminal(self.data):
            raise ValueError("apply: the game is over")
        if not self.legal_mask()[action]:
            raise ValueError(f"action {action} is illegal here; legal actions: {self.legal_actions()}")
        self.game.spec.apply(self.data, <int32_t>action)

    def is_terminal(self):
        self._check()
        return bool(self.game.spec.is_terminal(self.data))

    def returns(self):
        """float32 [num_players] by seat; final outcome once terminal (zeros before, for
        games without intermediate scores)."""
        self._check()
        out = np.zeros(self.num_players, dtype=np.float32)
        cdef float[::1] view = out
        self.game.spec.returns(self.data, &view[0])
        return out

    def current_player(self):
        self._check()
        return int(self.game.spec.current_player(self.data))

    @property
    def num_players(self):
        self._check()
        return int(self.game.spec.num_players(self.data))

    def observation(self, player=None):
        """float32 observation_shape, seen by `player` (default: the player to move)."""
        self._check()
        if player is None:
            player = self.current_player()
        player = _check_int(player, "player", 0, self.num_players - 1)
        out = np.zeros(self.game.spec.obs_size, dtype=np.float32)
        cdef float[::1] view = out
        self.game.spec.observe(self.data, <int32_t>player, &view[0])
        return out.reshape(self.game.observation_shape)

    def __str__(self):
        self._check()
        cdef int32_t needed = self.game.spec.render(self.data, NULL, 0)
        cdef bytearray text = bytearray(needed + 1)
        self.game.spec.render(self.data, <char*>text, needed + 1)
        return text[:needed].decode()

    def __eq__(self, other):
        self._check()
        if not isinstance(other, GameState) or (<GameState>other).game != self.game:
            return NotImplemented
        return memcmp(self.data, (<GameState>other).data, self.game.spec.state_size) == 0

    __hash__ = None

    def __repr__(self):
        self._check()
        return f"<{self.game.name} state, player {self.current_player()} to move>\n{self}"


cdef _check_state(Game game, state, str name):
    if not isinstance(state, GameState):
        raise TypeError(f"{name} must be a GameState, got {type(state).__name__}")
    (<GameState>state)._check()
    if (<GameState>state).game != game:
        raise ValueError(f"{name} is a {(<GameState>state).game.name} state, expected {game.name}")


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
    cdef object _observations, _masks, _rows_game, _active
    cdef bint _busy  # inside search(): the evaluator must not touch this object

    def __init__(self, game, batch_size, num_simulations=800, c_base=19652.0, c_init=1.25,
                 dirichlet_alpha=0.3, dirichlet_epsilon=0.25, normalize_values=False, max_nodes=None, seed=0):
        if not isinstance(game, Game):
            raise TypeError(f"game must be a puffercore.games.Game, got {type(game).__name__}")
        self.game = game
        self.batch_size = _check_int(batch_size, "batch_size", 1, 2**20)
        self.num_simulations = _check_int(num_simulations, "num_simulations", 1, 2**30)
        cdef int32_t num_actions = game.num_actions
        if max_nodes is None:  # room for a full search plus an equally big reused subtree
            max_nodes = min(2 * (self.num_simulations + 1) * num_actions + 1, 2**31 - 1)
        self.max_nodes = _check_int(max_nodes, "max_nodes", num_actions + 1, 2**31 - 1)
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
        if isinstance(seed, (list, tuple, np.ndarray)):
            if len(seed) != self.batch_size:
                raise ValueError(f"seed must be an int or {self.batch_size} ints (one per game), got {len(seed)}")
            seeds = [_check_int(s, f"seed[{i}]", 0, _MAX_SEED) for i, s in enumerate(seed)]
        else:
            base = _check_int(seed, "seed", 0, _MAX_SEED)
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
        return _check_int(i, "i", 0, self.batch_size - 1)

    def search(self, states, evaluator):
        """Search every game; `states[i]` None skips game i. Returns float32 [B, A]
        visit-count policies (rows of skipped games are zero)."""
        if self._busy:
            raise RuntimeError("BatchedMCTS is in the middle of search(); the evaluator must not use it")
        self._busy = True
        try:
            return self._search(states, evaluator)
        finally:
            self._busy = False

    cdef object _search(self, states, evaluator):
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
                mcts_set_root(&self.m, i, (<GameState>state).data)
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
            priors = self._check_output(priors, "priors", (rows, self.game.num_actions))
            values = self._check_output(values, "values", (rows, None))
            if values.shape[1] < value_width:
                raise ValueError(f"evaluator values must have >= {value_width} columns (one per player), "
                                 f"got shape {values.shape}")
            if (priors < 0).any():
                raise ValueError("evaluator priors must be >= 0")
            priors_view = priors
            values_view = values
            with nogil:
                mcts_expand_leaves(&self.m, rows, &masks[0, 0], &rows_game[0], &priors_view[0, 0],
                                   &values_view[0, 0], <int32_t>values_view.shape[1])
        counts = np.zeros((self.batch_size, self.game.num_actions), dtype=np.int32)
        cdef int32_t[:, ::1] counts_view = counts
        for i in np.flatnonzero(self._active):
            mcts_visit_counts(&self.m, i, &counts_view[i, 0])
        totals = counts.sum(axis=1, keepdims=True)
        return (counts / np.maximum(totals, 1)).astype(np.float32)

    def root_values(self, i):
        """float32 [num_actions, num_players]: mean backed-up value of each root child
        by seat (0 for unvisited or illegal actions)."""
        root = self.root_state(i)
        width = root.num_players if root is not None else self.game.max_players
        values = np.zeros((self.game.num_actions, width), dtype=np.float32)
        cdef float[:, ::1] view = values
        mcts_root_values(&self.m, i, &view[0, 0], width)
        return values

    def visit_counts(self, i):
        """int32 [num_actions]: visits of game i's root children (reused ones included)."""
        i = self._check_index(i)
        counts = np.zeros(self.game.num_actions, dtype=np.int32)
        cdef int32_t[::1] view = counts
        if mcts_has_tree(&self.m, i):
            mcts_visit_counts(&self.m, i, &view[0])
        return counts

    @staticmethod
    def _check_output(array, name, shape):
        array = np.ascontiguousarray(array, dtype=np.float32)
        if array.ndim != 2 or array.shape[0] != shape[0] or (shape[1] is not None and array.shape[1] != shape[1]):
            expected = f"[{shape[0]}, {shape[1] if shape[1] is not None else 'num_players'}]"
            raise ValueError(f"evaluator {name} must have shape {expected}, got {array.shape}")
        if not np.isfinite(array).all():
            raise ValueError(f"evaluator {name} must be finite")
        return array

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
        action = _check_int(action, "action", 0, self.game.num_actions - 1)
        root = self.root_state(i)
        if root is None:
            raise ValueError(f"game {i} has no tree to advance; search() or reset(i, state) first")
        if root.is_terminal() or not root.legal_mask()[action]:
            raise ValueError(f"action {action} is not legal at game {i}'s root")
        mcts_advance(&self.m, i, action)

    def reset(self, i, state=None):
        """Forget game i's tree; with `state`, plant a fresh root there."""
        i = self._check_index(i)
        mcts_drop_tree(&self.m, i)
        if state is not None:
            _check_state(self.game, state, "state")
            mcts_set_root(&self.m, i, (<GameState>state).data)
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
    simulations = _check_int(simulations, "simulations", 1, 2**24)
    cdef float c = _check_float(uct_c, "uct_c", 0.0)
    cdef uint64_t seed_value = _check_int(seed, "seed", 0, _MAX_SEED)
    cdef GameState root = state
    visits = np.zeros(root.game.num_actions, dtype=np.int32)
    cdef int32_t[::1] visits_view = visits
    cdef int32_t sims = simulations, action
    with nogil:
        action = uct_search(root.game.spec, root.data, sims, c, seed_value, &visits_view[0])
    if action < 0:
        raise MemoryError(f"cannot allocate the UCT tree for {simulations} simulations")
    return int(action), visits
