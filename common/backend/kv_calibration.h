// What the backends share of an fp8 KV pool's calibration (common/kv/kv_scales.h): the prompt,
// the same for every backend and node serving a model so that their scales agree, and the scales
// from what that prompt's prefill stored.
#ifndef TANDEM_COMMON_BACKEND_KV_CALIBRATION_H_
#define TANDEM_COMMON_BACKEND_KV_CALIBRATION_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "common/kv/kv_layout.h"
#include "common/kv/kv_scales.h"
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

// The scales of `layout`'s heads (Fp8ScalesFromAmax) from a calibration pool of that layout whose
// blocks 0, 1, ... hold positions [0, num_tokens): value_at(offset) is the pool's element at a
// KvLayout::Offset, as f32.
KvScales Fp8ScalesFromCalibrationPool(const KvLayout& layout, int num_tokens,
                                      const std::function<float(int64_t offset)>& value_at);

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_KV_CALIBRATION_H_
