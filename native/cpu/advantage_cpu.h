/* CPU driver for the advantage kernel (math in puffercore/advantage.h): rows are split
 * into contiguous chunks, one per thread. */
#ifndef PUFFERCORE_ADVANTAGE_CPU_H
#define PUFFERCORE_ADVANTAGE_CPU_H

#include <stdint.h>

#include "puffercore/advantage.h"

/* Arrays are C-contiguous: values [rows, length + 1], the rest [rows, length];
 * final_values and ratios may be NULL. Runs on up to max_threads threads (0: all
 * hardware threads), fewer for small inputs. Returns -1, or the first row that has a
 * truncation while final_values is NULL. */
int64_t pc_advantage_cpu(const float* values, const float* rewards, const uint8_t* terminals,
                         const uint8_t* truncations, const float* final_values,
                         const float* ratios, float* advantages, float* returns, int64_t rows,
                         int64_t length, PcAdvantageParams params, int max_threads);

#endif
