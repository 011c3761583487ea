# Cython declarations of the games extension, puffercore._games (native/games/games.pyx):
# the game ABI (puffercore/game.h) and the Game / GameState classes. Search code
# (native/mcts/search.pyx) cimports them to reach a game's spec and a state's bytes
# directly: `from puffercore._games cimport Game, GameState, PcGameSpec`.

from libc.stdint cimport int32_t, uint8_t, uint64_t

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


cdef class GameState


cdef class Game:
    cdef const PcGameSpec* spec  # NULL until __init__ (Game.__new__(Game) is refused by _spec)
    cdef const PcGameSpec* _spec(self) except NULL
    cdef GameState _blank_state(self)


cdef class GameState:
    cdef readonly Game game
    cdef unsigned char* data  # spec.state_size bytes; NULL unless made by a Game
    cdef _check(self)
    cdef _allocate(self, Game game)
