# cython: boundscheck=False, wraparound=False, cdivision=True
# One Adam step over a flat float32 buffer, each parameter group's gradient clipped to a
# maximum L2 norm first: FlatAdam's step on the CPU (puffercore.ppo.flat_adam) in one
# call, where torch takes a norm, three scalar ops and a scale per group and then its
# fused kernel (about 100 us of launches a step for a small policy; the arithmetic is a
# few microseconds). The update is torch's fused Adam's, written the same way: its
# results match torch's to float rounding (tests/test_ppo_update.py).
from libc.math cimport pow, sqrt, sqrtf
from libc.stdint cimport int64_t


def clipped_step(float[::1] parameters, float[::1] gradients, float[::1] exp_avg, float[::1] exp_avg_sq,
                 float[::1] step, const int64_t[::1] bounds, double max_norm, double lr, double beta1,
                 double beta2, double eps, double weight_decay, float[::1] norms):
    """Group g holds elements [bounds[g], bounds[g + 1]) of the flat buffers. Each group's
    gradient is scaled in place by min(1, max_norm / (norm + 1e-6)) and its norm before
    written to norms[g]; then step[0] += 1 and parameters, exp_avg and exp_avg_sq take
    Adam's step (L2 weight decay added to the gradient, as torch's Adam does)."""
    cdef Py_ssize_t size = parameters.shape[0], groups = bounds.shape[0] - 1, g, i
    if gradients.shape[0] != size or exp_avg.shape[0] != size or exp_avg_sq.shape[0] != size:
        raise ValueError(f"gradients, exp_avg and exp_avg_sq must hold {size} values like parameters, got "
                         f"{gradients.shape[0]}, {exp_avg.shape[0]} and {exp_avg_sq.shape[0]}")
    if step.shape[0] != 1:
        raise ValueError(f"step must hold 1 value, got {step.shape[0]}")
    if groups < 1 or norms.shape[0] != groups:
        raise ValueError(f"bounds must hold at least 2 offsets and norms one value a group, got "
                         f"{bounds.shape[0]} and {norms.shape[0]}")
    if bounds[0] != 0 or bounds[groups] != size:
        raise ValueError(f"bounds must run from 0 to {size}, got {bounds[0]} to {bounds[groups]}")
    for g in range(groups):
        if bounds[g + 1] < bounds[g]:
            raise ValueError(f"bounds must not decrease, got {bounds[g]} then {bounds[g + 1]}")

    cdef double total, partial[4]
    cdef float norm, scale
    cdef float b1 = <float>beta1, b2 = <float>beta2, one_minus_b1 = <float>(1.0 - beta1)
    cdef float one_minus_b2 = <float>(1.0 - beta2), decay = <float>weight_decay, grad
    cdef float step_size, bias_correction2_sqrt, epsilon = <float>eps
    with nogil:
        for g in range(groups):
            # four running sums, every fourth element each, then added in a fixed order
            partial[0] = partial[1] = partial[2] = partial[3] = 0.0
            i = bounds[g]
            while i + 4 <= bounds[g + 1]:
                partial[0] += <double>gradients[i] * gradients[i]
                partial[1] += <double>gradients[i + 1] * gradients[i + 1]
                partial[2] += <double>gradients[i + 2] * gradients[i + 2]
                partial[3] += <double>gradients[i + 3] * gradients[i + 3]
                i += 4
            while i < bounds[g + 1]:
                partial[0] += <double>gradients[i] * gradients[i]
                i += 1
            total = (partial[0] + partial[1]) + (partial[2] + partial[3])
            norm = <float>sqrt(total)
            norms[g] = norm
            scale = <float>max_norm / (norm + <float>1e-6)
            if scale < 1.0:
                for i in range(bounds[g], bounds[g + 1]):
                    gradients[i] = gradients[i] * scale
        step[0] = step[0] + 1.0
        step_size = <float>(lr / (1.0 - pow(beta1, step[0])))
        bias_correction2_sqrt = <float>sqrt(1.0 - pow(beta2, step[0]))
        for i in range(size):  # the branch is hoisted out of the loop (-O3 unswitches it)
            grad = gradients[i]
            if decay != 0.0:  # L2 decay into the gradient, as torch's Adam does (not decoupled)
                grad = grad + decay * parameters[i]
            exp_avg[i] = exp_avg[i] + one_minus_b1 * (grad - exp_avg[i])
            exp_avg_sq[i] = b2 * exp_avg_sq[i] + one_minus_b2 * grad * grad
            parameters[i] = parameters[i] - step_size * exp_avg[i] / (
                sqrtf(exp_avg_sq[i]) / bias_correction2_sqrt + epsilon)
