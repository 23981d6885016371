#include "kernels/embedding.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda_status.h"
#include "kernels/embedding_launch.h"

namespace tandem::kernels {

absl::Status EmbeddingGather(const __nv_bfloat16* table, int vocab, int hidden, const int32_t* ids,
                             int n, float* x, cudaStream_t stream) {
  if (vocab <= 0) return absl::InvalidArgumentError(absl::StrCat("EmbeddingGather: vocab ", vocab));
  if (hidden <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("EmbeddingGather: hidden ", hidden));
  }
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("EmbeddingGather: n ", n));
  if (n == 0) return absl::OkStatus();
  if (table == nullptr) return absl::InvalidArgumentError("EmbeddingGather: table is null");
  if (ids == nullptr) return absl::InvalidArgumentError("EmbeddingGather: ids is null");
  if (x == nullptr) return absl::InvalidArgumentError("EmbeddingGather: x is null");
  return CudaStatus(internal::LaunchEmbeddingGather(table, vocab, hidden, ids, n, x, stream),
                    "EmbeddingGather kernel launch");
}

absl::Status GatherRows(const __nv_bfloat16* src, int width, const int32_t* rows, int n,
                        __nv_bfloat16* dst, cudaStream_t stream) {
  if (width <= 0) return absl::InvalidArgumentError(absl::StrCat("GatherRows: width ", width));
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("GatherRows: n ", n));
  if (n == 0) return absl::OkStatus();
  if (src == nullptr) return absl::InvalidArgumentError("GatherRows: src is null");
  if (rows == nullptr) return absl::InvalidArgumentError("GatherRows: rows is null");
  if (dst == nullptr) return absl::InvalidArgumentError("GatherRows: dst is null");
  return CudaStatus(internal::LaunchGatherRows(src, width, rows, n, dst, stream),
                    "GatherRows kernel launch");
}

}  // namespace tandem::kernels
