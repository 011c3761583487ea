/* See mlp.h. Built with -ffp-contract=off (no fused multiply-adds, so every instruction
 * set rounds alike) and -fno-trapping-math (so GCC vectorizes the selects of tanh). */
#include "mlp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One build runs the widest vectors the CPU has. The linear kernels come in two widths
 * (mlp_linear.inc): 16 lanes for AVX-512, and 8 lanes cloned by GCC for AVX2 and the
 * baseline (a 16-lane vector type split in two on AVX2 ran several times slower there);
 * the elementwise kernels are cloned per instruction set and GCC picks at load time.
 * Elsewhere the baseline build alone. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define KERNEL __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define WIDE_KERNELS 1
#else
#define KERNEL
#define WIDE_KERNELS 0
#endif

/* may_alias: rows of floats are read as vectors. */
typedef float lanes __attribute__((vector_size(8 * sizeof(float)), aligned(sizeof(float)), may_alias));
_Static_assert(MLP_LANES == 16, "the sums over rows run in 16 lanes");

static inline lanes load8(const float* p) { return *(const lanes*)p; }

/* eight lanes' halves added pairwise: the same order on every instruction set */
static inline float lane_sum8(lanes v) {
    return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

/* The 8-lane kernels: a sum's 16 lanes are two vectors, rows r..r+7 and r+8..r+15. */
typedef struct {
    lanes lo, hi;
} split_sum;

static inline split_sum split_zero(void) { return (split_sum){{0}, {0}}; }

static inline float split_total(split_sum s) { return lane_sum8(s.lo + s.hi); }

#define VEC lanes
#define VEC_LANES 8
#define NAME(f) f##_8
#define TARGET KERNEL
#define SUM split_sum
#define sum_zero split_zero
#define sum_total split_total
#define SUM_ADD(s, a, b) ((s).lo += load8(a) * load8(b), (s).hi += load8((a) + 8) * load8((b) + 8))
#define DW_INPUTS 2 /* 4 x 2 sums of two vectors: the 16 registers of AVX2 */
#include "mlp_linear.inc"
#undef VEC
#undef VEC_LANES
#undef NAME
#undef TARGET
#undef SUM
#undef sum_zero
#undef sum_total
#undef SUM_ADD
#undef DW_INPUTS

#if WIDE_KERNELS
#define WIDE __attribute__((target("arch=x86-64-v4")))
typedef float wide_lanes __attribute__((vector_size(16 * sizeof(float)), aligned(sizeof(float)), may_alias));

WIDE static inline wide_lanes wide_zero(void) { return (wide_lanes){0}; }

WIDE static inline float wide_total(wide_lanes s) {
    lanes lo = {s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]};
    lanes hi = {s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15]};
    return lane_sum8(lo + hi);
}

#define VEC wide_lanes
#define VEC_LANES 16
#define NAME(f) f##_16
#define TARGET WIDE
#define SUM wide_lanes
#define sum_zero wide_zero
#define sum_total wide_total
#define SUM_ADD(s, a, b) ((s) += *(const wide_lanes*)(a) * *(const wide_lanes*)(b))
#define DW_INPUTS 4
#include "mlp_linear.inc"

/* -1: not yet asked; then whether the 16-lane kernels run (the CPU has AVX-512) */
static int wide_kernels = -1;

static int wide_supported(void) {
    /* AVX2 mode (PUFFERCORE_ISA=avx2, puffercore.info): the 8-lane kernels on any CPU */
    const char* forced = getenv("PUFFERCORE_ISA");
    if (forced != NULL && strcmp(forced, "avx2") == 0) return 0;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512cd");
}

static int use_wide(void) {
    if (wide_kernels < 0) wide_kernels = wide_supported();
    return wide_kernels;
}

int mlp_set_wide(int on) {
    int before = use_wide();
    wide_kernels = on && wide_supported();
    return before;
}

int mlp_lanes(void) { return use_wide() ? 16 : 8; }
#else
static int use_wide(void) { return 0; }

int mlp_set_wide(int on) {
    (void)on;
    return 0;
}

int mlp_lanes(void) { return 8; }
#endif

void mlp_linear_forward(const float* x, int stride, int inputs, const float* weight, const float* bias, int outputs,
                        float* out) {
#if WIDE_KERNELS
    if (use_wide()) {
        linear_forward_16(x, stride, inputs, weight, bias, outputs, out);
        return;
    }
#endif
    linear_forward_8(x, stride, inputs, weight, bias, outputs, out);
}

void mlp_linear_backward(const float* x, int stride, int inputs, const float* weight, int outputs,
                         const float* d_out, float* d_weight, float* d_bias, float* d_x) {
#if WIDE_KERNELS
    if (use_wide()) {
        linear_backward_16(x, stride, inputs, weight, outputs, d_out, d_weight, d_bias, d_x);
        return;
    }
#endif
    linear_backward_8(x, stride, inputs, weight, outputs, d_out, d_weight, d_bias, d_x);
}

/* tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|) = 2^t: t's integer part goes into
 * the exponent bits, its fraction through a degree-6 Taylor polynomial of 2^f. Past
 * |x| = 9, tanh is 1 in float32. libm's tanhf does not vectorize; this does. */
KERNEL void mlp_activate(float* h, int64_t n, int activation) {
    if (activation == MLP_RELU) {
        /* NaN passes through, as in torch (a NaN observation shows up as NaN, not 0) */
        for (int64_t i = 0; i < n; i++) h[i] = h[i] < 0.0f ? 0.0f : h[i];
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float x = h[i];
        float a = fabsf(x);
        a = a < 9.0f ? a : 9.0f;
        float t = -2.0f * 1.44269504088896341f * a;
        int32_t whole = -(int32_t)(0.5f - t);
        float f = (t - (float)whole) * 0.69314718055994531f;
        float p = 1.0f + f * (1.0f + f * (0.5f + f * (1.0f / 6 + f * (1.0f / 24 + f * (1.0f / 120 + f * (1.0f / 720))))));
        union { float f; int32_t i; } bits = {.f = p};
        bits.i += whole * (1 << 23);
        float e = bits.f;
        /* the clamp above takes NaN to 9: it passes through here instead, as in torch */
        h[i] = x == x ? copysignf((1.0f - e) / (1.0f + e), x) : x;
    }
}

KERNEL void mlp_activation_backward(float* d, const float* h, int64_t n, int activation) {
    if (activation == MLP_RELU) {
        for (int64_t i = 0; i < n; i++) d[i] = h[i] > 0.0f ? d[i] : 0.0f;
        return;
    }
    for (int64_t i = 0; i < n; i++) d[i] *= 1.0f - h[i] * h[i];
}

void mlp_transpose_rows(const float* x, int rows, int features, int stride, float* x_t) {
    for (int k = 0; k < features; k++) {
        float* column = x_t + (size_t)k * stride;
        for (int r = 0; r < rows; r++) column[r] = x[(size_t)r * features + k];
        for (int r = rows; r < stride; r++) column[r] = 0.0f;
    }
}

void mlp_sample_categorical(const float* logits, int stride, int rows, int actions, const float* uniforms,
                            int64_t* action, float* log_prob) {
    for (int r = 0; r < rows; r++) {
        /* the max in float, as exact as in double: GCC 12 for aarch64 crashes vectorizing
         * a double fmax over floats at -O3 */
        float top_float = logits[r];
        for (int a = 1; a < actions; a++) top_float = fmaxf(top_float, logits[(size_t)a * stride + r]);
        double top = top_float;
        double total = 0.0;
        for (int a = 0; a < actions; a++) total += exp(logits[(size_t)a * stride + r] - top);
        double target = uniforms[r] * total, cumulative = 0.0;
        int chosen = actions - 1;  /* where rounding leaves the target past the last sum */
        for (int a = 0; a < actions; a++) {
            double p = exp(logits[(size_t)a * stride + r] - top);
            cumulative += p;
            if (p > 0.0 && target < cumulative) {
                chosen = a;
                break;
            }
        }
        while (chosen > 0 && exp(logits[(size_t)chosen * stride + r] - top) == 0.0) chosen--;
        action[r] = chosen;
        log_prob[r] = (float)(logits[(size_t)chosen * stride + r] - top - log(total));
    }
}

void mlp_sample_gaussian(const float* mean, int stride, int rows, int actions, const float* log_std,
                         const float* normals, float* action, float* log_prob) {
    const double half_log_two_pi = 0.91893853320467274;
    for (int r = 0; r < rows; r++) {
        double sum = 0.0;
        for (int a = 0; a < actions; a++) {
            double z = normals[(size_t)r * actions + a];
            action[(size_t)r * actions + a] = (float)(mean[(size_t)a * stride + r] + exp(log_std[a]) * z);
            sum += -0.5 * z * z - log_std[a] - half_log_two_pi;
        }
        log_prob[r] = (float)sum;
    }
}
