#include "kernels/swiglu.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda_status.h"
#include "kernels/swiglu_launch.h"

namespace tandem::kernels {

absl::Status SwiGlu(const __nv_bfloat16* gate_up, int n, int inter, __nv_bfloat16* out,
                    cudaStream_t stream) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("SwiGlu: n ", n));
  if (inter <= 0) return absl::InvalidArgumentError(absl::StrCat("SwiGlu: inter ", inter));
  if (n == 0) return absl::OkStatus();
  if (gate_up == nullptr) return absl::InvalidArgumentError("SwiGlu: gate_up is null");
  if (out == nullptr) return absl::InvalidArgumentError("SwiGlu: out is null");
  return CudaStatus(internal::LaunchSwiGlu(gate_up, n, inter, out, stream), "SwiGlu kernel launch");
}

}  // namespace tandem::kernels
