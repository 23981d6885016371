// Speculative decoding in the engine (speculative.h has the whole step): drafts go onto decoding
// sequences before the scheduler builds the step, and the step's logits rows decide
// which stand. Engine thread only; touches the scheduler's running sequences and the step.
#include <algorithm>
#include <span>
#include <vector>

#include "common/engine/engine.h"
#include "spdlog/spdlog.h"

namespace tandem {

void Engine::ProposeDrafts() {
  const SpeculativeOptions& spec = options_.speculative;
  draft_asks_.clear();
  for (Sequence* seq : scheduler_.running()) {
    // Decoding (one token to compute), and not a prefill-only request. Greedy or sampled: see
    // VerifyDrafts for why sampling stays exact.
    if (seq->num_uncomputed_tokens() != 1 || seq->num_draft_tokens != 0 ||
        seq->kv_exporter != nullptr) {
      continue;
    }
    // A step emits its accepted drafts and one token more: room for all of them in max_tokens
    // and in the context.
    const int32_t room = std::min({spec.num_speculative_tokens,
                                   seq->params.max_tokens - seq->num_output_tokens() - 1,
                                   max_context_tokens_ - seq->num_tokens() - 1});
    if (room <= 0) continue;
    if (draft_model_ != nullptr) {
      // Asked all at once below: the draft model batches the step's sequences.
      draft_asks_.push_back(DraftAsk{.id = seq->id, .context = seq->tokens, .max_drafts = room});
      continue;
    }
    draft_proposer_(seq->tokens, room, &drafts_);
    AppendDrafts(seq, drafts_, room);
  }
  if (draft_asks_.empty()) return;
  if (draft_outputs_.size() < draft_asks_.size()) draft_outputs_.resize(draft_asks_.size());
  for (size_t i = 0; i < draft_asks_.size(); ++i) draft_asks_[i].drafts = &draft_outputs_[i];
  // A failing draft model costs this step its drafts, never a request.
  if (absl::Status proposed = draft_model_->Propose(draft_asks_); !proposed.ok()) {
    spdlog::warn("draft model: {}; this step goes without drafts", proposed.ToString());
    return;
  }
  for (const DraftAsk& ask : draft_asks_) {
    Sequence* seq = scheduler_.Find(ask.id);
    if (seq != nullptr) AppendDrafts(seq, *ask.drafts, ask.max_drafts);
  }
}

void Engine::AppendDrafts(Sequence* seq, std::span<const TokenId> drafts, int32_t room) {
  if (drafts.empty()) return;
  if (static_cast<int32_t>(drafts.size()) > room) drafts = drafts.first(room);
  seq->tokens.insert(seq->tokens.end(), drafts.begin(), drafts.end());
  seq->num_draft_tokens = static_cast<int32_t>(drafts.size());
}

void Engine::VerifyDrafts(const BatchPlan& plan) {
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
    verified.rng_counter = seq->rng.counter();
    // Row i: the target's token after the context and drafts [0, i), sampled as a plain decode
    // step would sample it (its output so far is exactly those tokens, and its generator is at the
    // same draw). Draft i is accepted when that token equals it. For a sampled request this is the
    // rejection scheme of Leviathan et al. and Chen et al. with a draft that puts all its mass on
    // one token (q = 1 there): accept with probability min(1, p/q) = p(draft), else draw from
    // max(0, p - q) renormalized = p without the draft; a draw from p compared with the draft
    // does exactly that. Each emitted token costs one draw, as without speculation, so a seeded
    // request gives the very same tokens with speculation on or off.
    for (int32_t i = 0; i <= drafts; ++i) {
      SampleResult& result = verified.results.emplace_back();
      if (plan.sample_on_device) {
        result.token = device_tokens_[row + i];
        if (!seq->params.greedy()) seq->rng.set_counter(seq->rng.counter() + 1);  // one draw
      } else {
        std::span<const float> logits(logits_.data() + (row + i) * vocab, vocab);
        const std::span<const TokenId> output =
            std::span<const TokenId>(seq->tokens)
                .subspan(seq->num_prompt_tokens, first_draft + i - seq->num_prompt_tokens);
        sampler_.Sample(logits, seq->params, seq->prompt(), output, &seq->rng, &result);
      }
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
  // Each token's event carries the draws up to and including its own (a greedy request draws
  // none), as a step per token would: a stream resumed elsewhere after any of them continues the
  // generator where that token left it.
  const size_t accepted = verified.results.size() - 1;
  seq->tokens.resize(seq->tokens.size() - accepted);
  uint64_t counter = verified.rng_counter;
  for (const SampleResult& result : verified.results) {
    if (!seq->params.greedy()) seq->rng.set_counter(++counter);
    if (EmitToken(seq, result)) return;  // the request ended: `seq` is gone
  }
}

}  // namespace tandem
