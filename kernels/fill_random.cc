#include "kernels/fill_random.h"

#include "kernels/cuda_status.h"
#include "kernels/fill_random_launch.h"

namespace tandem::kernels {

absl::Status FillRandomBf16(__nv_bfloat16* dst, size_t n, float lo, float hi, uint64_t seed,
                            cudaStream_t stream) {
  if (n > 0 && dst == nullptr) return absl::InvalidArgumentError("FillRandomBf16: null dst");
  if (!(hi >= lo)) return absl::InvalidArgumentError("FillRandomBf16: needs lo <= hi");
  return CudaStatus(internal::LaunchFillRandomBf16(dst, n, lo, hi, seed, stream), "FillRandomBf16");
}

}  // namespace tandem::kernels
