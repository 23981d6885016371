#include "kernels/sampling.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda_status.h"
#include "kernels/sampling_launch.h"

namespace tandem::kernels {
namespace {

absl::Status CheckShape(const char* what, const float* logits, int rows, int vocab,
                        const int32_t* tokens) {
  if (logits == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, ": logits is null"));
  if (tokens == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, ": tokens is null"));
  if (rows < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": rows ", rows));
  if (vocab <= 0) return absl::InvalidArgumentError(absl::StrCat(what, ": vocab ", vocab));
  return absl::OkStatus();
}

}  // namespace

absl::Status GreedySample(const float* logits, int rows, int vocab, int32_t* tokens,
                          cudaStream_t stream) {
  if (absl::Status status = CheckShape("GreedySample", logits, rows, vocab, tokens); !status.ok()) {
    return status;
  }
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(internal::LaunchGreedySample(logits, rows, vocab, tokens, stream),
                    "GreedySample kernel launch");
}

absl::Status TopKTopPSample(const float* logits, int rows, int vocab,
                            const SamplingRowParams* params, int32_t* tokens, cudaStream_t stream) {
  if (absl::Status status = CheckShape("TopKTopPSample", logits, rows, vocab, tokens);
      !status.ok()) {
    return status;
  }
  if (params == nullptr) return absl::InvalidArgumentError("TopKTopPSample: params is null");
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(internal::LaunchTopKTopPSample(logits, rows, vocab, params, tokens, stream),
                    "TopKTopPSample kernel launch");
}

}  // namespace tandem::kernels
