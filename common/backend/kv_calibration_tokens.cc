#include "common/backend/kv_calibration_tokens.h"

#include <algorithm>
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

}  // namespace tandem
