// Repetition, presence and frequency penalties, applied in place to one logits row.
#ifndef TANDEM_COMMON_SAMPLING_PENALTIES_H_
#define TANDEM_COMMON_SAMPLING_PENALTIES_H_

#include <cstdint>
#include <span>
#include <vector>

#include "common/sampling/sampling_params.h"
#include "common/types/dtype.h"

namespace tandem {

// Per-vocabulary counters reused across calls (all zero between calls), so penalties allocate
// nothing once the vector has grown to the vocabulary size.
struct PenaltyScratch {
  std::vector<int32_t> counts;
};

// Whether ApplyPenalties would change anything.
bool HasPenalties(const SamplingParams& params);

// In order, as vLLM does:
//  1. repetition_penalty r (Hugging Face / CTRL): for each distinct token in prompt + output, a
//     positive logit is divided by r and a non-positive one multiplied by r;
//  2. frequency_penalty f and presence_penalty p (OpenAI): for each distinct token in output only,
//     logit -= f * count + p.
// Token ids outside the row are ignored.
void ApplyPenalties(std::span<float> logits, const SamplingParams& params,
                    std::span<const TokenId> prompt, std::span<const TokenId> output,
                    PenaltyScratch* scratch);

}  // namespace tandem

#endif  // TANDEM_COMMON_SAMPLING_PENALTIES_H_
