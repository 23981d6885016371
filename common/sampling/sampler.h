// Chooses one token from one logits row, with vLLM's semantics.
//
// Pipeline: penalties (see penalties.h) -> greedy argmax when temperature == 0 (ties go to the
// lowest token id) -> otherwise logits / temperature -> top-k -> top-p (the smallest
// highest-probability set whose mass reaches top_p, renormalized after top-k) -> min-p (drop
// tokens whose probability is below min_p times the highest one) -> one draw from the remaining
// mass with the request's own SamplingRng.
//
// Logprobs are the model's raw log-softmax: computed from the logits as the backend produced
// them, before penalties, temperature and filtering (vLLM's default "raw_logprobs" mode). So the
// logprob of a sampled token does not depend on the sampling knobs, and top-N lists are the
// model's own N most likely tokens.
#ifndef TANDEM_COMMON_SAMPLING_SAMPLER_H_
#define TANDEM_COMMON_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "common/sampling/penalties.h"
#include "common/sampling/rng.h"
#include "common/sampling/sampling_params.h"
#include "common/types/dtype.h"

namespace tandem {

struct TokenLogprob {
  TokenId token = -1;
  float logprob = 0.0f;
  bool operator==(const TokenLogprob&) const = default;
};

struct SampleResult {
  TokenId token = -1;
  // Raw logprob of `token`; set only when params.logprobs >= 0 (else 0).
  float logprob = 0.0f;
  // The params.logprobs most likely tokens by raw logprob, most likely first (ties: lower id
  // first); empty when params.logprobs <= 0.
  std::vector<TokenLogprob> top_logprobs;
};

// Not thread-safe: one per sampling thread. Owns vocabulary-sized scratch buffers that grow once,
// so steady-state sampling allocates nothing (top_logprobs reuses `result`'s capacity).
class Sampler {
 public:
  // `logits`: one row over the whole vocabulary. `prompt`/`output`: the sequence's tokens so far
  // (for penalties). `rng`: the sequence's generator (untouched by greedy sampling). `params` must
  // have passed Validate().
  void Sample(std::span<const float> logits, const SamplingParams& params,
              std::span<const TokenId> prompt, std::span<const TokenId> output, SamplingRng* rng,
              SampleResult* result);

  // The distribution Sample draws from: (token, probability) pairs, probabilities summing to 1,
  // in the order the draw walks them (most likely first when top-k or top-p is active, else token
  // order); a single pair for greedy requests. For tests and tools; allocates.
  std::vector<std::pair<TokenId, float>> Distribution(std::span<const float> logits,
                                                      const SamplingParams& params,
                                                      std::span<const TokenId> prompt,
                                                      std::span<const TokenId> output);

 private:
  // Fills candidates_/weights_ with the kept tokens and their unnormalized probabilities; returns
  // their total.
  double BuildCandidates(std::span<const float> logits, const SamplingParams& params,
                         std::span<const TokenId> prompt, std::span<const TokenId> output);
  // Sorts the first `n` of order_ (by scaled logit, descending; ties by id) given that
  // order_[0, done) is already sorted and holds the top `done`.
  void SortTop(size_t done, size_t n);

  std::vector<float> work_;          // penalized, temperature-scaled logits
  std::vector<int32_t> order_;       // token ids, top ones sorted first
  std::vector<TokenId> candidates_;  // kept tokens, in draw order
  std::vector<float> weights_;       // exp(logit - max) of the kept tokens
  PenaltyScratch penalty_scratch_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_SAMPLING_SAMPLER_H_
