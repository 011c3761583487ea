# cython: language_level=3, boundscheck=False, wraparound=False
"""Azul's native side (native/include/puffercore/games/azul.h): the game spec, decoding and
encoding of raw states, the greedy bot and native random playouts. The Python view is
puffercore.azul; these functions take a state's raw bytes (any buffer)."""

from cpython.pycapsule cimport PyCapsule_New
from libc.stdint cimport int8_t, int16_t, int32_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memset

import numpy as np

from puffercore.checks import check_int

cdef extern from "puffercore/game.h":
    enum: PC_GAME_MAX_PLAYERS
    ctypedef struct PcGameSpec:
        pass
    ctypedef struct PcRng:
        uint64_t state
        uint64_t inc
    void pc_rng_seed(PcRng* rng, uint64_t seed, uint64_t stream) nogil
    uint32_t pc_rng_below(PcRng* rng, uint32_t bound) nogil
    uint32_t pc_rng_next(PcRng* rng) nogil

cdef extern from "puffercore/games/azul.h" nogil:
    enum:
        AZUL_COLORS
        AZUL_ROWS
        AZUL_MAX_FACTORIES
        AZUL_NUM_ACTIONS
        AZUL_MAX_MOVES
    ctypedef struct AzulBoard:
        int8_t line_color[5]
        int8_t line_count[5]
        uint8_t wall[5]
        int8_t floor[5]
        int16_t score
    ctypedef struct Azul:
        PcRng rng
        int8_t bag[5]
        int8_t lid[5]
        int8_t factories[9][5]
        int8_t centre[5]
        int8_t marker_holder
        int8_t num_players
        int8_t num_factories
        int8_t player
        int8_t round_starter
        int8_t game_over
        int16_t round
        int16_t moves
        AzulBoard boards[4]
    const PcGameSpec AZUL_GAME
    const char* azul_invalid(const Azul* azul)
    int azul_winners(const Azul* azul)
    int azul_factories_for(int num_players)
    void azul_init(Azul* azul, uint64_t seed, int32_t num_players)
    void azul_legal_mask(const Azul* azul, uint8_t* out)
    void azul_play(Azul* azul, int32_t action)
    int azul_is_over(const Azul* azul)

cdef extern from "puffercore/games/azul_greedy.h" nogil:
    int32_t azul_greedy_action(const Azul* azul)

STATE_SIZE = sizeof(Azul)
NUM_ACTIONS = AZUL_NUM_ACTIONS
MAX_MOVES = AZUL_MAX_MOVES

# Scalar fields and their C ranges (the encoder refuses values the C type cannot hold).
_INT8 = (-128, 127)
_INT16 = (-32768, 32767)


def azul_spec():
    return PyCapsule_New(<void*>&AZUL_GAME, "puffercore.PcGameSpec", NULL)


cdef const Azul* _sized(const unsigned char[::1] data) except NULL:
    if data.shape[0] != sizeof(Azul):
        raise ValueError(f"an Azul state has {sizeof(Azul)} bytes, got {data.shape[0]}")
    return <const Azul*>&data[0]


cdef const Azul* _azul(const unsigned char[::1] data) except NULL:
    """The state in `data`, checked, so no rule code ever reads out of range."""
    cdef const Azul* azul = _sized(data)
    cdef const char* reason = azul_invalid(azul)
    if reason != NULL:
        raise ValueError(f"not a consistent Azul state: {reason.decode()}")
    return azul


def invalid_reason(const unsigned char[::1] data):
    """None for a consistent Azul state, else what is wrong with it."""
    reason = azul_invalid(_sized(data))
    return None if reason == NULL else reason.decode()


def winners(const unsigned char[::1] data):
    """Seats sharing the win: highest score, ties to more complete wall rows."""
    cdef const Azul* azul = _azul(data)
    bits = azul_winners(azul)
    return [seat for seat in range(azul.num_players) if bits >> seat & 1]


def greedy_action(const unsigned char[::1] data):
    """The greedy bot's move (azul_greedy.h) for the player to move; -1 once the game is over."""
    return int(azul_greedy_action(_azul(data)))


cdef _counts(const int8_t* values, int length):
    return np.array([values[k] for k in range(length)], dtype=np.int64)


def fields(const unsigned char[::1] data):
    """Every field of a state as Python ints and NumPy arrays (walls as bool [n, 5, 5])."""
    cdef const Azul* azul = _azul(data)
    cdef int n = azul.num_players, f, p, row, col
    wall = np.zeros((n, AZUL_ROWS, AZUL_ROWS), dtype=bool)
    for p in range(n):
        for row in range(AZUL_ROWS):
            for col in range(AZUL_ROWS):
                wall[p, row, col] = azul.boards[p].wall[row] >> col & 1
    return {
        "num_players": n,
        "player": azul.player,
        "round_starter": azul.round_starter,
        "marker_holder": azul.marker_holder,
        "game_over": bool(azul.game_over),
        "round": azul.round,
        "moves": azul.moves,
        "rng": (int(azul.rng.state), int(azul.rng.inc)),
        "bag": _counts(azul.bag, AZUL_COLORS),
        "lid": _counts(azul.lid, AZUL_COLORS),
        "factories": np.array([_counts(azul.factories[f], AZUL_COLORS) for f in range(azul.num_factories)])
                     .reshape(azul.num_factories, AZUL_COLORS),
        "centre": _counts(azul.centre, AZUL_COLORS),
        "line_color": np.array([_counts(azul.boards[p].line_color, AZUL_ROWS) for p in range(n)]),
        "line_count": np.array([_counts(azul.boards[p].line_count, AZUL_ROWS) for p in range(n)]),
        "wall": wall,
        "floor": np.array([_counts(azul.boards[p].floor, AZUL_COLORS) for p in range(n)]),
        "score": np.array([azul.boards[p].score for p in range(n)], dtype=np.int64),
    }


def _array(values, name, shape, low, high):
    array = np.asarray(values)
    if array.shape != shape:
        raise ValueError(f"fields[{name!r}] must have shape {shape}, got {array.shape}")
    if array.dtype.kind not in "biu":
        raise TypeError(f"fields[{name!r}] must hold integers, got dtype {array.dtype}")
    if array.size and (array.min() < low or array.max() > high):
        raise ValueError(f"fields[{name!r}] must lie in [{low}, {high}]")
    return array.astype(np.int64)


def _int(fields, name, low, high):
    return check_int(fields[name], f"fields[{name!r}]", low, high)


def encode(dict fields):
    """The raw bytes of the state `fields` (as from `fields()`) describes. Checks each
    field's shape and C range only; the rules' consistency is azul_invalid's job."""
    missing = {"num_players", "player", "round_starter", "marker_holder", "game_over", "round", "moves", "rng",
               "bag", "lid", "factories", "centre", "line_color", "line_count", "wall", "floor",
               "score"} - set(fields)
    if missing:
        raise ValueError(f"fields is missing {sorted(missing)}")
    n = _int(fields, "num_players", 2, PC_GAME_MAX_PLAYERS)
    cdef Azul azul
    memset(&azul, 0, sizeof(Azul))
    azul.num_players = n
    azul.num_factories = azul_factories_for(n)
    azul.player = _int(fields, "player", *_INT8)
    azul.round_starter = _int(fields, "round_starter", *_INT8)
    azul.marker_holder = _int(fields, "marker_holder", *_INT8)
    if not isinstance(fields["game_over"], (bool, np.bool_)):
        raise TypeError(f"fields['game_over'] must be a bool, got {fields['game_over']!r}")
    azul.game_over = fields["game_over"]
    azul.round = _int(fields, "round", *_INT16)
    azul.moves = _int(fields, "moves", *_INT16)
    rng = fields["rng"]
    if not (isinstance(rng, tuple) and len(rng) == 2 and all(isinstance(v, (int, np.integer)) for v in rng)
            and all(0 <= v < 2**64 for v in rng)):
        raise ValueError("fields['rng'] must be a (state, increment) pair of uint64 ints")
    azul.rng.state, azul.rng.inc = rng
    cdef int c, f, p, row, col
    bag = _array(fields["bag"], "bag", (AZUL_COLORS,), *_INT8)
    lid = _array(fields["lid"], "lid", (AZUL_COLORS,), *_INT8)
    centre = _array(fields["centre"], "centre", (AZUL_COLORS,), *_INT8)
    factories = _array(fields["factories"], "factories", (azul.num_factories, AZUL_COLORS), *_INT8)
    line_color = _array(fields["line_color"], "line_color", (n, AZUL_ROWS), *_INT8)
    line_count = _array(fields["line_count"], "line_count", (n, AZUL_ROWS), *_INT8)
    wall = _array(fields["wall"], "wall", (n, AZUL_ROWS, AZUL_ROWS), 0, 1)
    floor = _array(fields["floor"], "floor", (n, AZUL_COLORS), *_INT8)
    score = _array(fields["score"], "score", (n,), *_INT16)
    for c in range(AZUL_COLORS):
        azul.bag[c] = bag[c]
        azul.lid[c] = lid[c]
        azul.centre[c] = centre[c]
        for f in range(azul.num_factories):
            azul.factories[f][c] = factories[f, c]
    for p in range(n):
        azul.boards[p].score = score[p]
        for row in range(AZUL_ROWS):
            azul.boards[p].line_color[row] = line_color[p, row]
            azul.boards[p].line_count[row] = line_count[p, row]
            azul.boards[p].floor[row] = floor[p, row]
            for col in range(AZUL_ROWS):
                azul.boards[p].wall[row] |= <uint8_t>(wall[p, row, col] << col)
    return (<unsigned char*>&azul)[:sizeof(Azul)]


def random_games(int num_games, int num_players, uint64_t seed, bint check=True):
    """Play `num_games` games of uniformly random legal moves natively (game g seeded from
    (seed, g)). With `check`, every position is checked with azul_invalid. Returns a dict:
    games, moves, longest (moves of the longest game), capped (games that hit the move
    cap), invalid (the first inconsistency found, or None), mean_scores [num_players]."""
    if num_games < 1:
        raise ValueError(f"num_games must be >= 1, got {num_games}")
    if not 2 <= num_players <= PC_GAME_MAX_PLAYERS:
        raise ValueError(f"num_players must be 2, 3 or 4, got {num_players}")
    cdef Azul azul
    cdef PcRng moves_rng
    cdef uint8_t legal[AZUL_NUM_ACTIONS]
    cdef int32_t action
    cdef long total_moves = 0
    cdef int longest = 0, capped = 0, g, p
    cdef const char* invalid = NULL
    cdef double score_sums[4]
    memset(score_sums, 0, sizeof(score_sums))
    with nogil:
        for g in range(num_games):
            pc_rng_seed(&moves_rng, seed, <uint64_t>g)
            azul_init(&azul, (<uint64_t>pc_rng_next(&moves_rng) << 32) | pc_rng_next(&moves_rng), num_players)
            while not azul_is_over(&azul):
                azul_legal_mask(&azul, legal)
                # uniform over the legal moves by rejection: a few draws beat a pass over all 300
                action = pc_rng_below(&moves_rng, AZUL_NUM_ACTIONS)
                while not legal[action]:
                    action = pc_rng_below(&moves_rng, AZUL_NUM_ACTIONS)
                azul_play(&azul, action)
                if check and invalid == NULL:
                    invalid = azul_invalid(&azul)
            total_moves += azul.moves
            longest = max(longest, azul.moves)
            capped += not azul.game_over
            for p in range(num_players):
                score_sums[p] += azul.boards[p].score
    return {
        "games": num_games,
        "moves": int(total_moves),
        "longest": longest,
        "capped": capped,
        "invalid": None if invalid == NULL else invalid.decode(),
        "mean_scores": [score_sums[p] / num_games for p in range(num_players)],
    }
