/* puffercore env ABI, version 2.
 *
 * An ocean env is one C header: a struct whose FIRST member is `PcEnv`, plus reset and
 * step functions, and a `PcEnvSpec` describing it. No globals: all state, including
 * the RNG, lives in the struct, so any thread may step any env.
 *
 * Buffers. Every array is owned by the caller (the Python env object or the vector
 * engine) and outlives the env. Row = agent; an env owns `rows` consecutive rows
 * starting at the pointers in its PcEnv header:
 *   observations        [rows, obs_size]  float32 or uint8 (spec.obs_dtype)
 *   final_observations  [rows, obs_size]  last observation of an episode that just ended
 *   actions             [rows, act_size]  int32 (discrete) or float32 (continuous)
 *   rewards             [rows]            float32
 *   terminals           [rows]            uint8 (numpy bool)
 *   truncations         [rows]            uint8
 *   masks               [rows]            uint8, 1 = a live agent is in this row
 *
 * step(env) reads its actions, advances one tick, and writes observations, rewards,
 * terminals, truncations and masks of its rows. Autoreset is same-step: an env whose
 * episode ends copies the last observation to final_observations, sets the flag,
 * resets, and writes the first observation of the next episode to observations.
 *
 * Spaces. The spec declares them (obs_bounds, act_bounds below) and the binding builds
 * the gymnasium spaces from the spec alone. Actions are validated against them in
 * Python before step is called (range, NaN), so step may trust them.
 *
 * Logs. An env declares its episode statistics once, as a list of names, and adds one
 * ended episode with pc_log_episode (PC_LOG below): log[0] counts episodes, log[1 + k]
 * sums statistic k. The binding drains the sums into `info` as means.
 *
 * Version 2 added the spaces (obs_bounds, act_bounds at the end of PcEnvSpec); a spec
 * of another version is refused by the binding.
 */
#ifndef PUFFERCORE_ENV_H
#define PUFFERCORE_ENV_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "puffercore/rng.h"

#define PC_ABI_VERSION 2
#define PC_LOG_SLOTS 16

enum PcDtype { PC_FLOAT32 = 0, PC_UINT8 = 1, PC_INT32 = 2 };

typedef struct PcEnv {
    void* observations;
    void* final_observations;
    void* actions;
    float* rewards;
    uint8_t* terminals;
    uint8_t* truncations;
    uint8_t* masks;
    PcRng rng;
    float log[PC_LOG_SLOTS];
} PcEnv;

/* Bounds of a space's elements: [low, high] for every element, unless `lows` / `highs`
 * point at one bound per element (obs_size or act_size floats, static data: a spec whose
 * obs_size depends on the config uses the scalars). */
typedef struct PcBounds {
    float low, high;
    const float* lows;
    const float* highs;
} PcBounds;

/* Discrete choices 0..n-1 per action element: Discrete(n) for one element, else
 * MultiDiscrete. A discrete element's bounds are the integers it may take. */
#define PC_DISCRETE(n) {.low = 0.0f, .high = (float)((n) - 1)}
#define PC_BOX(low_, high_) {.low = (low_), .high = (high_)}

typedef struct PcEnvSpec {
    int32_t abi_version;        /* PC_ABI_VERSION */
    const char* name;
    /* env_size, rows and obs_size may depend on an env's config (a Snake's grid size,
     * snake count, vision): such a spec gives 0 for them, and the binding fills them in
     * its own per-instance copy of the spec, which is what the vector engine steps. */
    size_t env_size;            /* sizeof the whole env struct (PcEnv header included) */
    int32_t rows;               /* agent rows owned by one env */
    int32_t obs_size;           /* elements per observation row */
    int32_t obs_dtype;          /* PC_FLOAT32 or PC_UINT8 */
    int32_t act_size;           /* elements per action row */
    int32_t act_dtype;          /* PC_INT32 or PC_FLOAT32 */
    int32_t num_log;            /* log slots used after the episode count (PC_LOG_SPEC) */
    const char* const* log_names;
    /* init: after the header and the env's config fields are set; may allocate.
     * reset: start a new episode (called once per seeding).
     * step: one tick, as documented above.
     * close: free what init allocated. init and close may be NULL. */
    void (*init)(void* env);
    void (*reset)(void* env);
    void (*step)(void* env);
    void (*close)(void* env);
    /* The spaces (ABI 2). Observation: Box(obs_bounds, (obs_size,), obs_dtype).
     * Actions, act_dtype PC_INT32: each element an integer in its bounds (PC_DISCRETE(n)
     * for 0..n-1), Discrete when act_size is 1, else MultiDiscrete; PC_FLOAT32:
     * Box(act_bounds, (act_size,), float32). */
    PcBounds obs_bounds;
    PcBounds act_bounds;
} PcEnvSpec;

/* Episode logs. An env lists its statistics once, as an X-macro, and PC_LOG makes both
 * a struct of floats (one field per statistic, in list order) and the names the spec
 * hands the binding from that one list, so a value cannot land under another's name:
 *
 *   #define CARTPOLE_LOG(X) X(episode_return) X(episode_length)
 *   PC_LOG(CartPoleLog, CARTPOLE_LOG);
 *
 *   CartPoleLog episode = {.episode_return = ..., .episode_length = ...};  (in step,
 *   pc_log_episode(&env->pc, &episode);                  when an episode ends)
 *
 *   static const PcEnvSpec CARTPOLE_SPEC = {..., PC_LOG_SPEC(CartPoleLog), ...};
 */
#define PC_LOG_FIELD_(name) float name;
#define PC_LOG_NAME_(name) #name,
#define PC_LOG(type, LIST)                                              \
    typedef struct type { LIST(PC_LOG_FIELD_) } type;                   \
    static const char* const type##_names[] = {LIST(PC_LOG_NAME_)};    \
    _Static_assert(sizeof(type) / sizeof(float) < PC_LOG_SLOTS, #type " has more statistics than log slots")
#define PC_LOG_SPEC(type) .num_log = (int32_t)(sizeof(type) / sizeof(float)), .log_names = type##_names

/* Count one ended episode and add its statistics (`episode` points at a PC_LOG struct). */
#define pc_log_episode(pc, episode) pc_log_add((pc), (const float*)(episode), sizeof(*(episode)) / sizeof(float))

static inline void pc_log_add(PcEnv* env, const float* values, size_t count) {
    env->log[0] += 1.0f;
    for (size_t k = 0; k < count; k++) env->log[1 + k] += values[k];
}

static inline size_t pc_dtype_size(int32_t dtype) { return dtype == PC_UINT8 ? 1 : 4; }

static inline void* pc_env_at(const PcEnvSpec* spec, void* envs, int64_t index) {
    return (char*)envs + (size_t)index * spec->env_size;
}

/* Point env `index` of a contiguous env array at its rows of the shared buffers. */
static inline void pc_env_bind(const PcEnvSpec* spec, PcEnv* env, int64_t index, void* observations,
                               void* final_observations, void* actions, float* rewards,
                               uint8_t* terminals, uint8_t* truncations, uint8_t* masks) {
    size_t row = (size_t)index * (size_t)spec->rows;
    size_t obs_row = (size_t)spec->obs_size * pc_dtype_size(spec->obs_dtype);
    size_t act_row = (size_t)spec->act_size * pc_dtype_size(spec->act_dtype);
    env->observations = (char*)observations + row * obs_row;
    env->final_observations = (char*)final_observations + row * obs_row;
    env->actions = (char*)actions + row * act_row;
    env->rewards = rewards + row;
    env->terminals = terminals + row;
    env->truncations = truncations + row;
    env->masks = masks + row;
}

/* Seed envs [begin, end) from (seed, index) and reset them. */
static inline void pc_reset_range(const PcEnvSpec* spec, void* envs, int64_t begin, int64_t end,
                                  uint64_t seed, uint64_t index_base) {
    for (int64_t i = begin; i < end; i++) {
        PcEnv* env = (PcEnv*)pc_env_at(spec, envs, i);
        pc_rng_seed(&env->rng, seed, index_base + (uint64_t)i);
        spec->reset(env);
    }
}

/* Step envs [begin, end): what one vector-engine worker calls on its slice. */
static inline void pc_step_range(const PcEnvSpec* spec, void* envs, int64_t begin, int64_t end) {
    void (*step)(void*) = spec->step;
    for (int64_t i = begin; i < end; i++) step(pc_env_at(spec, envs, i));
}

/* Add the log sums of envs [begin, end) into out[PC_LOG_SLOTS] and clear them. */
static inline void pc_drain_logs(const PcEnvSpec* spec, void* envs, int64_t begin, int64_t end,
                                 double* out) {
    for (int64_t i = begin; i < end; i++) {
        PcEnv* env = (PcEnv*)pc_env_at(spec, envs, i);
        if (env->log[0] == 0.0f) continue; /* no episode ended: nothing to add or clear */
        for (int k = 0; k <= spec->num_log; k++) out[k] += env->log[k];
        memset(env->log, 0, sizeof(env->log));
    }
}

#endif
