// Speculative decoding (issue 20, part 2): what proposes draft tokens, and how a verification
// step's logits rows decide which of them the target model accepts.
//
// The engine (engine_speculative.cc) drives it around each step:
//  1. before Schedule(), every running greedy sequence that is decoding gets up to
//     `num_speculative_tokens` draft tokens appended to its tokens (Sequence::num_draft_tokens);
//  2. the scheduler computes the last real token and the drafts in one chunk and asks for the
//     logits of each of those positions (ScheduledChunk::num_logits);
//  3. after the forward pass, row i's target token is compared with draft i+1: the drafts up to the
//     first mismatch are accepted, and the target token at the mismatch (or after the last draft)
//     is the step's own new token. Rejected drafts are cut from the sequence before the scheduler
//     records the step, so their KV slots and blocks count as never written.
// Greedy decoding gives exactly the tokens it gives without speculation; sampled sequences do not
// speculate (yet).
//
// Proposers:
//  - ngram (prompt lookup, as vLLM's `ngram` method): the longest suffix of the context, between
//    `ngram_min` and `ngram_max` tokens, that also occurs earlier in it; the tokens that followed
//    its latest earlier occurrence are the drafts, the copy running on into the drafts themselves
//    when it reaches the end of the context (text that repeats with a period of p tokens gives a
//    full set of drafts, not p). No model, no state.
#ifndef TANDEM_COMMON_ENGINE_SPECULATIVE_H_
#define TANDEM_COMMON_ENGINE_SPECULATIVE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/types/dtype.h"

namespace tandem {

class FlagSet;

enum class SpeculativeMethod {
  kNone,
  kNgram,
};

// "none" | "ngram"; InvalidArgument naming the choices otherwise.
absl::StatusOr<SpeculativeMethod> ParseSpeculativeMethod(std::string_view name);
std::string_view SpeculativeMethodName(SpeculativeMethod method);

struct SpeculativeOptions {
  SpeculativeMethod method = SpeculativeMethod::kNone;
  int32_t num_speculative_tokens = 3;  // drafts per step, at most
  int32_t ngram_min = 1;               // the shortest suffix matched
  int32_t ngram_max = 4;               // the longest suffix matched
  bool enabled() const { return method != SpeculativeMethod::kNone; }
  // InvalidArgument unless 1 <= num_speculative_tokens <= kMaxSpeculativeTokens and
  // 1 <= ngram_min <= ngram_max, when enabled.
  absl::Status Validate() const;
};

inline constexpr int32_t kMaxSpeculativeTokens = 16;

// --speculative, --num-speculative-tokens, --ngram-min, --ngram-max, for every binary that runs an
// engine (nodes, tandem-generate), under the section "Speculative decoding".
void AddSpeculativeFlags(FlagSet& flags, SpeculativeOptions* options);

// Up to `max_drafts` tokens continuing `context` by prompt lookup (see above); empty when no
// suffix of at least `ngram_min` tokens recurs. O(context · ngram_max).
std::vector<TokenId> ProposeByNgram(std::span<const TokenId> context, int32_t ngram_min,
                                    int32_t ngram_max, int32_t max_drafts);

// How many of `drafts` the target accepts, given its greedy token after each prefix:
// `target[i]` is its token after the context and drafts[0, i). Accepted: the longest prefix with
// drafts[i] == target[i]. `target` has drafts.size() + 1 entries.
int32_t AcceptedDrafts(std::span<const TokenId> drafts, std::span<const TokenId> target);

}  // namespace tandem

#endif  // TANDEM_COMMON_ENGINE_SPECULATIVE_H_
