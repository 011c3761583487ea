/* A small MLP's forward and backward passes and its policy head's sampling, in float32 on
 * the CPU (puffercore.ppo._native.mlp; Python: puffercore.ppo.native_mlp).
 *
 * Layout: activations are feature-major, [features][stride], where stride is the rows
 * rounded up to MLP_LANES, so every loop runs over whole vectors of rows; the padding
 * rows of an input are zero and their gradients are zero. Weights are torch's Linear
 * layout, [outputs][inputs], row-major. Nothing is allocated here: the caller owns
 * every buffer.
 *
 * Every sum runs in a fixed order (over rows in 16 lanes, lane l adding rows l, l + 16,
 * ...; then the lanes in a fixed tree) without fused multiply-adds, so a result has the
 * same bits whichever instruction set the CPU runs (16-lane AVX-512 kernels or 8-lane
 * ones; mlp_linear.inc).
 */
#ifndef PUFFERCORE_MLP_H
#define PUFFERCORE_MLP_H

#include <stdint.h>

#define MLP_LANES 16

enum { MLP_TANH = 0, MLP_RELU = 1 };

/* out[j][r] = bias[j] + sum_k weight[j][k] x[k][r] */
void mlp_linear_forward(const float* x, int stride, int inputs, const float* weight, const float* bias,
                        int outputs, float* out);

/* From d_out = d loss / d out ([outputs][stride]): d_weight[j][k] = sum_r d_out[j][r] x[k][r],
 * d_bias[j] = sum_r d_out[j][r] (both overwritten) and, unless d_x is NULL,
 * d_x[k][r] = sum_j weight[j][k] d_out[j][r]. */
void mlp_linear_backward(const float* x, int stride, int inputs, const float* weight, int outputs,
                         const float* d_out, float* d_weight, float* d_bias, float* d_x);

/* Whether the linear kernels run 16 lanes (AVX-512) or 8: `on` asks for 16 where the CPU
 * has AVX-512 (the default there), 0 for 8; returns the setting before. Both give the
 * same bits (mlp_linear.inc); the tests compare them. */
int mlp_set_wide(int on);

/* The lanes the linear kernels run now: 16 (AVX-512, not turned off) or 8. */
int mlp_lanes(void);

/* h = activation(h), in place, over n values. tanh is a polynomial exp within 2e-7 of libm's. */
void mlp_activate(float* h, int64_t n, int activation);

/* d *= activation'(z), computed from the activation's output h = activation(z). */
void mlp_activation_backward(float* d, const float* h, int64_t n, int activation);

/* x_t[k][r] = x[r][k] for r < rows; zero for the padding rows up to stride. */
void mlp_transpose_rows(const float* x, int rows, int features, int stride, float* x_t);

/* One action per row from logits [actions][stride]: the first a whose cumulative
 * probability exceeds uniforms[r] (in [0, 1)); log_prob[r] = its log-probability. */
void mlp_sample_categorical(const float* logits, int stride, int rows, int actions, const float* uniforms,
                            int64_t* action, float* log_prob);

/* action[r][a] = mean[a][r] + exp(log_std[a]) * normals[r][a]; log_prob[r] the Gaussian's
 * log-density of the row, summed over the action's dimensions. */
void mlp_sample_gaussian(const float* mean, int stride, int rows, int actions, const float* log_std,
                         const float* normals, float* action, float* log_prob);

#endif
