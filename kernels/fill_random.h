// Fills device memory with deterministic pseudo-random bf16 values, for random-weight models built
// directly on the GPU (benchmarks at real model sizes without a host copy of the weights).
#ifndef TANDEM_KERNELS_FILL_RANDOM_H_
#define TANDEM_KERNELS_FILL_RANDOM_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace tandem::kernels {

// dst[i] = bf16(lo + (hi - lo) * SamplingUniform(seed, i)) for i in [0, n).
absl::Status FillRandomBf16(__nv_bfloat16* dst, size_t n, float lo, float hi, uint64_t seed,
                            cudaStream_t stream);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_FILL_RANDOM_H_
