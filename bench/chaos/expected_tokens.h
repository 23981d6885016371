// The fixed prompts of a chaos run and the tokens each must produce. Every request is greedy with
// ignore_eos and exactly max_tokens, so a completed stream must carry exactly its prompt's
// expected tokens; anything else is corruption (a wrong, missing, repeated or extra token).
// Where the expectation comes from:
//   - cpu backend: tandem-generate (the engine in one process, no router, no transfer), run once
//     on all prompts with the same model and max_tokens;
//   - sim backend: tandem-generate refuses --backend sim, so the sim's own token function
//     (SimBackend::NextToken, the code the nodes run) with the token limit of the served model.
#ifndef TANDEM_BENCH_CHAOS_EXPECTED_TOKENS_H_
#define TANDEM_BENCH_CHAOS_EXPECTED_TOKENS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem::chaos {

using TokenIds = std::vector<int32_t>;

// `n` prompts of token ids, lengths spread evenly over [min_len, max_len], ids drawn (seeded)
// from [100, id_limit): ordinary tokens of any Llama/Qwen-style vocabulary when id_limit is at
// most half the vocabulary.
std::vector<TokenIds> MakePrompts(int n, int min_len, int max_len, int32_t id_limit, uint64_t seed);

// The sim backend's output for each prompt (the served model's config.json gives the token
// limit, as on the nodes).
absl::StatusOr<std::vector<TokenIds>> SimExpectedTokens(const std::string& model_dir,
                                                        const std::vector<TokenIds>& prompts,
                                                        int max_tokens);

// tandem-generate's greedy output (--temperature 0 --ignore-eos) for each prompt, on the cpu
// backend; `work_dir` receives the prompts file and its output.
absl::StatusOr<std::vector<TokenIds>> GenerateExpectedTokens(const std::string& generate_binary,
                                                             const std::string& model_dir,
                                                             const std::vector<TokenIds>& prompts,
                                                             int max_tokens,
                                                             const std::string& work_dir,
                                                             absl::Duration timeout);

// How far `got` is from `want`: positions that differ plus the difference in length (0: equal).
int TokenErrors(const TokenIds& want, const TokenIds& got);

}  // namespace tandem::chaos

#endif  // TANDEM_BENCH_CHAOS_EXPECTED_TOKENS_H_
