// The compute backend tandem-generate runs on, chosen by --backend: "cpu" (f32 on the host, any
// build) or "cuda" (bf16 on one GPU, builds configured with CUDA only).
#ifndef TANDEM_TOOLS_GENERATE_GENERATE_BACKEND_H_
#define TANDEM_TOOLS_GENERATE_GENERATE_BACKEND_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/backend/backend.h"
#include "common/model/model_weights.h"
#include "tools/generate/generate_options.h"

namespace tandem {

// Whether this build has the cuda backend (TANDEM_HAVE_CUDA).
bool GenerateHasCuda();

// Checks options.backend before anything is loaded: InvalidArgument for a kind other than cpu or
// cuda, Unimplemented for cuda in a build without CUDA, Unavailable for cuda where no GPU is
// usable (the CUDA runtime's reason in the message).
absl::Status CheckGenerateBackend(const GenerateOptions& options);

// Creates the backend for `weights` with the options' KV pool and batch sizes. The backend keeps
// its own copy of the weights (f32 on the host, or bf16 on the GPU), so `weights` may be dropped
// afterwards.
absl::StatusOr<std::unique_ptr<Backend>> CreateGenerateBackend(const GenerateOptions& options,
                                                               const ModelWeights& weights);

}  // namespace tandem

#endif  // TANDEM_TOOLS_GENERATE_GENERATE_BACKEND_H_
