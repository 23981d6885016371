// How a request's tokens are chosen and when it stops.
#ifndef TANDEM_COMMON_SAMPLING_SAMPLING_PARAMS_H_
#define TANDEM_COMMON_SAMPLING_SAMPLING_PARAMS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "common/types/dtype.h"

namespace tandem {

// The most top logprobs a request may ask for (OpenAI's top_logprobs limit; vLLM's default).
inline constexpr int32_t kMaxLogprobs = 20;

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy
  float top_p = 1.0f;               // (0, 1]
  int32_t top_k = 0;                // 0 or -1 = off
  float min_p = 0.0f;               // [0, 1]
  std::optional<uint64_t> seed;     // same seed, same output
  float repetition_penalty = 1.0f;  // > 0; applies to prompt and output tokens (HF/vLLM semantics)
  float presence_penalty = 0.0f;    // [-2, 2]; output tokens only (OpenAI semantics)
  float frequency_penalty = 0.0f;   // [-2, 2]; output tokens only
  int32_t max_tokens = 16;          // >= 1
  std::vector<TokenId> stop_token_ids;  // in addition to the model's EOS unless ignore_eos
  bool ignore_eos = false;
  int32_t logprobs = -1;  // -1: none; 0: chosen token only; N: chosen + top-N (<= 20)

  bool greedy() const { return temperature <= 0.0f; }
  // InvalidArgument naming the first bad field.
  absl::Status Validate(int vocab_size) const;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_SAMPLING_SAMPLING_PARAMS_H_
