// CpuBackend::CalibrateFp8Scales: the calibration prefill that picks an fp8 pool's scales
// (common/kv/kv_scales.h says how and why).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/backend/cpu_backend.h"
#include "common/util/status_macros.h"

namespace tandem {
namespace {

// Long enough for every head to see a spread of tokens and positions, short enough to cost
// well under a second on the models the cpu backend serves.
constexpr int kCalibrationTokens = 256;

// The calibration prompt: the model's BOS when it has one (real prompts start with it, and its
// K/V are often the largest), then splitmix64 draws over the vocabulary. A pure function of the
// model's config, so every node serving the model runs the same prefill.
std::vector<TokenId> CalibrationTokens(const ModelConfig& config, int n) {
  std::vector<TokenId> tokens;
  tokens.reserve(n);
  if (config.bos_token_id >= 0 && config.bos_token_id < config.vocab_size) {
    tokens.push_back(config.bos_token_id);
  }
  uint64_t state = 0x74616e64656d3230ull;  // "tandem20"
  while (static_cast<int>(tokens.size()) < n) {
    state += 0x9e3779b97f4a7c15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    tokens.push_back(static_cast<TokenId>(z % static_cast<uint64_t>(config.vocab_size)));
  }
  return tokens;
}

}  // namespace

absl::Status CpuBackend::CalibrateFp8Scales() {
  // max_position_embeddings 0: no position limit.
  const int n = config_.max_position_embeddings > 0
                    ? std::min(kCalibrationTokens, config_.max_position_embeddings)
                    : kCalibrationTokens;
  const std::vector<TokenId> tokens = CalibrationTokens(config_, n);
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

  const int kv_heads = calib.num_kv_heads;
  const int hd = calib.head_dim;
  const int bs = calib.block_size;
  std::vector<float> amax(static_cast<size_t>(calib.num_layers) * 2 * kv_heads, 0.0f);
  for (int l = 0; l < calib.num_layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      for (int h = 0; h < kv_heads; ++h) {
        float m = 0.0f;
        for (int pos = 0; pos < n; ++pos) {
          const float* row = pool.data() + calib.Offset(l, kv, pos / bs, h, pos % bs);
          for (int i = 0; i < hd; ++i) m = std::max(m, std::fabs(row[i]));
        }
        amax[(static_cast<size_t>(l) * 2 + kv) * kv_heads + h] = m;
      }
    }
  }
  kv_scales_ = Fp8ScalesFromAmax(calib.num_layers, kv_heads, amax);
  kv_inv_scales_.resize(kv_scales_.values.size());
  for (size_t i = 0; i < kv_inv_scales_.size(); ++i) {
    kv_inv_scales_[i] = 1.0f / kv_scales_.values[i];
  }
  layout_.scale_fingerprint = KvScalesFingerprint(kv_scales_);
  return absl::OkStatus();
}

}  // namespace tandem
