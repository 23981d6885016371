#include "common/sampling/sampling_params.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tandem {

absl::Status SamplingParams::Validate(int vocab_size) const {
  // Comparisons are written so that NaN fails them.
  if (!(temperature >= 0.0f) || std::isinf(temperature)) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature must be >= 0 and finite, got ", temperature));
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("top_p must be in (0, 1], got ", top_p));
  }
  if (top_k < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_k must be -1 or 0 (disabled) or >= 1, got ", top_k));
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("min_p must be in [0, 1], got ", min_p));
  }
  if (!(repetition_penalty > 0.0f) || std::isinf(repetition_penalty)) {
    return absl::InvalidArgumentError(
        absl::StrCat("repetition_penalty must be > 0 and finite, got ", repetition_penalty));
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("presence_penalty must be in [-2, 2], got ", presence_penalty));
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("frequency_penalty must be in [-2, 2], got ", frequency_penalty));
  }
  if (max_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens must be >= 1, got ", max_tokens));
  }
  for (size_t i = 0; i < stop_token_ids.size(); ++i) {
    const TokenId t = stop_token_ids[i];
    if (t < 0 || t >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stop_token_ids[", i, "] = ", t, " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  if (logprobs < -1 || logprobs > kMaxLogprobs) {
    return absl::InvalidArgumentError(
        absl::StrCat("logprobs must be in [-1, ", kMaxLogprobs, "] (-1: none), got ", logprobs));
  }
  return absl::OkStatus();
}

}  // namespace tandem
