/* See mlp.h. Built with -ffp-contract=off (no fused multiply-adds, so every instruction
 * set rounds alike) and -fno-trapping-math (so GCC vectorizes the selects of tanh). */
#include "mlp.h"

#include <math.h>
#include <string.h>

/* One build runs the widest vectors the CPU has: GCC clones each kernel per instruction
 * set and picks one at load time. Elsewhere the baseline build. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define KERNEL __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KERNEL
#endif

/* Eight lanes: one AVX2 register (or half an AVX-512 one); a wider vector type split in
 * two on AVX2 ran several times slower there. may_alias: rows of floats are read as it. */
typedef float lanes __attribute__((vector_size(MLP_LANES * sizeof(float)), aligned(sizeof(float)), may_alias));
_Static_assert(MLP_LANES == 8, "lane_sum adds eight lanes");

static inline lanes load(const float* p) { return *(const lanes*)p; }

static inline void store(float* p, lanes v) { *(lanes*)p = v; }

static inline lanes broadcast(float x) { return (lanes){0} + x; }

/* halves added pairwise: the same order on every instruction set */
static inline float lane_sum(lanes v) {
    return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

static inline float dot(const float* a, const float* b, int stride) {
    lanes sum = {0};
    for (int r = 0; r < stride; r += MLP_LANES) sum += load(a + r) * load(b + r);
    return lane_sum(sum);
}

/* Four outputs at a time share each load of an input row block. */
KERNEL void mlp_linear_forward(const float* x, int stride, int inputs, const float* weight, const float* bias,
                               int outputs, float* out) {
    int j = 0;
    for (; j + 4 <= outputs; j += 4) {
        const float *w0 = weight + (size_t)j * inputs, *w1 = w0 + inputs, *w2 = w1 + inputs, *w3 = w2 + inputs;
        for (int r = 0; r < stride; r += MLP_LANES) {
            lanes a0 = broadcast(bias[j]), a1 = broadcast(bias[j + 1]);
            lanes a2 = broadcast(bias[j + 2]), a3 = broadcast(bias[j + 3]);
            for (int k = 0; k < inputs; k++) {
                lanes in = load(x + (size_t)k * stride + r);
                a0 += w0[k] * in;
                a1 += w1[k] * in;
                a2 += w2[k] * in;
                a3 += w3[k] * in;
            }
            store(out + (size_t)j * stride + r, a0);
            store(out + (size_t)(j + 1) * stride + r, a1);
            store(out + (size_t)(j + 2) * stride + r, a2);
            store(out + (size_t)(j + 3) * stride + r, a3);
        }
    }
    for (; j < outputs; j++) {
        const float* w0 = weight + (size_t)j * inputs;
        for (int r = 0; r < stride; r += MLP_LANES) {
            lanes a0 = broadcast(bias[j]);
            for (int k = 0; k < inputs; k++) a0 += w0[k] * load(x + (size_t)k * stride + r);
            store(out + (size_t)j * stride + r, a0);
        }
    }
}

/* d_weight four outputs by four inputs at a time: each row block of d_out and of x is
 * loaded once for sixteen sums (streaming x once per output ran out of L1 at 512 rows). */
KERNEL void mlp_linear_backward(const float* x, int stride, int inputs, const float* weight, int outputs,
                                const float* d_out, float* d_weight, float* d_bias, float* d_x) {
    for (int j = 0; j < outputs; j++) {
        const float* d = d_out + (size_t)j * stride;
        lanes sum = {0};
        for (int r = 0; r < stride; r += MLP_LANES) sum += load(d + r);
        d_bias[j] = lane_sum(sum);
    }
    int j = 0;
    for (; j + 4 <= outputs; j += 4) {
        const float* d[4] = {d_out + (size_t)j * stride, d_out + (size_t)(j + 1) * stride,
                             d_out + (size_t)(j + 2) * stride, d_out + (size_t)(j + 3) * stride};
        int k = 0;
        for (; k + 4 <= inputs; k += 4) {
            const float *x0 = x + (size_t)k * stride, *x1 = x0 + stride, *x2 = x1 + stride, *x3 = x2 + stride;
            lanes a[4][4] = {{{0}}};
            for (int r = 0; r < stride; r += MLP_LANES) {
                lanes y0 = load(x0 + r), y1 = load(x1 + r), y2 = load(x2 + r), y3 = load(x3 + r);
                for (int p = 0; p < 4; p++) {
                    lanes g = load(d[p] + r);
                    a[p][0] += g * y0;
                    a[p][1] += g * y1;
                    a[p][2] += g * y2;
                    a[p][3] += g * y3;
                }
            }
            for (int p = 0; p < 4; p++)
                for (int q = 0; q < 4; q++) d_weight[(size_t)(j + p) * inputs + k + q] = lane_sum(a[p][q]);
        }
        for (; k < inputs; k++)
            for (int p = 0; p < 4; p++) d_weight[(size_t)(j + p) * inputs + k] = dot(d[p], x + (size_t)k * stride, stride);
    }
    for (; j < outputs; j++)
        for (int k = 0; k < inputs; k++)
            d_weight[(size_t)j * inputs + k] = dot(d_out + (size_t)j * stride, x + (size_t)k * stride, stride);
    if (!d_x) return;
    int k = 0;
    for (; k + 4 <= inputs; k += 4) {
        for (int r = 0; r < stride; r += MLP_LANES) {
            lanes a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
            for (int j = 0; j < outputs; j++) {
                const float* w = weight + (size_t)j * inputs + k;
                lanes g = load(d_out + (size_t)j * stride + r);
                a0 += w[0] * g;
                a1 += w[1] * g;
                a2 += w[2] * g;
                a3 += w[3] * g;
            }
            store(d_x + (size_t)k * stride + r, a0);
            store(d_x + (size_t)(k + 1) * stride + r, a1);
            store(d_x + (size_t)(k + 2) * stride + r, a2);
            store(d_x + (size_t)(k + 3) * stride + r, a3);
        }
    }
    for (; k < inputs; k++) {
        for (int r = 0; r < stride; r += MLP_LANES) {
            lanes a0 = {0};
            for (int j = 0; j < outputs; j++) a0 += weight[(size_t)j * inputs + k] * load(d_out + (size_t)j * stride + r);
            store(d_x + (size_t)k * stride + r, a0);
        }
    }
}

/* tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|) = 2^t: t's integer part goes into
 * the exponent bits, its fraction through a degree-6 Taylor polynomial of 2^f. Past
 * |x| = 9, tanh is 1 in float32. libm's tanhf does not vectorize; this does. */
KERNEL void mlp_activate(float* h, int64_t n, int activation) {
    if (activation == MLP_RELU) {
        for (int64_t i = 0; i < n; i++) h[i] = h[i] > 0.0f ? h[i] : 0.0f;
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
        h[i] = copysignf((1.0f - e) / (1.0f + e), x);
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
        double top = logits[r];
        for (int a = 1; a < actions; a++) top = fmax(top, logits[(size_t)a * stride + r]);
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
