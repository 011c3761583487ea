#include "advantage_cpu.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <vector>

namespace {

// Starting a thread costs tens of microseconds; below this many steps per thread the
// kernel (1 to 2 ns per step) would spend more time starting threads than computing.
constexpr int64_t kMinStepsPerThread = int64_t(1) << 16;
// Threads take rows in blocks of about this many steps from a shared counter, so a thread
// whose core is busy with other work does fewer rows instead of holding up the call.
constexpr int64_t kStepsPerBlock = int64_t(1) << 13;

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

    const int64_t rows_per_block = std::max<int64_t>(1, kStepsPerBlock / length);
    const auto compute = ratios ? compute_rows<true> : compute_rows<false>;
    std::atomic<int64_t> next_row{0};
    std::vector<int64_t> first_bad_rows(threads, -1);
    auto run_worker = [&](int64_t worker) {
        for (;;) {
            const int64_t row_begin = next_row.fetch_add(rows_per_block, std::memory_order_relaxed);
            if (row_begin >= rows) break;
            const int64_t first_bad_row = compute(
                values, rewards, terminals, truncations, final_values, ratios, advantages,
                returns, row_begin, std::min(row_begin + rows_per_block, rows), length, params);
            // Each worker's blocks come in increasing row order: keep its first bad row.
            if (first_bad_row >= 0 && first_bad_rows[worker] < 0)
                first_bad_rows[worker] = first_bad_row;
        }
    };
    std::vector<std::thread> workers;
    workers.reserve(threads - 1);
    for (int64_t worker = 1; worker < threads; worker++) {
        try {
            workers.emplace_back(run_worker, worker);
        } catch (const std::system_error&) {
            break;  // no more threads available: the others do all the rows
        }
    }
    run_worker(0);
    for (std::thread& worker : workers) worker.join();

    int64_t first_bad_row = -1;
    for (int64_t row : first_bad_rows)
        if (row >= 0 && (first_bad_row < 0 || row < first_bad_row)) first_bad_row = row;
    return first_bad_row;
}
