// Internal: the CUDA side of kernels/fill_random.h (no Abseil).
#ifndef TANDEM_KERNELS_FILL_RANDOM_LAUNCH_H_
#define TANDEM_KERNELS_FILL_RANDOM_LAUNCH_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tandem::kernels::internal {

cudaError_t LaunchFillRandomBf16(__nv_bfloat16* dst, size_t n, float lo, float hi, uint64_t seed,
                                 cudaStream_t stream);

}  // namespace tandem::kernels::internal

#endif  // TANDEM_KERNELS_FILL_RANDOM_LAUNCH_H_
