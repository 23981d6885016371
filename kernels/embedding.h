// Row gathers: the token embedding lookup that starts a forward pass (bf16 table rows widened into
// the f32 residual stream), and the gather of the rows that want logits before the LM head.
#ifndef TANDEM_KERNELS_EMBEDDING_H_
#define TANDEM_KERNELS_EMBEDDING_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace tandem::kernels {

// x[i, :] = f32(table[ids[i], :]) for i in [0, n). An id outside [0, vocab) writes a row of zeros
// (the host validates ids; the kernel never reads outside the table). n == 0 is a no-op.
absl::Status EmbeddingGather(const __nv_bfloat16* table, int vocab, int hidden, const int32_t* ids,
                             int n, float* x, cudaStream_t stream);

// dst[i, :] = src[rows[i], :] for i in [0, n); rows of `width` bf16 values. Rows are not checked
// against src's size (they come from the backend's own plan).
absl::Status GatherRows(const __nv_bfloat16* src, int width, const int32_t* rows, int n,
                        __nv_bfloat16* dst, cudaStream_t stream);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_EMBEDDING_H_
