// CUDA advantage kernel: one thread per row, math from puffercore/advantage.h.
//
// Layout: rows are row-major [rows, length] (the rollout layout the trainer fills),
// and the recursion runs along a row, so a thread walking its own row directly would
// make every warp load touch 32 rows `length * 4` bytes apart: 32 memory transactions
// for 128 useful bytes. Transposing to [length, rows] would fix the loads but costs a
// full extra pass over every array. Instead each block (one warp, 32 rows) stages a
// tile of 32 rows x 32 steps in shared memory: lane i loads step i of each row in turn,
// so every warp load is one contiguous run of a row (coalesced); then each thread runs
// the recursion over its row of the tile, and the outputs go back the same way. The
// tile pitch is 33 words so that the 32 threads reading column t of 32 different tile
// rows hit 32 different shared-memory banks.
//
// Built as a plain shared library linked against the static CUDA runtime, so it does
// not depend on the torch ABI or on a libcudart being installed; Python calls the C
// entry points with tensor addresses and torch's current stream.
#include <cuda_runtime.h>
#include <stdint.h>

#include "puffercore/advantage.h"

#define PC_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kRowsPerBlock = 32;
constexpr int kTileSteps = 32;
constexpr int kTilePitch = kTileSteps + 1;

__global__ void advantage_kernel(const float* values, const float* rewards,
                                 const uint8_t* terminals, const uint8_t* truncations,
                                 const float* final_values, const float* ratios,
                                 float* advantages, float* returns, int64_t rows,
                                 int64_t length, PcAdvantageParams params) {
    // The segment function reads step t before writing it, so the outputs are written
    // over their inputs' tiles: returns over values, advantages over rewards.
    __shared__ float value_tile[kRowsPerBlock][kTilePitch];
    __shared__ float reward_tile[kRowsPerBlock][kTilePitch];
    __shared__ float ratio_tile[kRowsPerBlock][kTilePitch];
    __shared__ uint8_t terminal_tile[kRowsPerBlock][kTilePitch];
    __shared__ uint8_t truncation_tile[kRowsPerBlock][kTilePitch];

    const int lane = threadIdx.x;
    const int64_t first_row = int64_t(blockIdx.x) * kRowsPerBlock;
    const int block_rows = int(rows - first_row < kRowsPerBlock ? rows - first_row : kRowsPerBlock);
    const int64_t row = first_row + lane;
    const bool owns_row = lane < block_rows;

    PcAdvantageCarry carry = {0.0f, 0.0f};
    if (owns_row) carry.next_value = values[row * (length + 1) + length];

    // Tiles go from the end of the rows to the start; the first one handled may be short.
    for (int64_t end = length; end > 0; end -= kTileSteps) {
        const int64_t start = end > kTileSteps ? end - kTileSteps : 0;
        const int width = int(end - start);

        if (lane < width) {
            for (int r = 0; r < block_rows; r++) {
                const int64_t step = (first_row + r) * length + start + lane;
                value_tile[r][lane] = values[(first_row + r) * (length + 1) + start + lane];
                reward_tile[r][lane] = rewards[step];
                terminal_tile[r][lane] = terminals[step];
                truncation_tile[r][lane] = truncations[step];
                if (ratios) ratio_tile[r][lane] = ratios[step];
            }
        }
        __syncthreads();

        if (owns_row) {
            // The Python side checks that final_values is given wherever a truncation is.
            const PcAdvantageInputs tile_inputs = {
                value_tile[lane], reward_tile[lane], terminal_tile[lane], truncation_tile[lane],
                final_values ? final_values + row * length + start : nullptr,
                ratios ? ratio_tile[lane] : nullptr};
            pc_advantage_segment(tile_inputs, reward_tile[lane], value_tile[lane], width,
                                 params, &carry);
        }
        __syncthreads();

        if (lane < width) {
            for (int r = 0; r < block_rows; r++) {
                const int64_t step = (first_row + r) * length + start + lane;
                advantages[step] = reward_tile[r][lane];
                returns[step] = value_tile[r][lane];
            }
        }
        __syncthreads();
    }
}

}  // namespace

// Arrays are C-contiguous device memory of `device`: values [rows, length + 1], the rest
// [rows, length]; final_values and ratios may be NULL. Enqueues the kernel on `stream`
// (a cudaStream_t; NULL for the legacy default stream) and returns a cudaError_t code
// (0 on success) without synchronizing.
PC_EXPORT int puffercore_advantage_cuda(const float* values, const float* rewards,
                                        const uint8_t* terminals, const uint8_t* truncations,
                                        const float* final_values, const float* ratios,
                                        float* advantages, float* returns, int64_t rows,
                                        int64_t length, float gamma, float lambda,
                                        float rho_clip, float c_clip, int device,
                                        void* stream) {
    if (rows <= 0 || length <= 0) return cudaSuccess;
    // This library has its own (static) runtime, whose current device is not torch's.
    cudaError_t error = cudaSetDevice(device);
    if (error != cudaSuccess) return error;
    const PcAdvantageParams params = {gamma, lambda, rho_clip, c_clip};
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;  // grid.x limit
    advantage_kernel<<<unsigned(blocks), kRowsPerBlock, 0, cudaStream_t(stream)>>>(
        values, rewards, terminals, truncations, final_values, ratios, advantages, returns,
        rows, length, params);
    return cudaGetLastError();
}

PC_EXPORT const char* puffercore_cuda_error_string(int error) {
    return cudaGetErrorString(cudaError_t(error));
}
