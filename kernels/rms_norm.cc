#include "kernels/rms_norm.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda_status.h"
#include "kernels/rms_norm_launch.h"

namespace tandem::kernels {

absl::Status RmsNormResidual(const RmsNormResidualArgs& args, cudaStream_t stream) {
  if (args.residual == nullptr)
    return absl::InvalidArgumentError("RmsNormResidual: residual is null");
  if (args.weight == nullptr) return absl::InvalidArgumentError("RmsNormResidual: weight is null");
  if (args.out == nullptr) return absl::InvalidArgumentError("RmsNormResidual: out is null");
  if (args.delta_bias != nullptr && args.delta == nullptr) {
    return absl::InvalidArgumentError("RmsNormResidual: delta_bias is set without delta");
  }
  if (args.n < 0) return absl::InvalidArgumentError(absl::StrCat("RmsNormResidual: n ", args.n));
  if (args.hidden <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("RmsNormResidual: hidden ", args.hidden));
  }
  if (!(args.eps > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("RmsNormResidual: eps ", args.eps));
  }
  if (args.n == 0) return absl::OkStatus();
  return CudaStatus(
      internal::LaunchRmsNormResidual(args.residual, args.delta, args.delta_bias, args.weight,
                                      args.n, args.hidden, args.eps, args.out, stream),
      "RmsNormResidual kernel launch");
}

}  // namespace tandem::kernels
