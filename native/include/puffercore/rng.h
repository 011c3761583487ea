/* PCG32 (O'Neill, pcg-random.org, "pcg32" = XSH-RR 64/32): a small, fast generator
 * whose state lives inside each env or game, so no two envs share draws and any thread
 * may step any env. Seeding takes (seed, stream): puffercore passes (run seed, env
 * index), which gives every env index its own stream. */
#ifndef PUFFERCORE_RNG_H
#define PUFFERCORE_RNG_H

#include <stdint.h>

typedef struct PcRng {
    uint64_t state;
    uint64_t inc; /* odd: selects the stream */
} PcRng;

static inline uint32_t pc_rng_next(PcRng* rng) {
    uint64_t old = rng->state;
    rng->state = old * 6364136223846793005ULL + rng->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31u));
}

static inline void pc_rng_seed(PcRng* rng, uint64_t seed, uint64_t stream) {
    rng->state = 0u;
    rng->inc = (stream << 1u) | 1u;
    pc_rng_next(rng);
    rng->state += seed;
    pc_rng_next(rng);
}

/* Uniform float in [0, 1) with 24 random bits. */
static inline float pc_rng_float(PcRng* rng) {
    return (float)(pc_rng_next(rng) >> 8) * (1.0f / 16777216.0f);
}

/* Uniform float in [low, high). */
static inline float pc_rng_uniform(PcRng* rng, float low, float high) {
    return low + (high - low) * pc_rng_float(rng);
}

/* Uniform integer in [0, bound), unbiased (Lemire's multiply-shift with rejection). */
static inline uint32_t pc_rng_below(PcRng* rng, uint32_t bound) {
    uint64_t m = (uint64_t)pc_rng_next(rng) * bound;
    uint32_t low = (uint32_t)m;
    if (low < bound) {
        uint32_t threshold = (uint32_t)(-bound) % bound;
        while (low < threshold) {
            m = (uint64_t)pc_rng_next(rng) * bound;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

#endif
