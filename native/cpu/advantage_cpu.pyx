# Binding of the CPU advantage kernel. It takes raw addresses so that NumPy arrays and
# torch CPU tensors reach the kernel the same way, without copies; puffercore.advantage
# validates shapes, dtypes and contiguity before calling it.
cimport numpy as cnp
from libc.stdint cimport int64_t, uint8_t, uintptr_t

cnp.import_array()


cdef extern from "advantage_cpu.h" nogil:
    ctypedef struct PcAdvantageParams:
        float gamma
        float _lambda "lambda"
        float rho_clip
        float c_clip

    int64_t pc_advantage_cpu(const float* values, const float* rewards,
                             const uint8_t* terminals, const uint8_t* truncations,
                             const float* final_values, const float* ratios,
                             float* advantages, float* returns, int64_t rows,
                             int64_t length, PcAdvantageParams params, int max_threads)


def compute(uintptr_t values, uintptr_t rewards, uintptr_t terminals,
            uintptr_t truncations, uintptr_t final_values, uintptr_t ratios,
            uintptr_t advantages, uintptr_t returns, int64_t rows, int64_t length,
            float gamma, float lam, float rho_clip, float c_clip, int max_threads):
    """Runs the kernel with the GIL released (addresses of 0 mean absent). Returns -1, or
    the first row with a truncation while final_values is absent."""
    cdef PcAdvantageParams params
    params.gamma = gamma
    params._lambda = lam
    params.rho_clip = rho_clip
    params.c_clip = c_clip
    cdef int64_t first_bad_row
    with nogil:
        first_bad_row = pc_advantage_cpu(
            <const float*>values, <const float*>rewards, <const uint8_t*>terminals,
            <const uint8_t*>truncations, <const float*>final_values,
            <const float*>ratios, <float*>advantages, <float*>returns, rows, length,
            params, max_threads)
    return first_bad_row


def data_address(cnp.ndarray array):
    """Address of a NumPy array's data (a C call; __array_interface__ costs microseconds)."""
    return <uintptr_t>cnp.PyArray_DATA(array)
