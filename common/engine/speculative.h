// Speculative decoding (issue 20, part 2): what proposes draft tokens, and how a verification
// step's logits rows decide which of them the target model accepts.
//
// The engine (engine_speculative.cc) drives it around each step:
//  1. before Schedule(), every running sequence that is decoding gets up to
//     `num_speculative_tokens` draft tokens appended to its tokens (Sequence::num_draft_tokens);
//  2. the scheduler computes the last real token and the drafts in one chunk and asks for the
//     logits of each of those positions (ScheduledChunk::num_logits);
//  3. after the forward pass, row i's target token (sampled from row i exactly as a plain decode
//     step samples) is compared with draft i+1: the drafts up to the first mismatch are accepted,
//     and the target token at the mismatch (or after the last draft) is the step's own new token.
//     Rejected drafts are cut from the sequence before the scheduler records the step, so their
//     KV slots and blocks count as never written.
// Greedy decoding gives exactly the tokens it gives without speculation. Sampled decoding too, for
// a seeded request: with a proposer that drafts one token per position (q a point mass), the
// rejection scheme of Leviathan et al. / Chen et al. (accept with probability min(1, p/q), else
// draw from norm(max(0, p - q))) is a draw from p compared with the draft, one draw per emitted
// token, so the request's counter-based generator sees the same draws in the same order.
//
// Proposers (DraftProposer):
//  - ngram (prompt lookup, as vLLM's `ngram` method): the longest suffix of the context, between
//    `ngram_min` and `ngram_max` tokens, that also occurs earlier in it; the tokens that followed
//    its latest earlier occurrence are the drafts, the copy running on into the drafts themselves
//    when it reaches the end of the context (text that repeats with a period of p tokens gives a
//    full set of drafts, not p). No model, no state.
//  - draft (a draft model, draft_model.h): a smaller model with the target's tokenizer proposes
//    its greedy tokens, batched over the step's decoding sequences, its own KV cache kept in step
//    with the target's (drafts the target rejected roll back by themselves). Built by the binary
//    that builds the backend and handed in through EngineOptions::draft_model.
//  - sim (the sim backend only): each draft is the sim's own
//    next token with probability `sim_acceptance_rate`, independently per position, else a wrong
//    one: a draft of known quality, so that tandem-sim, tandem-plan and a sim cluster can weigh
//    speculation against batch size (SimBackend::ProposeDrafts, handed in through
//    EngineOptions::draft_proposer where the backend is built).
#ifndef TANDEM_COMMON_ENGINE_SPECULATIVE_H_
#define TANDEM_COMMON_ENGINE_SPECULATIVE_H_

#include <cstdint>
#include <functional>
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
  kDraft,  // a draft model (draft_model.h)
  kSim,
};

// "none" | "ngram" | "draft" | "sim"; InvalidArgument naming the choices otherwise.
absl::StatusOr<SpeculativeMethod> ParseSpeculativeMethod(std::string_view name);
std::string_view SpeculativeMethodName(SpeculativeMethod method);

struct SpeculativeOptions {
  SpeculativeMethod method = SpeculativeMethod::kNone;
  int32_t num_speculative_tokens = 3;  // drafts per step, at most
  int32_t ngram_min = 1;               // the shortest suffix matched
  int32_t ngram_max = 4;               // the longest suffix matched
  double sim_acceptance_rate = 0.7;    // sim: each draft is right with this probability
  std::string draft_model_dir;         // draft: the draft model (--draft-model DIR)
  bool enabled() const { return method != SpeculativeMethod::kNone; }
  // InvalidArgument unless 1 <= num_speculative_tokens <= kMaxSpeculativeTokens,
  // 1 <= ngram_min <= ngram_max, 0 <= sim_acceptance_rate <= 1 for sim, and draft_model_dir is
  // set exactly for draft.
  absl::Status Validate() const;
};

inline constexpr int32_t kMaxSpeculativeTokens = 16;

// --speculative, --draft-model, --num-speculative-tokens, --ngram-min, --ngram-max,
// --sim-acceptance-rate, for
// every binary that runs an engine (nodes, tandem-generate, tandem-sim), under the section
// "Speculative decoding".
void AddSpeculativeFlags(FlagSet& flags, SpeculativeOptions* options);

// What proposes a sequence's drafts: replaces `drafts` with up to `max_drafts` (>= 1) tokens to
// follow `context` (the sequence's prompt and output so far), empty when it has no guess. Called
// on the engine thread only, once per decoding sequence and step.
using DraftProposer = std::function<void(std::span<const TokenId> context, int32_t max_drafts,
                                         std::vector<TokenId>* drafts)>;

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
