#include "tools/sim/sim_request.h"

namespace tandem::sim {
namespace {

double Seconds(int64_t nanos) { return static_cast<double>(nanos) * 1e-9; }

}  // namespace

std::vector<int32_t> PromptIds(const bench::BenchRequest& request, size_t index) {
  std::vector<int32_t> prompt = bench::TracePromptIds(request);
  if (prompt.empty()) {
    for (int32_t j = 0; j < request.prompt_len; ++j) {
      prompt.push_back(1000 + static_cast<int32_t>((index * 7919 + j * 31) % 30000));
    }
  }
  return prompt;
}

std::vector<int32_t> AttemptPrompt(const RequestState& s, size_t index) {
  std::vector<int32_t> prompt = s.prompt;
  const int32_t sent = static_cast<int32_t>(s.token_times.size());
  for (int32_t k = 0; k < sent; ++k) {
    prompt.push_back(1000 + static_cast<int32_t>((index * 31 + k * 7919) % 30000));
  }
  return prompt;
}

bench::RequestResult ResultOf(const RequestState& s) {
  bench::RequestResult r;
  r.success = s.done && s.ok && !s.token_times.empty();
  r.error = s.done ? s.error : "never finished";
  r.start_s = Seconds(s.sent);
  r.prompt_tokens = s.prompt_len;
  r.output_tokens = static_cast<int32_t>(s.token_times.size());
  if (!s.token_times.empty()) {
    r.ttft_s = Seconds(s.token_times.front() - s.sent);
    r.e2e_s = Seconds(s.token_times.back() - s.sent);
    for (size_t k = 1; k < s.token_times.size(); ++k) {
      r.itl_s.push_back(Seconds(s.token_times[k] - s.token_times[k - 1]));
    }
  }
  return r;
}

}  // namespace tandem::sim
