// CudaBackend::CalibrateFp8Scales: the calibration prefill that picks an fp8 pool's scales, as the
// cpu backend's (common/kv/kv_scales.h says how and why), over a temporary bf16 pool on the GPU.
// The scales are powers of two, so the bf16 pool's rounding moves one only where a head's amax
// sits within bf16's precision of a power-of-two boundary; a cpu node and a cuda node serving the
// same model can still differ there, and then refuse each other's KV by fingerprint (as they
// would for any other layout difference).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/backend/cuda/cuda_backend.h"
#include "common/backend/kv_calibration.h"
#include "common/util/half.h"
#include "common/util/status_macros.h"
#include "kernels/cuda_status.h"

namespace tandem {

absl::Status CudaBackend::CalibrateFp8Scales() {
  const std::vector<TokenId> tokens = Fp8CalibrationTokens(config_);
  const int n = static_cast<int>(tokens.size());
  KvLayout calib = layout_;
  calib.dtype = DType::kBF16;
  calib.num_blocks = (n + layout_.block_size - 1) / layout_.block_size;
  calib.scale_fingerprint = 0;
  auto pool = kernels::DeviceBuffer::Allocate(calib.total_bytes());
  if (!pool.ok()) {
    return absl::Status(pool.status().code(),
                        absl::StrCat("fp8 KV calibration pool: ", pool.status().message()));
  }
  std::vector<int32_t> table(calib.num_blocks);
  std::iota(table.begin(), table.end(), 0);

  // The prefill against the bf16 calibration pool, then the real pool back.
  const KvLayout real_layout = layout_;
  void* const real_pool = kv_pool_;
  layout_ = calib;
  kv_pool_ = pool->data();
  const ForwardItem item{.tokens = tokens, .start_pos = 0, .block_table = table};
  const absl::Status status = Forward(ForwardBatch{.items = {&item, 1}}, LogitsOutput{});
  layout_ = real_layout;
  kv_pool_ = real_pool;
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("fp8 KV calibration prefill: ", status.message()));
  }
  std::vector<uint16_t> host(static_cast<size_t>(calib.total_elements()));
  TANDEM_RETURN_IF_CUDA_ERROR(
      cudaMemcpy(host.data(), pool->data(), calib.total_bytes(), cudaMemcpyDeviceToHost),
      "copying the fp8 KV calibration pool");

  const uint16_t* bits = host.data();
  kv_scales_ = Fp8ScalesFromCalibrationPool(
      calib, n, [bits](int64_t offset) { return Bf16ToF32(bits[offset]); });
  auto scales = kernels::DeviceBuffer::Allocate(kv_scales_.values.size() * sizeof(float));
  if (!scales.ok()) return scales.status();
  kv_scales_device_ = std::move(*scales);
  TANDEM_RETURN_IF_CUDA_ERROR(cudaMemcpy(kv_scales_device_.data(), kv_scales_.values.data(),
                                         kv_scales_device_.bytes(), cudaMemcpyHostToDevice),
                              "copying the fp8 KV scales");
  layout_.scale_fingerprint = KvScalesFingerprint(kv_scales_);
  return absl::OkStatus();
}

}  // namespace tandem
