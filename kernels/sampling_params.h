// One row's sampling parameters for the GPU sampler (kernels/sampling.h), in a plain header so the
// CUDA side (sampling_launch.h, sampling.cu) and the CPU reference see the same struct without
// Abseil or the CUDA runtime.
#ifndef TANDEM_KERNELS_SAMPLING_PARAMS_H_
#define TANDEM_KERNELS_SAMPLING_PARAMS_H_

#include <cstdint>

namespace tandem::kernels {

// One row's sampling parameters (a device array, one per row).
struct SamplingRowParams {
  float temperature = 1.0f;  // <= 0: greedy
  int32_t top_k = 0;         // <= 0 or >= vocab: no top-k
  float top_p = 1.0f;        // in (0, 1]
  uint64_t seed = 0;         // u = SamplingUniform(seed, counter) (kernels/sampling_rng.h)
  uint64_t counter = 0;
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_SAMPLING_PARAMS_H_
