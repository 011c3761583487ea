/* Azul (Michael Kiesling, Plan B Games, 2017) for 2-4 players, the published rules on
 * the game ABI of puffercore/game.h.
 *
 * Tiles: 100, 20 of each colour (0 blue, 1 yellow, 2 red, 3 black, 4 white), kept as
 * counts per colour everywhere except the wall. A round: 5/7/9 factories (2/3/4 players)
 * get 4 tiles each from the bag (refilled from the lid when it runs out; with both empty
 * the factories are filled as far as possible); the first-player marker goes to the
 * centre. A move takes every tile of one colour from one factory (the rest go to the
 * centre) or from the centre (the first to do so also takes the marker onto their floor
 * line) and puts them on one pattern line (line r holds r + 1 tiles of one colour, and
 * not a colour already in wall row r) or on the floor line; what does not fit on the line
 * falls to the floor, and what does not fit on the floor's 7 slots goes to the lid.
 * When factories and centre are empty, each player moves one tile of every full pattern
 * line to the wall, top line first (colour c in row r sits in column (c + r) mod 5), the
 * rest of the line to the lid, and scores it: 1 for an isolated tile, else the horizontal
 * run through it (if longer than 1) plus the vertical run (if longer than 1). Then the
 * floor costs -1 -1 -2 -2 -2 -3 -3 for its slots in order (the marker fills a slot but
 * never goes to the lid; on a full floor it fills none), scores never drop below 0, the
 * floor tiles go to the lid and the marker holder starts the next round. The game ends
 * after the round in which someone completes a wall row: +2 per complete row, +7 per
 * complete column, +10 per colour with all 5 tiles on the wall. Highest score wins; ties
 * go to more complete rows, then are shared (azul_winners).
 *
 * Where the rulebook is silent: if nobody took from the centre in a round (every
 * factory held one colour), the marker never left the centre and the same player starts
 * again; if a new round would start without a single tile to draw (every tile stuck on
 * walls and pattern lines, possible with 4 players) the game ends there, with the
 * end-of-game bonuses; and a game ends after AZUL_MAX_MOVES actions, its scores as they
 * stand, without bonuses (a safety cap, see below).
 *
 * Action = (source * 5 + colour) * 6 + destination, for every player count:
 * source 0-8 a factory (those past num_factories are never legal), 9 the centre;
 * destination 0-4 a pattern line, 5 the floor.
 *
 * returns: (score_i - mean score) / 100 by seat, zero-sum, ordered like the scores. In
 * a 2-player game they are +-(margin / 200): positive for the score winner, 0 each on a
 * score tie. The highest return always marks a highest score, but a score tie that the
 * complete-rows rule breaks still shows equal returns: azul_winners is the official
 * result. The values follow the scores during play too, not only at the end. */
#ifndef PUFFERCORE_GAMES_AZUL_H
#define PUFFERCORE_GAMES_AZUL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "puffercore/game.h"

#define AZUL_COLORS 5
#define AZUL_ROWS 5 /* wall rows = wall columns = pattern lines */
#define AZUL_TILES_PER_COLOR 20
#define AZUL_TILES_PER_FACTORY 4
#define AZUL_MAX_FACTORIES 9
#define AZUL_CENTRE AZUL_MAX_FACTORIES /* source index of the centre */
#define AZUL_SOURCES (AZUL_MAX_FACTORIES + 1)
#define AZUL_FLOOR AZUL_ROWS /* destination index of the floor line */
#define AZUL_DESTINATIONS (AZUL_ROWS + 1)
#define AZUL_NUM_ACTIONS (AZUL_SOURCES * AZUL_COLORS * AZUL_DESTINATIONS)
#define AZUL_FLOOR_SLOTS 7
#define AZUL_FULL_ROW 0x1F
#define AZUL_NO_COLOR (-1)
#define AZUL_MARKER_IN_CENTRE (-1)
/* Random 2-player games take 70 moves on average (166 at most in 10^5), 4-player ones 108
 * (371). The cap stops endless play: everyone dumping tiles on the floor, or (about 1 in
 * 10^5 random 4-player games) all 20 tiles of the one colour every wall row still needs
 * stuck on pattern lines that can never be finished. */
#define AZUL_MAX_MOVES 1000

/* Observation (floats, by the observer's perspective): the shared part, then one block
 * per seat starting with the observer's (zeros for seats a smaller game lacks). */
#define AZUL_OBS_SHARED (AZUL_MAX_FACTORIES * AZUL_COLORS + 3 * AZUL_COLORS + 1 + PC_GAME_MAX_PLAYERS + 3)
#define AZUL_OBS_PLAYER (3 * AZUL_ROWS * AZUL_COLORS + AZUL_ROWS + 6)
#define AZUL_OBS_SIZE (AZUL_OBS_SHARED + PC_GAME_MAX_PLAYERS * AZUL_OBS_PLAYER)

typedef struct AzulBoard {
    int8_t line_color[AZUL_ROWS]; /* colour on pattern line r, or AZUL_NO_COLOR when empty */
    int8_t line_count[AZUL_ROWS]; /* tiles on pattern line r, 0..r+1 */
    uint8_t wall[AZUL_ROWS];      /* bit col of row r: a tile at (r, col), of colour (col - r) mod 5 */
    int8_t floor[AZUL_COLORS];    /* tiles on the floor line by colour (the marker is not a tile) */
    int16_t score;
} AzulBoard;

typedef struct Azul {
    PcRng rng; /* tile draws */
    int8_t bag[AZUL_COLORS];
    int8_t lid[AZUL_COLORS];
    int8_t factories[AZUL_MAX_FACTORIES][AZUL_COLORS];
    int8_t centre[AZUL_COLORS];
    int8_t marker_holder; /* seat holding the first-player marker, or AZUL_MARKER_IN_CENTRE */
    int8_t num_players;
    int8_t num_factories;
    int8_t player;        /* seat to move */
    int8_t round_starter; /* seat that moved first this round */
    int8_t game_over;
    int16_t round; /* rounds started, 1 in the first */
    int16_t moves;
    AzulBoard boards[PC_GAME_MAX_PLAYERS];
} Azul;

static const int8_t AZUL_FLOOR_PENALTY[AZUL_FLOOR_SLOTS] = {1, 1, 2, 2, 2, 3, 3};

/* ---- actions and small queries -------------------------------------------------------- */

static inline int32_t azul_action(int source, int color, int destination) {
    return (source * AZUL_COLORS + color) * AZUL_DESTINATIONS + destination;
}
static inline int azul_action_source(int32_t action) { return action / (AZUL_COLORS * AZUL_DESTINATIONS); }
static inline int azul_action_color(int32_t action) { return action / AZUL_DESTINATIONS % AZUL_COLORS; }
static inline int azul_action_destination(int32_t action) { return action % AZUL_DESTINATIONS; }

static inline int azul_wall_column(int row, int color) { return (color + row) % AZUL_COLORS; }

static inline int azul_factories_for(int num_players) { return 2 * num_players + 1; }

/* Tiles of each colour on offer at `source` (a factory row or the centre). */
static inline const int8_t* azul_source(const Azul* azul, int source) {
    return source == AZUL_CENTRE ? azul->centre : azul->factories[source];
}

static inline int azul_sum(const int8_t* counts) {
    int total = 0;
    for (int c = 0; c < AZUL_COLORS; c++) total += counts[c];
    return total;
}

static inline int azul_popcount(unsigned bits) {
    int n = 0;
    for (; bits; bits &= bits - 1) n++;
    return n;
}

/* Floor slots in use: tiles plus the marker, 7 at most. */
static inline int azul_floor_slots(const Azul* azul, int seat) {
    int slots = azul_sum(azul->boards[seat].floor) + (azul->marker_holder == seat);
    return slots < AZUL_FLOOR_SLOTS ? slots : AZUL_FLOOR_SLOTS;
}

/* Points lost for the first `slots` floor slots. */
static inline int azul_floor_penalty(int slots) {
    int penalty = 0;
    for (int k = 0; k < slots && k < AZUL_FLOOR_SLOTS; k++) penalty += AZUL_FLOOR_PENALTY[k];
    return penalty;
}

/* Colours pattern line `row` of `board` accepts, as bits: none when full, its own colour
 * while filling, and when empty every colour not yet in that wall row (colour c lies in
 * column (c + row) mod 5, so the row's colours are its column bits rotated by `row`). */
static inline unsigned azul_line_colors(const AzulBoard* board, int row) {
    if (board->line_count[row] == row + 1) return 0;
    if (board->line_count[row] > 0) return 1u << board->line_color[row];
    unsigned wall = board->wall[row];
    return ~((wall >> row) | (wall << (AZUL_ROWS - row))) & AZUL_FULL_ROW;
}

/* Points for a tile just placed at (row, col) of `wall` (which already contains it). */
static inline int azul_placement_points(const uint8_t* wall, int row, int col) {
    int left = col, right = col, up = row, down = row;
    while (left > 0 && (wall[row] >> (left - 1) & 1u)) left--;
    while (right < AZUL_ROWS - 1 && (wall[row] >> (right + 1) & 1u)) right++;
    while (up > 0 && (wall[up - 1] >> col & 1u)) up--;
    while (down < AZUL_ROWS - 1 && (wall[down + 1] >> col & 1u)) down++;
    int horizontal = right - left + 1, vertical = down - up + 1;
    if (horizontal == 1 && vertical == 1) return 1;
    return (horizontal > 1 ? horizontal : 0) + (vertical > 1 ? vertical : 0);
}

/* End-of-game bonuses of a wall: +2 per full row, +7 per full column, +10 per full colour. */
static inline int azul_wall_bonus(const uint8_t* wall) {
    int bonus = 0;
    uint8_t columns = AZUL_FULL_ROW;
    for (int row = 0; row < AZUL_ROWS; row++) {
        bonus += 2 * (wall[row] == AZUL_FULL_ROW);
        columns &= wall[row];
    }
    bonus += 7 * azul_popcount(columns);
    for (int color = 0; color < AZUL_COLORS; color++) {
        int complete = 1;
        for (int row = 0; row < AZUL_ROWS; row++) complete &= wall[row] >> azul_wall_column(row, color) & 1u;
        bonus += 10 * complete;
    }
    return bonus;
}

/* Points and end-of-game bonuses a tile of `color` on `row` would earn on `wall` (which
 * lacks it). */
static inline int azul_tile_value(const uint8_t* wall, int row, int color) {
    uint8_t after[AZUL_ROWS];
    memcpy(after, wall, sizeof(after));
    int col = azul_wall_column(row, color);
    after[row] |= (uint8_t)(1u << col);
    return azul_placement_points(after, row, col) + azul_wall_bonus(after) - azul_wall_bonus(wall);
}

static inline int azul_full_rows(const uint8_t* wall) {
    int rows = 0;
    for (int row = 0; row < AZUL_ROWS; row++) rows += wall[row] == AZUL_FULL_ROW;
    return rows;
}

/* Seats sharing the win as bits (bit p = seat p): highest score, then most full rows. */
static inline int azul_winners(const Azul* azul) {
    int best_score = -1, best_rows = -1, winners = 0;
    for (int p = 0; p < azul->num_players; p++) {
        int score = azul->boards[p].score, rows = azul_full_rows(azul->boards[p].wall);
        if (score > best_score || (score == best_score && rows > best_rows)) {
            best_score = score;
            best_rows = rows;
            winners = 0;
        }
        if (score == best_score && rows == best_rows) winners |= 1 << p;
    }
    return winners;
}

/* NULL when `azul` is a consistent position (every field in range, 20 tiles of each colour,
 * no pattern line holding a colour its wall row has), else what is wrong. Bindings check
 * states built from outside (hand-built test positions) with it before any rule runs. */
static inline const char* azul_invalid(const Azul* azul) {
    static const AzulBoard unused_board;
    const int n = azul->num_players;
    if (n < 2 || n > PC_GAME_MAX_PLAYERS) return "num_players must be 2, 3 or 4";
    if (azul->num_factories != azul_factories_for(n)) return "num_factories must be 2 * num_players + 1";
    if (azul->player < 0 || azul->player >= n) return "player must be a seat";
    if (azul->round_starter < 0 || azul->round_starter >= n) return "round_starter must be a seat";
    if (azul->marker_holder < AZUL_MARKER_IN_CENTRE || azul->marker_holder >= n)
        return "marker_holder must be a seat or -1 (in the centre)";
    if (azul->game_over != 0 && azul->game_over != 1) return "game_over must be 0 or 1";
    if (azul->round < 1 || azul->moves < 0 || azul->moves > AZUL_MAX_MOVES) return "round or moves out of range";
    if (!(azul->rng.inc & 1u)) return "rng increment must be odd";
    int per_color[AZUL_COLORS] = {0};
    const int8_t* piles[3] = {azul->bag, azul->lid, azul->centre};
    for (int c = 0; c < AZUL_COLORS; c++) {
        for (int k = 0; k < 3; k++) {
            if (piles[k][c] < 0) return "tile counts must be >= 0";
            per_color[c] += piles[k][c];
        }
        for (int f = 0; f < AZUL_MAX_FACTORIES; f++) {
            if (azul->factories[f][c] < 0) return "tile counts must be >= 0";
            per_color[c] += azul->factories[f][c];
        }
    }
    for (int f = 0; f < AZUL_MAX_FACTORIES; f++) {
        int tiles = azul_sum(azul->factories[f]);
        if (tiles > AZUL_TILES_PER_FACTORY) return "a factory holds at most 4 tiles";
        if (f >= azul->num_factories && tiles) return "factories past num_factories must be empty";
    }
    for (int p = 0; p < PC_GAME_MAX_PLAYERS; p++) {
        const AzulBoard* board = &azul->boards[p];
        if (p >= n) {
            if (memcmp(board, &unused_board, sizeof(*board))) return "boards of absent seats must be zero";
            continue;
        }
        if (board->score < 0) return "score must be >= 0";
        int floor_tiles = 0;
        for (int c = 0; c < AZUL_COLORS; c++) {
            if (board->floor[c] < 0) return "tile counts must be >= 0";
            floor_tiles += board->floor[c];
            per_color[c] += board->floor[c];
        }
        if (floor_tiles > AZUL_FLOOR_SLOTS) return "a floor line holds at most 7 tiles";
        for (int row = 0; row < AZUL_ROWS; row++) {
            int color = board->line_color[row], count = board->line_count[row];
            if (board->wall[row] > AZUL_FULL_ROW) return "wall rows have 5 columns";
            for (int col = 0; col < AZUL_ROWS; col++)
                if (board->wall[row] >> col & 1u) per_color[(col - row + AZUL_COLORS) % AZUL_COLORS]++;
            if (count < 0 || count > row + 1) return "pattern line r holds 0..r+1 tiles";
            if ((count == 0) != (color == AZUL_NO_COLOR))
                return "a pattern line has a colour exactly when it has tiles";
            if (count == 0) continue;
            if (color < 0 || color >= AZUL_COLORS) return "line colours are 0..4 or -1";
            if (board->wall[row] >> azul_wall_column(row, color) & 1u)
                return "a pattern line cannot hold a colour its wall row already has";
            per_color[color] += count;
        }
    }
    for (int c = 0; c < AZUL_COLORS; c++)
        if (per_color[c] != AZUL_TILES_PER_COLOR) return "every colour must have exactly 20 tiles in the game";
    return NULL;
}

/* ---- the round -------------------------------------------------------------------------- */

/* One tile from the bag (refilled from the lid when empty); its colour, or AZUL_NO_COLOR
 * when bag and lid are both empty. */
static inline int azul_draw_tile(Azul* azul) {
    int in_bag = azul_sum(azul->bag);
    if (in_bag == 0) {
        memcpy(azul->bag, azul->lid, sizeof(azul->bag));
        memset(azul->lid, 0, sizeof(azul->lid));
        in_bag = azul_sum(azul->bag);
        if (in_bag == 0) return AZUL_NO_COLOR;
    }
    int pick = (int)pc_rng_below(&azul->rng, (uint32_t)in_bag);
    int color = 0;
    while (pick >= azul->bag[color]) pick -= azul->bag[color++];
    azul->bag[color]--;
    return color;
}

/* Fill the factories, marker to the centre, the marker holder (if any) to move.
 * Returns the tiles drawn. */
static inline int azul_start_round(Azul* azul) {
    int drawn = 0;
    for (int f = 0; f < azul->num_factories; f++)
        for (int k = 0; k < AZUL_TILES_PER_FACTORY; k++) {
            int color = azul_draw_tile(azul);
            if (color == AZUL_NO_COLOR) return drawn;
            azul->factories[f][color]++;
            drawn++;
        }
    return drawn;
}

/* The score `seat` will have after this round's wall-tiling, its wall then in `wall`:
 * full lines to the wall top first, scored as placed, floor penalty, floor at 0. */
static inline int azul_tiled_score(const Azul* azul, int seat, uint8_t* wall) {
    const AzulBoard* board = &azul->boards[seat];
    int score = board->score;
    memcpy(wall, board->wall, AZUL_ROWS);
    for (int row = 0; row < AZUL_ROWS; row++) {
        if (board->line_count[row] != row + 1) continue;
        int col = azul_wall_column(row, board->line_color[row]);
        wall[row] |= (uint8_t)(1u << col);
        score += azul_placement_points(wall, row, col);
    }
    score -= azul_floor_penalty(azul_floor_slots(azul, seat));
    return score > 0 ? score : 0;
}

/* Wall-tiling of one player (azul_tiled_score), then the rest of each full line and the
 * floor tiles to the lid. */
static inline void azul_tile_wall(Azul* azul, int seat) {
    AzulBoard* board = &azul->boards[seat];
    uint8_t wall[AZUL_ROWS];
    board->score = (int16_t)azul_tiled_score(azul, seat, wall);
    memcpy(board->wall, wall, sizeof(wall));
    for (int row = 0; row < AZUL_ROWS; row++) {
        if (board->line_count[row] != row + 1) continue;
        azul->lid[board->line_color[row]] += (int8_t)row;
        board->line_count[row] = 0;
        board->line_color[row] = AZUL_NO_COLOR;
    }
    for (int c = 0; c < AZUL_COLORS; c++) azul->lid[c] += board->floor[c];
    memset(board->floor, 0, sizeof(board->floor));
}

static inline void azul_end_game(Azul* azul) {
    for (int p = 0; p < azul->num_players; p++)
        azul->boards[p].score += (int16_t)azul_wall_bonus(azul->boards[p].wall);
    azul->game_over = 1;
}

static inline void azul_end_round(Azul* azul) {
    int row_completed = 0;
    for (int p = 0; p < azul->num_players; p++) {
        azul_tile_wall(azul, p);
        row_completed |= azul_full_rows(azul->boards[p].wall) > 0;
    }
    /* The marker goes back to the centre (its penalty is paid). Nobody took from the
     * centre when every factory held a single colour: then the marker never left the
     * centre and the same player starts again. */
    if (azul->marker_holder != AZUL_MARKER_IN_CENTRE) azul->round_starter = azul->marker_holder;
    azul->marker_holder = AZUL_MARKER_IN_CENTRE;
    if (row_completed) {
        azul_end_game(azul);
        return;
    }
    azul->player = azul->round_starter;
    azul->round++;
    if (azul_start_round(azul) == 0) azul_end_game(azul); /* no tile left to play: see the top */
}

static inline int azul_round_over(const Azul* azul) {
    if (azul_sum(azul->centre)) return 0;
    for (int f = 0; f < azul->num_factories; f++)
        if (azul_sum(azul->factories[f])) return 0;
    return 1;
}

/* Put `count` tiles of `color` on `seat`'s floor; those past the 7 slots go to the lid. */
static inline void azul_drop_to_floor(Azul* azul, int seat, int color, int count) {
    int room = AZUL_FLOOR_SLOTS - azul_sum(azul->boards[seat].floor) - (azul->marker_holder == seat);
    int kept = count < room ? count : (room > 0 ? room : 0);
    azul->boards[seat].floor[color] += (int8_t)kept;
    azul->lid[color] += (int8_t)(count - kept);
}

/* ---- game ABI ----------------------------------------------------------------------------- */

static inline void azul_init(Azul* azul, uint64_t seed, int32_t num_players) {
    memset(azul, 0, sizeof(*azul));
    pc_rng_seed(&azul->rng, seed, 0);
    azul->num_players = (int8_t)num_players;
    azul->num_factories = (int8_t)azul_factories_for(num_players);
    for (int c = 0; c < AZUL_COLORS; c++) azul->bag[c] = AZUL_TILES_PER_COLOR;
    for (int p = 0; p < num_players; p++) memset(azul->boards[p].line_color, AZUL_NO_COLOR, AZUL_ROWS);
    azul->marker_holder = AZUL_MARKER_IN_CENTRE;
    azul->round = 1;
    azul_start_round(azul);
}

static inline int azul_is_over(const Azul* azul) { return azul->game_over || azul->moves >= AZUL_MAX_MOVES; }

static inline void azul_legal_mask(const Azul* azul, uint8_t* out) {
    memset(out, 0, AZUL_NUM_ACTIONS);
    if (azul_is_over(azul)) return;
    unsigned accepts[AZUL_ROWS];
    for (int row = 0; row < AZUL_ROWS; row++) accepts[row] = azul_line_colors(&azul->boards[azul->player], row);
    /* branch-free over every offered (source, colour): this is the hot loop of playouts */
    for (int source = 0; source < AZUL_SOURCES; source++) {
        if (source < AZUL_CENTRE && source >= azul->num_factories) continue;
        const int8_t* offer = azul_source(azul, source);
        for (int color = 0; color < AZUL_COLORS; color++) {
            uint8_t* moves = out + azul_action(source, color, 0);
            unsigned offered = offer[color] > 0;
            for (int row = 0; row < AZUL_ROWS; row++) moves[row] = (uint8_t)(offered & accepts[row] >> color);
            moves[AZUL_FLOOR] = (uint8_t)offered;
        }
    }
}

/* One legal move for the player to move; ends the round (and maybe the game) when it
 * empties the table. */
static inline void azul_play(Azul* azul, int32_t action) {
    int source = azul_action_source(action), color = azul_action_color(action);
    int destination = azul_action_destination(action), seat = azul->player;
    int8_t* offer = source == AZUL_CENTRE ? azul->centre : azul->factories[source];
    int taken = offer[color];
    offer[color] = 0;
    if (source == AZUL_CENTRE) {
        if (azul->marker_holder == AZUL_MARKER_IN_CENTRE) azul->marker_holder = (int8_t)seat;
    } else {
        for (int c = 0; c < AZUL_COLORS; c++) azul->centre[c] += offer[c];
        memset(offer, 0, AZUL_COLORS);
    }
    int to_floor = taken;
    if (destination != AZUL_FLOOR) {
        AzulBoard* board = &azul->boards[seat];
        int room = destination + 1 - board->line_count[destination];
        int placed = taken < room ? taken : room;
        board->line_color[destination] = (int8_t)color;
        board->line_count[destination] += (int8_t)placed;
        to_floor -= placed;
    }
    azul_drop_to_floor(azul, seat, color, to_floor);
    azul->moves++;
    if (azul_round_over(azul))
        azul_end_round(azul);
    else
        azul->player = (int8_t)((seat + 1) % azul->num_players);
}

/* 412 floats. Shared (68): factories [9][5] / 4, centre [5] / 20, bag [5] / 20, lid [5] / 20,
 * marker in the centre, seat to move one-hot [4] (relative to the observer), player count
 * one-hot [3]. Then per seat (86 each; observer first, then turn order, zeros for absent
 * seats): pattern lines [5 rows][5 colours] = tiles / line length, wall [5][5] (0/1),
 * floor tiles / 7, holds the marker, score / 100; what this round's wall-tiling would
 * leave if the round ended now: score / 100, the wall's end-of-game bonus / 100, whether
 * a wall row is full (the game ends); the colours each pattern line takes [5][5] (0/1);
 * for each unfinished line, what finishing it would score on that wall / 20 [5]. A
 * network could learn these from the bits above, but the rules make them deep functions
 * of the bits, and computed they make the value's main term, the score margin to come,
 * and the moves' worth nearly linear in the input (the A/Bs: docs/experiments/2026-11-alphazero.md). */
static inline void azul_observe(const Azul* azul, int32_t observer, float* out) {
    memset(out, 0, AZUL_OBS_SIZE * sizeof(float));
    const int n = azul->num_players;
    float* at = out;
    for (int f = 0; f < AZUL_MAX_FACTORIES; f++)
        for (int c = 0; c < AZUL_COLORS; c++) *at++ = azul->factories[f][c] / (float)AZUL_TILES_PER_FACTORY;
    const int8_t* piles[3] = {azul->centre, azul->bag, azul->lid};
    for (int k = 0; k < 3; k++)
        for (int c = 0; c < AZUL_COLORS; c++) *at++ = piles[k][c] / (float)AZUL_TILES_PER_COLOR;
    *at++ = azul->marker_holder == AZUL_MARKER_IN_CENTRE;
    at[(azul->player - observer + n) % n] = 1.0f;
    at += PC_GAME_MAX_PLAYERS;
    at[n - 2] = 1.0f;
    at += 3;
    for (int k = 0; k < n; k++) {
        int seat = (observer + k) % n;
        const AzulBoard* board = &azul->boards[seat];
        float* block = out + AZUL_OBS_SHARED + k * AZUL_OBS_PLAYER;
        for (int row = 0; row < AZUL_ROWS; row++) {
            if (board->line_count[row])
                block[row * AZUL_COLORS + board->line_color[row]] = board->line_count[row] / (float)(row + 1);
            for (int col = 0; col < AZUL_ROWS; col++)
                block[AZUL_ROWS * AZUL_COLORS + row * AZUL_ROWS + col] = (float)(board->wall[row] >> col & 1u);
        }
        block += 2 * AZUL_ROWS * AZUL_COLORS;
        block[0] = azul_sum(board->floor) / (float)AZUL_FLOOR_SLOTS;
        block[1] = azul->marker_holder == seat;
        block[2] = board->score / 100.0f;
        uint8_t tiled[AZUL_ROWS];
        block[3] = azul_tiled_score(azul, seat, tiled) / 100.0f;
        block[4] = azul_wall_bonus(tiled) / 100.0f;
        block[5] = azul_full_rows(tiled) > 0;
        for (int row = 0; row < AZUL_ROWS; row++) {
            unsigned accepts = azul_line_colors(board, row);
            for (int color = 0; color < AZUL_COLORS; color++) block[6 + row * AZUL_COLORS + color] = accepts >> color & 1u;
            if (board->line_count[row] && board->line_count[row] < row + 1)
                block[6 + AZUL_ROWS * AZUL_COLORS + row] = azul_tile_value(tiled, row, board->line_color[row]) / 20.0f;
        }
    }
}

static inline void azul_returns(const Azul* azul, float* out) {
    float mean = 0.0f;
    for (int p = 0; p < azul->num_players; p++) mean += azul->boards[p].score;
    mean /= (float)azul->num_players;
    for (int p = 0; p < azul->num_players; p++) out[p] = (azul->boards[p].score - mean) / 100.0f;
}

/* ---- text board ------------------------------------------------------------------------ */

static const char AZUL_COLOR_LETTERS[AZUL_COLORS + 1] = "BYRKW"; /* blue yellow red blacK white */

/* Appends like snprintf into out[capacity], tracking the length it would need. */
typedef struct AzulText {
    char* out;
    int32_t capacity;
    int32_t length;
} AzulText;

#define AZUL_APPEND(text, ...)                                                                                  \
    do {                                                                                                        \
        int32_t room_ = (text)->length < (text)->capacity ? (text)->capacity - (text)->length : 0;              \
        (text)->length += snprintf(room_ ? (text)->out + (text)->length : NULL, (size_t)room_, __VA_ARGS__);    \
    } while (0)

/* Tiles as letters, e.g. "BBR", or "-" for none. */
static inline void azul_text_tiles(AzulText* text, const int8_t* counts) {
    if (!azul_sum(counts)) AZUL_APPEND(text, "-");
    for (int c = 0; c < AZUL_COLORS; c++)
        for (int k = 0; k < counts[c]; k++) AZUL_APPEND(text, "%c", AZUL_COLOR_LETTERS[c]);
}

/* Factories, centre (1 = the marker), then per player: pattern lines filled right to left
 * next to the wall (upper case = tile, lower case = the colour that space takes), floor
 * with its penalty so far, score; then a legend. */
static inline int32_t azul_render(const Azul* azul, char* out, int32_t capacity) {
    AzulText text = {out, capacity, 0};
    if (capacity > 0) out[0] = '\0';
    AZUL_APPEND(&text, "round %d, move %d, ", azul->round, azul->moves);
    if (azul_is_over(azul))
        AZUL_APPEND(&text, "game over\n");
    else
        AZUL_APPEND(&text, "player %d to move\n", azul->player);
    AZUL_APPEND(&text, "factories:");
    for (int f = 0; f < azul->num_factories; f++) {
        AZUL_APPEND(&text, " %d:", f);
        azul_text_tiles(&text, azul->factories[f]);
    }
    AZUL_APPEND(&text, "\ncentre (9): %s", azul->marker_holder == AZUL_MARKER_IN_CENTRE ? "1 " : "");
    azul_text_tiles(&text, azul->centre);
    AZUL_APPEND(&text, "   bag %d, lid %d\n", azul_sum(azul->bag), azul_sum(azul->lid));
    for (int p = 0; p < azul->num_players; p++) {
        const AzulBoard* board = &azul->boards[p];
        AZUL_APPEND(&text, "player %d: score %d%s\n", p, board->score,
                    azul->marker_holder == p ? ", has the first-player marker" : "");
        for (int row = 0; row < AZUL_ROWS; row++) {
            AZUL_APPEND(&text, "  %d %*s", row, AZUL_ROWS - row - 1, "");
            for (int k = row; k >= 0; k--)
                AZUL_APPEND(&text, "%c", k < board->line_count[row] ? AZUL_COLOR_LETTERS[board->line_color[row]] : '.');
            AZUL_APPEND(&text, " | ");
            for (int col = 0; col < AZUL_ROWS; col++) {
                char letter = AZUL_COLOR_LETTERS[(col - row + AZUL_COLORS) % AZUL_COLORS];
                AZUL_APPEND(&text, "%c", board->wall[row] >> col & 1u ? letter : letter - 'A' + 'a');
            }
            AZUL_APPEND(&text, "\n");
        }
        AZUL_APPEND(&text, "  floor %s", azul->marker_holder == p ? "1 " : "");
        azul_text_tiles(&text, board->floor);
        AZUL_APPEND(&text, " (-%d)\n", azul_floor_penalty(azul_floor_slots(azul, p)));
    }
    AZUL_APPEND(&text, "B blue, Y yellow, R red, K black, W white; 1 the first-player marker; "
                       "wall: upper case a tile, lower case a free space\n");
    return text.length;
}

#undef AZUL_APPEND

/* ABI wrappers: the rules above take Azul*; the spec takes void*. */
static void azul_game_init(void* state, uint64_t seed, int32_t num_players) {
    azul_init((Azul*)state, seed, num_players);
}
static void azul_game_legal_mask(const void* state, uint8_t* out) { azul_legal_mask((const Azul*)state, out); }
static void azul_game_apply(void* state, int32_t action) { azul_play((Azul*)state, action); }
static int32_t azul_game_is_terminal(const void* state) { return azul_is_over((const Azul*)state); }
static void azul_game_returns(const void* state, float* out) { azul_returns((const Azul*)state, out); }
static int32_t azul_game_current_player(const void* state) { return ((const Azul*)state)->player; }
static int32_t azul_game_num_players(const void* state) { return ((const Azul*)state)->num_players; }
static void azul_game_observe(const void* state, int32_t player, float* out) {
    azul_observe((const Azul*)state, player, out);
}
static int32_t azul_game_render(const void* state, char* out, int32_t capacity) {
    return azul_render((const Azul*)state, out, capacity);
}

static const PcGameSpec AZUL_GAME = {
    .abi_version = PC_GAME_ABI_VERSION,
    .name = "azul",
    .state_size = sizeof(Azul),
    .num_actions = AZUL_NUM_ACTIONS,
    .obs_size = AZUL_OBS_SIZE,
    .obs_rank = 1,
    .obs_shape = {AZUL_OBS_SIZE},
    .min_players = 2,
    .max_players = PC_GAME_MAX_PLAYERS,
    .max_moves = AZUL_MAX_MOVES,
    .rng_offset = offsetof(Azul, rng),
    .init = azul_game_init,
    .legal_mask = azul_game_legal_mask,
    .apply = azul_game_apply,
    .is_terminal = azul_game_is_terminal,
    .returns = azul_game_returns,
    .current_player = azul_game_current_player,
    .num_players = azul_game_num_players,
    .observe = azul_game_observe,
    .render = azul_game_render,
};

#endif
