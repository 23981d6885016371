#include "kernels/gemm_reference.h"

#include <cstdint>
#include <vector>

namespace tandem::kernels {

// Each product of two bf16 values is exact in f32; the products are summed in f64 (four
// independent partial sums, so the compiler can vectorize) and the sum is rounded once to f32.
// This makes the reference close to the exact result, whatever order a GPU sums in.
void LinearReference(const Bf16Bits* x, int rows, int k, const Bf16Bits* w, int n, float* y) {
  const std::vector<float> xf = FromBf16({x, static_cast<size_t>(rows) * k});
  const std::vector<float> wf = FromBf16({w, static_cast<size_t>(n) * k});
  for (int r = 0; r < rows; ++r) {
    const float* xr = xf.data() + int64_t{r} * k;
    for (int j = 0; j < n; ++j) {
      const float* wj = wf.data() + int64_t{j} * k;
      double partial[4] = {0.0, 0.0, 0.0, 0.0};
      int i = 0;
      for (; i + 4 <= k; i += 4) {
        for (int lane = 0; lane < 4; ++lane) {
          partial[lane] += static_cast<double>(xr[i + lane] * wj[i + lane]);
        }
      }
      for (; i < k; ++i) partial[0] += static_cast<double>(xr[i] * wj[i]);
      y[int64_t{r} * n + j] =
          static_cast<float>((partial[0] + partial[1]) + (partial[2] + partial[3]));
    }
  }
}

}  // namespace tandem::kernels
