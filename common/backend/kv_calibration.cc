#include "common/backend/kv_calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tandem {

std::vector<TokenId> Fp8CalibrationTokens(const ModelConfig& config) {
  // max_position_embeddings 0: no position limit.
  const int n = config.max_position_embeddings > 0
                    ? std::min(kFp8CalibrationTokens, config.max_position_embeddings)
                    : kFp8CalibrationTokens;
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

KvScales Fp8ScalesFromCalibrationPool(const KvLayout& layout, int num_tokens,
                                      const std::function<float(int64_t offset)>& value_at) {
  const int kv_heads = layout.num_kv_heads;
  const int bs = layout.block_size;
  std::vector<float> amax(static_cast<size_t>(layout.num_layers) * 2 * kv_heads, 0.0f);
  for (int l = 0; l < layout.num_layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      for (int h = 0; h < kv_heads; ++h) {
        float m = 0.0f;
        for (int pos = 0; pos < num_tokens; ++pos) {
          const int64_t row = layout.Offset(l, kv, pos / bs, h, pos % bs);
          for (int i = 0; i < layout.head_dim; ++i) m = std::max(m, std::fabs(value_at(row + i)));
        }
        amax[(static_cast<size_t>(l) * 2 + kv) * kv_heads + h] = m;
      }
    }
  }
  return Fp8ScalesFromAmax(layout.num_layers, kv_heads, amax);
}

}  // namespace tandem
