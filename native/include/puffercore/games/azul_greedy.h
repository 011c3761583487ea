/* A greedy Azul player: scores every legal move by what it is worth this round and plays
 * the best (lowest action on ties), with no search. The value of a move is
 *
 *   - floor penalty it adds (overflow, the marker, tiles sent to the floor on purpose),
 *   + wall points of a pattern line it completes, counted against the wall as it will be
 *     when this round's other full lines are placed, plus the end-of-game bonuses that
 *     tile would complete (row +2, column +7, colour +10),
 *   + for a line left unfinished, a share of those points: the filled fraction, halved
 *     when the table no longer holds enough tiles of the colour to finish it this round,
 *   + a little for taking the first-player marker (first pick next round).
 *
 * So it takes immediate points, avoids colours that overflow onto the floor, finishes
 * lines, prefers tiles that join existing wall runs, and only uses the floor when every
 * other move costs more. */
#ifndef PUFFERCORE_GAMES_AZUL_GREEDY_H
#define PUFFERCORE_GAMES_AZUL_GREEDY_H

#include "puffercore/games/azul.h"

#define AZUL_GREEDY_UNFINISHED_LIKELY 0.7f   /* share of the points of a line the table can still finish */
#define AZUL_GREEDY_UNFINISHED_UNLIKELY 0.35f /* ... and of one it cannot finish this round */
#define AZUL_GREEDY_MARKER_VALUE 0.5f

/* Tiles of `color` left on the table (every factory and the centre). */
static inline int azul_greedy_on_table(const Azul* azul, int color) {
    int tiles = azul->centre[color];
    for (int f = 0; f < azul->num_factories; f++) tiles += azul->factories[f][color];
    return tiles;
}

static inline float azul_greedy_value(const Azul* azul, int32_t action) {
    const AzulBoard* board = &azul->boards[azul->player];
    int source = azul_action_source(action), color = azul_action_color(action);
    int destination = azul_action_destination(action);
    int taken = azul_source(azul, source)[color];
    int takes_marker = source == AZUL_CENTRE && azul->marker_holder == AZUL_MARKER_IN_CENTRE;
    int to_floor = taken;
    float value = 0.0f;
    if (destination != AZUL_FLOOR) {
        int row = destination, length = row + 1;
        int placed = taken < length - board->line_count[row] ? taken : length - board->line_count[row];
        to_floor -= placed;
        /* the wall as this round's other full lines will leave it */
        uint8_t wall[AZUL_ROWS];
        memcpy(wall, board->wall, sizeof(wall));
        for (int r = 0; r < AZUL_ROWS; r++)
            if (r != row && board->line_count[r] == r + 1)
                wall[r] |= (uint8_t)(1u << azul_wall_column(r, board->line_color[r]));
        float tile_value = azul_tile_value(wall, row, color);
        int filled = board->line_count[row] + placed;
        if (filled == length) {
            value += tile_value;
        } else {
            int still_needed = length - filled;
            int left = azul_greedy_on_table(azul, color) - taken;
            float share = left >= still_needed ? AZUL_GREEDY_UNFINISHED_LIKELY : AZUL_GREEDY_UNFINISHED_UNLIKELY;
            value += share * tile_value * (float)filled / (float)length;
        }
    }
    int slots_before = azul_floor_slots(azul, azul->player);
    int slots_after = slots_before + to_floor + takes_marker;
    value -= (float)(azul_floor_penalty(slots_after) - azul_floor_penalty(slots_before));
    if (takes_marker) value += AZUL_GREEDY_MARKER_VALUE;
    return value;
}

/* The greedy move for the player to move, or -1 when the game is over. */
static inline int32_t azul_greedy_action(const Azul* azul) {
    uint8_t legal[AZUL_NUM_ACTIONS];
    azul_legal_mask(azul, legal);
    int32_t best = -1;
    float best_value = 0.0f;
    for (int32_t action = 0; action < AZUL_NUM_ACTIONS; action++) {
        if (!legal[action]) continue;
        float value = azul_greedy_value(azul, action);
        if (best < 0 || value > best_value) {
            best = action;
            best_value = value;
        }
    }
    return best;
}

#endif
