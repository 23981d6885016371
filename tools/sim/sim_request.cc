#include "tools/sim/sim_request.h"

#include <algorithm>

namespace tandem::sim {
namespace {

double Seconds(int64_t nanos) { return static_cast<double>(nanos) * 1e-9; }

}  // namespace

void RequestState::NoteToken(int64_t at) {
  if (num_tokens == 0) {
    first_token_at = at;
    itl_s.reserve(static_cast<size_t>(std::max(output_len - 1, 0)));
  } else {
    itl_s.push_back(Seconds(at - last_token_at));
  }
  last_token_at = at;
  ++num_tokens;
}

std::vector<int32_t> PromptIds(const bench::BenchRequest& request, size_t index, size_t capacity) {
  std::vector<int32_t> prompt;
  prompt.reserve(std::max(capacity, static_cast<size_t>(std::max(request.prompt_len, 0))));
  bench::AppendTracePromptIds(request, &prompt);
  if (prompt.empty()) {
    for (int32_t j = 0; j < request.prompt_len; ++j) {
      prompt.push_back(1000 + static_cast<int32_t>((index * 7919 + j * 31) % 30000));
    }
  }
  return prompt;
}

std::vector<int32_t> TakeAttemptPrompt(RequestState& s, size_t index) {
  if (s.num_tokens == 0) return std::move(s.prompt);
  std::vector<int32_t> prompt = CopyPrompt(s);
  for (int32_t k = 0; k < s.num_tokens; ++k) {
    prompt.push_back(1000 + static_cast<int32_t>((index * 31 + k * 7919) % 30000));
  }
  return prompt;
}

std::vector<int32_t> CopyPrompt(const RequestState& s) {
  std::vector<int32_t> prompt;
  prompt.reserve(s.prompt.size() + static_cast<size_t>(std::max(s.output_len, 0)));
  prompt.assign(s.prompt.begin(), s.prompt.end());
  return prompt;
}

bench::RequestResult ResultOf(RequestState&& s) {
  bench::RequestResult r;
  r.success = s.done && s.ok && s.num_tokens > 0;
  r.error = s.done ? s.error : "never finished";
  r.start_s = Seconds(s.sent);
  r.prompt_tokens = s.prompt_len;
  r.output_tokens = s.num_tokens;
  if (s.prefill_node != nullptr) r.prefill_node = s.prefill_node->name();
  if (s.decode_node != nullptr) r.decode_node = s.decode_node->name();
  if (s.num_tokens > 0) {
    r.ttft_s = Seconds(s.first_token_at - s.sent);
    r.e2e_s = Seconds(s.last_token_at - s.sent);
    r.itl_s = std::move(s.itl_s);
  }
  return r;
}

}  // namespace tandem::sim
