// The CPU backend's matrix product: every linear layer is y = x · Wᵀ (+ bias) (+ y) with x the
// batch's token rows [rows, k] and W in PyTorch's [n, k] layout, so each output element is a dot
// product of two contiguous rows. Each element is accumulated in the same order as simd::Dot
// whatever the number of rows, the tiling or the thread split: results are batch-invariant.
#ifndef TANDEM_COMMON_BACKEND_CPU_GEMM_H_
#define TANDEM_COMMON_BACKEND_CPU_GEMM_H_

#include <cstdint>

#include "common/util/thread_pool.h"

namespace tandem {

struct GemmArgs {
  const float* x = nullptr;  // [rows, k], row stride ldx
  int64_t ldx = 0;
  int rows = 0;
  int k = 0;
  const float* w = nullptr;  // [n, k], rows contiguous
  int n = 0;
  const float* bias = nullptr;  // [n] or null
  float* y = nullptr;           // [rows, n], row stride ldy
  int64_t ldy = 0;
  bool accumulate = false;  // y += x·Wᵀ (+ bias) instead of y = ...
};

// Computes output columns [n_begin, n_end) on the calling thread.
void GemmColumns(const GemmArgs& args, int n_begin, int n_end);

// Splits the output columns (weight rows) over the pool's threads, so every thread streams its
// own slice of W once for all rows of x.
void Gemm(const GemmArgs& args, ThreadPool& pool);

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_CPU_GEMM_H_
