#include "advantage_cpu.h"

#include <algorithm>
#include <system_error>
#include <thread>
#include <vector>

namespace {

// Starting a thread costs tens of microseconds; below this many steps per thread the
// kernel (memory-bound, about 1 ns per step) would spend more time starting threads
// than computing.
constexpr int64_t kMinStepsPerThread = int64_t(1) << 16;

// Instantiated with and without ratios: with the null ratios a compile-time constant, the
// plain-GAE loop loses the per-step ratio test and clipping (about a third faster).
template <bool kWithRatios>
int64_t compute_rows(const float* values, const float* rewards, const uint8_t* terminals,
                     const uint8_t* truncations, const float* final_values, const float* ratios,
                     float* advantages, float* returns, int64_t row_begin, int64_t row_end,
                     int64_t length, PcAdvantageParams params) {
    int64_t first_bad_row = -1;
    for (int64_t row = row_begin; row < row_end; row++) {
        const int64_t offset = row * length;
        const PcAdvantageInputs row_inputs = {
            values + row * (length + 1), rewards + offset, terminals + offset,
            truncations + offset, final_values ? final_values + offset : nullptr,
            kWithRatios ? ratios + offset : nullptr};
        const int missing_final_value =
            pc_advantage_row(row_inputs, advantages + offset, returns + offset, length, params);
        if (missing_final_value && first_bad_row < 0) first_bad_row = row;
    }
    return first_bad_row;
}

}  // namespace

int64_t pc_advantage_cpu(const float* values, const float* rewards, const uint8_t* terminals,
                         const uint8_t* truncations, const float* final_values,
                         const float* ratios, float* advantages, float* returns, int64_t rows,
                         int64_t length, PcAdvantageParams params, int max_threads) {
    if (rows <= 0 || length <= 0) return -1;
    // Asked once: hardware_concurrency() reads the CPU affinity, about 10 us per call.
    static const int64_t hardware_threads = std::thread::hardware_concurrency();
    int64_t threads = max_threads > 0 ? max_threads : hardware_threads;
    threads = std::clamp<int64_t>(
        std::min({threads, rows, rows * length / kMinStepsPerThread}), 1, rows);

    std::vector<int64_t> first_bad_rows(threads, -1);
    auto run_chunk = [&](int64_t chunk) {
        const int64_t row_begin = rows * chunk / threads;
        const int64_t row_end = rows * (chunk + 1) / threads;
        const auto compute = ratios ? compute_rows<true> : compute_rows<false>;
        first_bad_rows[chunk] = compute(values, rewards, terminals, truncations, final_values,
                                        ratios, advantages, returns, row_begin, row_end, length,
                                        params);
    };
    std::vector<std::thread> workers;
    workers.reserve(threads - 1);
    for (int64_t chunk = 1; chunk < threads; chunk++) {
        try {
            workers.emplace_back(run_chunk, chunk);
        } catch (const std::system_error&) {
            run_chunk(chunk);  // no thread available: slower, never wrong
        }
    }
    run_chunk(0);
    for (std::thread& worker : workers) worker.join();

    for (int64_t first_bad_row : first_bad_rows)
        if (first_bad_row >= 0) return first_bad_row;
    return -1;
}
