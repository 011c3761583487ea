# cython: language_level=3, boundscheck=False, wraparound=False
"""Python views of C games (puffercore/game.h): `Game` and `GameState`, and the specs of
the games built in (Connect4, TicTacToe, Pig). Search code (native/mcts/search.pyx)
cimports these classes through puffercore/_games.pxd to reach a state's bytes and its
game's spec without Python calls.

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

from puffercore.checks import check_int

from puffercore._games cimport PC_GAME_ABI_VERSION, PC_GAME_MAX_PLAYERS, PcGameSpec

cdef extern from "puffercore/games/connect4.h":
    const PcGameSpec CONNECT4_GAME

cdef extern from "puffercore/games/tictactoe.h":
    const PcGameSpec TICTACTOE_GAME

cdef extern from "puffercore/games/pig.h":
    const PcGameSpec PIG_GAME

MAX_PLAYERS = PC_GAME_MAX_PLAYERS
MAX_ACTIONS = 32767  # search nodes store int16 actions
cdef const char* SPEC_CAPSULE_NAME = "puffercore.PcGameSpec"
MAX_SEED = 2**64 - 1


def connect4_spec():
    return PyCapsule_New(<void*>&CONNECT4_GAME, SPEC_CAPSULE_NAME, NULL)


def tictactoe_spec():
    return PyCapsule_New(<void*>&TICTACTOE_GAME, SPEC_CAPSULE_NAME, NULL)


def pig_spec():
    return PyCapsule_New(<void*>&PIG_GAME, SPEC_CAPSULE_NAME, NULL)


cdef class Game:
    """A C game seen from Python: `Game(spec_capsule).new_state(seed, num_players)`.

    A subclass may set `state_class` (a GameState subclass with game-specific views) and,
    to let `state_from_bytes` build states, override `check_state_bytes`."""

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
        seed = check_int(seed, "seed", 0, MAX_SEED)
        if num_players is None:
            num_players = self._spec().min_players
        num_players = check_int(num_players, "num_players", self._spec().min_players, self._spec().max_players)
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
        action = check_int(action, "action", 0, self.game.spec.num_actions - 1)
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
        player = check_int(player, "player", 0, self.num_players - 1)
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
