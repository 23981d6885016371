// Internal to kernels/: the CUDA launches behind kernels/embedding.h, defined in embedding.cu and
// called by embedding.cc once the arguments are checked. Plain C++ and CUDA runtime only.
#ifndef TANDEM_KERNELS_EMBEDDING_LAUNCH_H_
#define TANDEM_KERNELS_EMBEDDING_LAUNCH_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::kernels::internal {

// Preconditions (checked by the caller): vocab > 0, hidden > 0, n > 0, non-null pointers.
cudaError_t LaunchEmbeddingGather(const __nv_bfloat16* table, int vocab, int hidden,
                                  const int32_t* ids, int n, float* x, cudaStream_t stream);

// Preconditions: width > 0, n > 0, non-null pointers.
cudaError_t LaunchGatherRows(const __nv_bfloat16* src, int width, const int32_t* rows, int n,
                             __nv_bfloat16* dst, cudaStream_t stream);

}  // namespace tandem::kernels::internal

#endif  // TANDEM_KERNELS_EMBEDDING_LAUNCH_H_
