// Per-token-row operations of the CPU backend's forward pass, in f32 as Hugging Face computes them.
#ifndef TANDEM_COMMON_BACKEND_ROW_OPS_H_
#define TANDEM_COMMON_BACKEND_ROW_OPS_H_

#include <cmath>

#include "common/backend/simd.h"

namespace tandem {

// y = w * (x * rsqrt(mean(x^2) + eps)); y may alias x.
inline void RmsNorm(const float* x, const float* w, int n, float eps, float* y) {
  const float mean_square = simd::SumSquares(x, n) / static_cast<float>(n);
  const float r = 1.0f / std::sqrt(mean_square + eps);
  for (int i = 0; i < n; ++i) y[i] = w[i] * (x[i] * r);
}

// out = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
inline void SiluMul(const float* gate, const float* up, int n, float* out) {
  for (int i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_ROW_OPS_H_
