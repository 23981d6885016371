// CpuBackend::CalibrateFp8Scales: the calibration prefill that picks an fp8 pool's scales
// (common/kv/kv_scales.h says how and why).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/backend/cpu_backend.h"
#include "common/backend/kv_calibration.h"
#include "common/util/status_macros.h"

namespace tandem {

absl::Status CpuBackend::CalibrateFp8Scales() {
  const std::vector<TokenId> tokens = Fp8CalibrationTokens(config_);
  const int n = static_cast<int>(tokens.size());
  KvLayout calib = layout_;
  calib.dtype = DType::kF32;
  calib.num_blocks = (n + layout_.block_size - 1) / layout_.block_size;
  calib.scale_fingerprint = 0;
  AlignedFloats pool;
  if (!pool.Reset(static_cast<size_t>(calib.total_elements()))) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate the fp8 KV calibration pool: ", calib.total_bytes(), " bytes"));
  }
  std::vector<int32_t> table(calib.num_blocks);
  std::iota(table.begin(), table.end(), 0);

  // Run the prefill against the f32 calibration pool, with no scales yet, then restore the pool.
  const KvLayout real_layout = layout_;
  void* const real_pool = kv_data_;
  kv_scales_ = KvScales{};
  kv_inv_scales_.clear();
  layout_ = calib;
  kv_data_ = pool.data();
  const ForwardItem item{.tokens = tokens, .start_pos = 0, .block_table = table};
  const absl::Status status = Forward(ForwardBatch{.items = {&item, 1}}, LogitsOutput{});
  layout_ = real_layout;
  kv_data_ = real_pool;
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("fp8 KV calibration prefill: ", status.message()));
  }

  const float* values = pool.data();
  kv_scales_ =
      Fp8ScalesFromCalibrationPool(calib, n, [values](int64_t offset) { return values[offset]; });
  kv_inv_scales_.resize(kv_scales_.values.size());
  for (size_t i = 0; i < kv_inv_scales_.size(); ++i) {
    kv_inv_scales_[i] = 1.0f / kv_scales_.values[i];
  }
  layout_.scale_fingerprint = KvScalesFingerprint(kv_scales_);
  return absl::OkStatus();
}

}  // namespace tandem
