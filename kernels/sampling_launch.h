// Internal to kernels/: the CUDA launches behind kernels/sampling.h, defined in sampling.cu and
// called by sampling.cc once the arguments are checked. Plain C++ and CUDA runtime only.
#ifndef TANDEM_KERNELS_SAMPLING_LAUNCH_H_
#define TANDEM_KERNELS_SAMPLING_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/sampling_params.h"

namespace tandem::kernels::internal {

// Preconditions (checked by the caller): logits and tokens non-null, rows > 0, vocab > 0.
cudaError_t LaunchGreedySample(const float* logits, int rows, int vocab, int32_t* tokens,
                               cudaStream_t stream);

// Preconditions (checked by the caller): logits, params and tokens non-null, rows > 0, vocab > 0.
cudaError_t LaunchTopKTopPSample(const float* logits, int rows, int vocab,
                                 const SamplingRowParams* params, int32_t* tokens,
                                 cudaStream_t stream);

}  // namespace tandem::kernels::internal

#endif  // TANDEM_KERNELS_SAMPLING_LAUNCH_H_
