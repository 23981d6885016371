#include "common/engine/sequence.h"

#include <algorithm>
#include <utility>

namespace tandem {

std::string_view SequenceStatusName(SequenceStatus status) {
  switch (status) {
    case SequenceStatus::kWaiting:
      return "waiting";
    case SequenceStatus::kRunning:
      return "running";
    case SequenceStatus::kPreempted:
      return "preempted";
    case SequenceStatus::kAwaitingKv:
      return "awaiting_kv";
    case SequenceStatus::kPrefilled:
      return "prefilled";
    case SequenceStatus::kPaused:
      return "paused";
    case SequenceStatus::kFinished:
      return "finished";
  }
  return "?";
}

Sequence::Sequence(RequestId id, std::vector<TokenId> prompt, const SamplingParams& params,
                   uint64_t seed, int32_t reserve_tokens)
    : id(id),
      tokens(std::move(prompt)),
      num_prompt_tokens(static_cast<int32_t>(tokens.size())),
      params(params),
      rng(seed) {
  tokens.reserve(std::max<size_t>(tokens.size(), std::max(reserve_tokens, 0)));
}

Usage Sequence::usage() const {
  return Usage{.prompt_tokens = num_prompt_tokens,
               .completion_tokens = num_output_tokens(),
               .cached_tokens = std::clamp(num_cached_tokens, 0, num_prompt_tokens)};
}

}  // namespace tandem
