// A draft model for speculative decoding (--speculative draft --draft-model DIR): a smaller model
// with the target's vocabulary that proposes each decoding sequence's next tokens greedily, with
// its own paged KV cache kept in step with the target's.
//
// Per sequence the draft remembers which tokens its KV holds (`computed`). Each step, for every
// decoding sequence at once:
//  1. catch up: the longest common prefix of `computed` and the sequence's context is what stays
//     valid, so drafts the target rejected roll back by themselves (their KV slots are simply
//     overwritten later); the rest of the context (the target's own token and any accepted drafts:
//     one to K + 1 tokens, or the whole prompt the first time, e.g. after a KV import on a decode
//     node) is computed in one batched pass whose last row gives draft 1;
//  2. draft positions 2..K: one batched one-token pass each over the sequences still drafting.
// The catch-up passes of one step share a token budget (`max_batch_tokens`): a long prompt is
// computed over several steps, proposing nothing until it is caught up, as the target's chunked
// prefill does.
//
// The drafts are the draft's greedy tokens (lowest id on ties): a point mass q, which is what
// keeps the target's sampling exact and seed-identical (speculative.h): the rejection scheme of
// Leviathan et al. / Chen et al. with q = 1 on the draft is a draw from p compared with it.
//
// Blocks come from the draft's own pool, one list per sequence. A sequence that cannot get the
// blocks it needs gives up its draft KV and proposes nothing this step (nobody waits for a draft).
// Engine thread only (Propose, Forget); stats() there or after the engine stopped.
#ifndef TANDEM_COMMON_ENGINE_DRAFT_MODEL_H_
#define TANDEM_COMMON_ENGINE_DRAFT_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/backend/backend.h"
#include "common/engine/request.h"
#include "common/types/dtype.h"
#include "common/util/clock.h"

namespace tandem {

// One decoding sequence's ask for drafts in a step.
struct DraftAsk {
  RequestId id = 0;
  std::span<const TokenId> context;        // prompt and output so far
  int32_t max_drafts = 0;                  // >= 1
  std::vector<TokenId>* drafts = nullptr;  // replaced; empty when this step proposes none
};

struct DraftModelStats {
  int64_t num_forwards = 0;         // batched passes of the draft model
  int64_t num_catch_up_tokens = 0;  // context tokens computed (prompts included)
  int64_t num_proposed_tokens = 0;  // drafts handed out
  int64_t num_out_of_blocks = 0;    // asks that got nothing for want of draft KV blocks
  int64_t busy_nanos = 0;           // time inside Propose
};

class DraftModel {
 public:
  // `draft` runs the draft model; its config must match `target`'s vocabulary (CheckDraftConfig).
  // `max_batch_tokens` bounds each step's catch-up tokens (>= 1).
  static absl::StatusOr<std::unique_ptr<DraftModel>> Create(std::unique_ptr<Backend> draft,
                                                            const ModelConfig& target,
                                                            int32_t max_batch_tokens,
                                                            Clock* clock = Clock::Real());

  // Fills every ask's drafts (see above). An error of the draft backend leaves every ask without
  // drafts and forgets the sequences of this call (their KV is recomputed next time).
  absl::Status Propose(std::span<DraftAsk> asks);
  // The sequence ended: its draft KV blocks go back to the pool.
  void Forget(RequestId id);

  const Backend& backend() const { return *backend_; }
  int32_t num_free_blocks() const { return static_cast<int32_t>(free_blocks_.size()); }
  int32_t num_sequences() const { return static_cast<int32_t>(seqs_.size()); }
  const DraftModelStats& stats() const { return stats_; }

 private:
  struct DraftSeq {
    std::vector<TokenId> computed;  // tokens whose KV the draft's pool holds, in order
    std::vector<int32_t> blocks;
  };
  // An ask this step, while its drafts are computed.
  struct Drafting {
    DraftAsk* ask = nullptr;
    DraftSeq* seq = nullptr;
  };

  DraftModel(std::unique_ptr<Backend> draft, int32_t max_batch_tokens, Clock* clock);

  // Grows or shrinks `seq`'s blocks to cover `tokens` positions; false (nothing changed) when the
  // pool has too few free blocks.
  bool FitBlocks(DraftSeq& seq, int64_t tokens);
  void FreeBlocks(DraftSeq& seq);
  // Runs items_ and appends each row's greedy token to its Drafting's drafts.
  absl::Status RunPass(std::span<const Drafting> rows);

  std::unique_ptr<Backend> backend_;
  const int32_t max_batch_tokens_;
  Clock* const clock_;
  const int32_t block_size_;
  const size_t vocab_;
  std::vector<int32_t> free_blocks_;
  absl::node_hash_map<RequestId, DraftSeq> seqs_;  // node map: Drafting points into it
  DraftModelStats stats_;
  // Scratch of one pass.
  std::vector<ForwardItem> items_;
  std::vector<TokenId> feed_;  // one-token passes: each item's token
  std::vector<float> logits_;
};

// Loads the draft model's weights and builds its backend, of the target's kind, with a pool of
// `num_kv_blocks`.
using DraftBackendFactory =
    std::function<absl::StatusOr<std::unique_ptr<Backend>>(int32_t num_kv_blocks)>;

// The draft model in `draft_dir` for the target in `target_dir`: checks the tokenizers
// (CheckDraftTokenizer), builds the draft's backend through `factory` with a pool of the target's
// block count plus one block per sequence (`max_num_seqs`: room for each sequence's drafts),
// checks its config (CheckDraftConfig) and wraps it. Errors name the draft directory.
absl::StatusOr<std::unique_ptr<DraftModel>> LoadDraftModel(
    const std::string& draft_dir, const std::string& target_dir, const Backend& target,
    int32_t max_batch_tokens, int32_t max_num_seqs, const DraftBackendFactory& factory);

// InvalidArgument unless a draft with `draft` config can propose for `target`: the same
// vocabulary size and the same bos and eos ids (it must read and write the same token ids).
absl::Status CheckDraftConfig(const ModelConfig& draft, const ModelConfig& target);

// InvalidArgument when both model directories have a tokenizer.json and the two differ (the
// draft was trained on another tokenizer); OK when they are equal or one has none.
absl::Status CheckDraftTokenizer(const std::string& draft_dir, const std::string& target_dir);

}  // namespace tandem

#endif  // TANDEM_COMMON_ENGINE_DRAFT_MODEL_H_
