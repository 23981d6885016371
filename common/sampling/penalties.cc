#include "common/sampling/penalties.h"

namespace tandem {
namespace {

bool InRange(TokenId t, size_t vocab) { return t >= 0 && static_cast<size_t>(t) < vocab; }

}  // namespace

bool HasPenalties(const SamplingParams& params) {
  return params.repetition_penalty != 1.0f || params.presence_penalty != 0.0f ||
         params.frequency_penalty != 0.0f;
}

void ApplyPenalties(std::span<float> logits, const SamplingParams& params,
                    std::span<const TokenId> prompt, std::span<const TokenId> output,
                    PenaltyScratch* scratch) {
  const size_t vocab = logits.size();
  std::vector<int32_t>& counts = scratch->counts;
  if (counts.size() < vocab) counts.resize(vocab, 0);

  const float r = params.repetition_penalty;
  if (r != 1.0f) {
    auto penalize_once = [&](TokenId t) {
      if (!InRange(t, vocab) || counts[t] != 0) return;
      counts[t] = 1;
      float& x = logits[t];
      x = x > 0.0f ? x / r : x * r;
    };
    for (TokenId t : prompt) penalize_once(t);
    for (TokenId t : output) penalize_once(t);
    for (TokenId t : prompt) {
      if (InRange(t, vocab)) counts[t] = 0;
    }
    for (TokenId t : output) {
      if (InRange(t, vocab)) counts[t] = 0;
    }
  }

  const float f = params.frequency_penalty;
  const float p = params.presence_penalty;
  if (f != 0.0f || p != 0.0f) {
    for (TokenId t : output) {
      if (InRange(t, vocab)) ++counts[t];
    }
    for (TokenId t : output) {
      if (!InRange(t, vocab) || counts[t] == 0) continue;
      logits[t] -= f * static_cast<float>(counts[t]) + p;
      counts[t] = 0;
    }
  }
}

}  // namespace tandem
