// Where tandem-bench's requests come from:
//   random        token-id prompts and output lengths drawn from a length distribution
//                 (uniform like vLLM's `--random-range-ratio`, or lognormal for chat-like tails);
//   sharegpt      a ShareGPT-format JSON file ([{"conversations": [{"from": "human", "value":
//                 ...}, {"from": "gpt", "value": ...}, ...]}, ...]): the first human turn is the
//                 prompt, the reply's token count the output length (vLLM's filter: prompts and
//                 replies of >= 4 tokens, prompt <= 1024, prompt + reply <= 2048);
//   shared-prefix N system prompts x M questions each: token-id prompts that share a prefix;
//   trace         a JSON-lines trace in the Mooncake format, one request per line:
//                 {"timestamp": MS, "input_length": N, "output_length": M, "hash_ids": [...]}:
//                 sent at its timestamp; prompts whose hash_ids agree share those 512-token blocks.
// Token-id prompts draw ids uniformly from [token_id_min, token_id_max), a range of ordinary
// tokens (no special tokens), so the server sees exactly prompt_len tokens.
#ifndef TANDEM_BENCH_SERVE_DATASETS_H_
#define TANDEM_BENCH_SERVE_DATASETS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/serve/bench_request.h"

namespace tandem::bench {

struct TokenIdRange {
  int32_t min = 1000;   // inclusive
  int32_t max = 30000;  // exclusive
};

// A length distribution with mean `mean` (tokens, >= 1):
//   "fixed":     always mean;
//   "uniform":   uniform integers in [mean * (1 - range_ratio), mean * (1 + range_ratio)];
//   "lognormal": lognormal with median chosen so the mean is `mean`, log-space sigma `sigma`;
// every draw clipped to [1, max] (max 0: no upper clip).
struct LengthDistribution {
  std::string kind = "fixed";
  double mean = 128;
  double range_ratio = 0.0;  // uniform, [0, 1)
  double sigma = 0.8;        // lognormal, > 0
  int32_t max = 0;
};

struct RandomDatasetOptions {
  int num_prompts = 100;
  LengthDistribution input{"fixed", 1024};
  LengthDistribution output{"fixed", 128};
  TokenIdRange ids;
  uint64_t seed = 0;
};

struct SharedPrefixOptions {
  int num_prefixes = 4;          // N system prompts
  int questions_per_prefix = 8;  // M questions each; N*M requests in all
  int prefix_len = 1024;
  int question_len = 64;
  int output_len = 128;
  bool shuffle = true;  // else prefix 0's questions first, then prefix 1's, ...
  TokenIdRange ids;
  uint64_t seed = 0;
};

// Counts the tokens of a text (the served model's tokenizer).
using TokenCounter = std::function<absl::StatusOr<int32_t>(std::string_view text)>;

struct ShareGptOptions {
  std::string path;
  // Sampled (seeded shuffle) from the conversations that pass the filter; fewer passing than
  // this is an InvalidArgument error (not a silent shortfall). Conversations without a human
  // turn followed by a reply are skipped.
  int num_prompts = 100;
  std::optional<int32_t> fixed_output_len;  // set: every request gets this output length
  uint64_t seed = 0;
};

// Trace lines are sent in file order and must be in time order (a timestamp earlier than the
// line before it is an error); blank lines are skipped; timestamps are used as given (not shifted
// to start at 0): timestamp_s = timestamp_ms / 1000 * time_scale. A hash id stands for a block
// of hash_block_tokens token ids derived from (seed, hash id) alone, so equal hash ids give equal
// blocks across requests; a prompt is its blocks in order cut to input_length, or extended with
// tokens of its own (seeded by the line) when its blocks are shorter. hash_ids may be absent.
struct TraceOptions {
  std::string path;
  int num_prompts = 0;      // 0: every line; else the first N
  double time_scale = 1.0;  // timestamps are multiplied by this (0.5: twice as fast)
  int32_t hash_block_tokens = 512;
  TokenIdRange ids;
  uint64_t seed = 0;
  // Leave prompt_ids empty and describe each prompt in deferred_prompt instead (TracePromptIds
  // builds it): a trace of millions of long prompts then fits in memory.
  bool defer_prompt_ids = false;
};

// The token ids of a request's prompt: prompt_ids, or the ids its deferred_prompt describes
// (the same LoadTrace would have built); empty for a text prompt.
std::vector<int32_t> TracePromptIds(const BenchRequest& request);
// The same ids appended to `out` (which the caller may have reserved room in).
void AppendTracePromptIds(const BenchRequest& request, std::vector<int32_t>* out);

// Errors name the file, the line or entry, and what is wrong (InvalidArgument for bad options,
// NotFound for a missing file, InvalidArgument for malformed content).
absl::StatusOr<std::vector<BenchRequest>> RandomDataset(const RandomDatasetOptions& options);
absl::StatusOr<std::vector<BenchRequest>> SharedPrefixDataset(const SharedPrefixOptions& options);
absl::StatusOr<std::vector<BenchRequest>> LoadShareGpt(const ShareGptOptions& options,
                                                       const TokenCounter& count_tokens);
absl::StatusOr<std::vector<BenchRequest>> LoadTrace(const TraceOptions& options);

// OK, or InvalidArgument naming `name` (e.g. "--random-input-len") and what is wrong.
absl::Status ValidateLengthDistribution(const LengthDistribution& dist, std::string_view name);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_SERVE_DATASETS_H_
