// RMSNorm fused with the residual add. The residual stream stays f32 on the device; each
// sub-layer's output (a bf16 GEMM result, plus an optional bias) is added into it here, and the
// normalized row is written in bf16 for the next GEMM.
#ifndef TANDEM_KERNELS_RMS_NORM_H_
#define TANDEM_KERNELS_RMS_NORM_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace tandem::kernels {

struct RmsNormResidualArgs {
  float* residual = nullptr;                  // [n, hidden], updated in place when delta is set
  const __nv_bfloat16* delta = nullptr;       // [n, hidden] or null: nothing is added
  const __nv_bfloat16* delta_bias = nullptr;  // [hidden] or null; added with delta (needs delta)
  const __nv_bfloat16* weight = nullptr;      // [hidden]
  int n = 0;
  int hidden = 0;
  float eps = 1e-5f;
  __nv_bfloat16* out = nullptr;  // [n, hidden]
};

// For each row r: if delta, residual[r] += f32(delta[r]) (+ f32(delta_bias)), in f32;
// out[r] = bf16(f32(weight) * (residual[r] * rsqrt(mean(residual[r]^2) + eps))).
// Checks: non-null pointers, n >= 0, hidden > 0, eps > 0, delta_bias only with delta.
absl::Status RmsNormResidual(const RmsNormResidualArgs& args, cudaStream_t stream);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_RMS_NORM_H_
