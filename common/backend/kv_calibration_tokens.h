// The prompt an fp8 KV pool's scales are calibrated on (common/kv/kv_scales.h): the same for every
// backend and node serving a model, so that their scales agree.
#ifndef TANDEM_COMMON_BACKEND_KV_CALIBRATION_TOKENS_H_
#define TANDEM_COMMON_BACKEND_KV_CALIBRATION_TOKENS_H_

#include <vector>

#include "common/model/model_config.h"
#include "common/types/dtype.h"

namespace tandem {

// Long enough for every head to see a spread of tokens and positions, short enough to cost well
// under a second on the models the cpu backend serves.
inline constexpr int kFp8CalibrationTokens = 256;

// The model's BOS when it has one (real prompts start with it, and its K/V are often the largest),
// then splitmix64 draws over the vocabulary: kFp8CalibrationTokens tokens, or
// max_position_embeddings when that is smaller. A pure function of the model's config.
std::vector<TokenId> Fp8CalibrationTokens(const ModelConfig& config);

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_KV_CALIBRATION_TOKENS_H_
