// Speculative decoding in the engine (speculative.h has the whole step): drafts go onto greedy
// decoding sequences before the scheduler builds the step, and the step's logits rows decide
// which stand. Engine thread only; touches the scheduler's running sequences and the step.
#include <algorithm>
#include <span>
#include <vector>

#include "common/engine/engine.h"

namespace tandem {

void Engine::ProposeDrafts() {
  const SpeculativeOptions& spec = options_.speculative;
  for (Sequence* seq : scheduler_.running()) {
    // Decoding (one token to compute), greedy, and not a prefill-only request.
    if (seq->num_uncomputed_tokens() != 1 || seq->num_draft_tokens != 0 ||
        seq->kv_exporter != nullptr || !seq->params.greedy()) {
      continue;
    }
    // A step emits its accepted drafts and one token more: room for all of them in max_tokens
    // and in the context.
    const int32_t room = std::min({spec.num_speculative_tokens,
                                   seq->params.max_tokens - seq->num_output_tokens() - 1,
                                   max_context_tokens_ - seq->num_tokens() - 1});
    if (room <= 0) continue;
    const std::vector<TokenId> drafts =
        ProposeByNgram(seq->tokens, spec.ngram_min, spec.ngram_max, room);
    if (drafts.empty()) continue;
    seq->tokens.insert(seq->tokens.end(), drafts.begin(), drafts.end());
    seq->num_draft_tokens = static_cast<int32_t>(drafts.size());
  }
}

void Engine::VerifyDrafts() {
  verified_.clear();
  const size_t vocab = static_cast<size_t>(vocab_size_);
  size_t row = 0;
  for (ScheduledChunk& chunk : step_.chunks) {
    if (!chunk.want_logits) continue;
    if (chunk.num_logits == 1) {
      ++row;
      continue;
    }
    Sequence* seq = chunk.seq;
    const int32_t drafts = chunk.num_logits - 1;  // == seq->num_draft_tokens
    const int32_t first_draft = seq->num_tokens() - drafts;
    VerifiedDrafts& verified = verified_.emplace_back();
    // Row i: the target's token after the context and drafts [0, i), sampled as a plain decode
    // step would sample it (its output so far is exactly those tokens).
    for (int32_t i = 0; i <= drafts; ++i) {
      std::span<const float> logits(logits_.data() + (row + i) * vocab, vocab);
      const std::span<const TokenId> output =
          std::span<const TokenId>(seq->tokens)
              .subspan(seq->num_prompt_tokens, first_draft + i - seq->num_prompt_tokens);
      SampleResult& result = verified.results.emplace_back();
      sampler_.Sample(logits, seq->params, seq->prompt(), output, &seq->rng, &result);
      if (i == drafts || result.token != seq->tokens[first_draft + i]) break;
    }
    const int32_t accepted = static_cast<int32_t>(verified.results.size()) - 1;
    ++num_spec_verifications_;
    num_spec_draft_tokens_ += drafts;
    num_spec_accepted_tokens_ += accepted;
    for (int32_t i = 0; i < accepted; ++i) ++spec_accepted_by_position_[i];
    // The rejected drafts' positions were computed but never happened: out of the sequence and
    // out of the chunk, so CompleteStep neither counts their KV nor caches their blocks.
    seq->tokens.resize(first_draft + accepted);
    seq->num_draft_tokens = 0;
    chunk.num_tokens -= drafts - accepted;
    row += static_cast<size_t>(chunk.num_logits);
  }
}

void Engine::EmitVerified(Sequence* seq, const VerifiedDrafts& verified) {
  // The accepted drafts' KV is recorded; take the drafts out of `tokens` so that each goes out
  // through EmitToken like any token (stop checks, events, counts) and the last row's follows.
  const size_t accepted = verified.results.size() - 1;
  seq->tokens.resize(seq->tokens.size() - accepted);
  for (const SampleResult& result : verified.results) {
    if (EmitToken(seq, result)) return;  // the request ended: `seq` is gone
  }
}

}  // namespace tandem
