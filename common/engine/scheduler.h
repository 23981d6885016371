// Continuous batching with chunked prefill and recompute-style preemption. Pure C++, no threads.
//
// Each Schedule() builds one step's batch under a token budget (max_num_batched_tokens) and a
// sequence cap (max_num_seqs), in this order:
//  1. running sequences with one token to compute (decodes), oldest admission first. A decode
//     needs a KV slot for its token; when the pool is out of blocks the most recently admitted
//     running sequence is preempted (its blocks freed, it goes back to the front of the waiting
//     queue, keeping its generated tokens) until the slot fits, or the sequence preempts itself.
//     A decode with draft tokens (speculative.h) computes them in the same chunk, with a slot and
//     a logits row each, when the budget and the pool allow; otherwise its drafts are dropped;
//  2. running sequences still prefilling (chunked prefill: a prompt larger than the leftover budget
//     is split across steps);
//  3. prefilled sequences (decode node: prompt KV imported from a prefill node), in arrival order,
//     while the sequence cap allows and their first decode slot fits without preempting;
//  4. waiting sequences, first come first served, while the budget, the sequence cap and the pool
//     allow (none when this step preempted anything). Admission allocates blocks for the whole
//     sequence (prompt, plus output so far after a preemption), reusing prefix-cache hits, and
//     computes from the first uncached token.
// The caller runs the batch, then calls CompleteStep(), then appends sampled tokens to the
// sequences whose chunk wanted logits, and Finish()es sequences that are done.
#ifndef TANDEM_COMMON_ENGINE_SCHEDULER_H_
#define TANDEM_COMMON_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/engine/sequence.h"
#include "common/kv/block_manager.h"
#include "common/util/clock.h"

namespace tandem {

struct SchedulerOptions {
  int32_t max_num_batched_tokens = 2048;  // tokens computed per step, all sequences together
  int32_t max_num_seqs = 256;             // sequences running at once
  // InvalidArgument unless both are >= 1 and max_num_batched_tokens >= max_num_seqs (so every
  // running sequence can decode in every step).
  absl::Status Validate() const;
};

// One sequence's share of a step: tokens [start_pos, start_pos + num_tokens) of seq->tokens.
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int32_t start_pos = 0;
  int32_t num_tokens = 0;
  bool want_logits = false;  // the chunk ends at the sequence's last token: sample after it
  // With want_logits: the logits of the chunk's last num_logits tokens (1 + the drafts it
  // verifies).
  int32_t num_logits = 1;
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;  // decodes first, then prefill chunks
  int32_t num_decodes = 0;             // chunks[0, num_decodes) are decodes
  int32_t num_batched_tokens = 0;
  std::vector<RequestId> preempted;  // sequences preempted while building this step

  bool empty() const { return chunks.empty(); }
  void Clear();
};

class Scheduler {
 public:
  // `block_manager` and `clock` are borrowed and must outlive the scheduler.
  Scheduler(const SchedulerOptions& options, BlockManager* block_manager, Clock* clock);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a new sequence (status kWaiting, no blocks) at the back of the waiting queue. Its id
  // must be unused.
  void Add(std::unique_ptr<Sequence> seq);
  // Queues a sequence whose prompt KV was written by another node: it holds blocks for its prompt,
  // num_computed_tokens == num_prompt_tokens, and its first output token is appended. It decodes
  // once admitted (step 3 above). Its id must be unused.
  void AddPrefilled(std::unique_ptr<Sequence> seq);

  // Builds the next step into `out` (cleared first). Pointers in it stay valid until the next
  // Schedule() or Finish() of that sequence.
  void Schedule(SchedulerOutput* out);

  // Records that `out`'s chunks were computed: advances num_computed_tokens and registers newly
  // full blocks in the prefix cache.
  void CompleteStep(const SchedulerOutput& out);

  // Ends a sequence wherever it is (waiting, preempted or running): frees its blocks, sets its
  // status and reason, and hands it back. nullptr if `id` is unknown (e.g. already finished).
  // Must not be called between Schedule() and CompleteStep() for a sequence in that step.
  // With `keep_blocks` the blocks stay allocated in the returned sequence's block_table (the
  // caller frees them later: a prefill node's export still reading them).
  std::unique_ptr<Sequence> Finish(RequestId id, FinishReason reason, bool keep_blocks = false);

  // Takes a sequence out wherever it is, as Finish does, but keeps its blocks and its status (a
  // decode node pausing it for live migration). nullptr if `id` is unknown.
  std::unique_ptr<Sequence> Remove(RequestId id);

  Sequence* Find(RequestId id);
  bool HasUnfinished() const { return !sequences_.empty(); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size() + prefilled_.size()); }
  // Prompt tokens whose KV is still to be computed, over waiting and running sequences. O(running):
  // the waiting queue's share is kept as a sum (a queued sequence's counts must not change while
  // it waits).
  int64_t NumQueuedPromptTokens() const;
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  // The running sequences, in admission order (the order of a step's decodes).
  const std::vector<Sequence*>& running() const { return running_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  // Ids of all unfinished sequences: running (admission order), then waiting (queue order).
  std::vector<RequestId> UnfinishedIds() const;
  const SchedulerOptions& options() const { return options_; }

 private:
  // Reserves KV slots so that seq's next `num_tokens` tokens have a slot, preempting from the back
  // of running_ if needed. False if `seq` itself had to be preempted.
  bool ReserveSlots(Sequence* seq, int32_t num_tokens, SchedulerOutput* out);
  void Preempt(Sequence* seq, SchedulerOutput* out);
  void AddChunk(Sequence* seq, int32_t num_tokens, SchedulerOutput* out);

  const SchedulerOptions options_;
  BlockManager* const block_manager_;
  Clock* const clock_;
  absl::flat_hash_map<RequestId, std::unique_ptr<Sequence>> sequences_;
  std::deque<Sequence*> waiting_;      // includes preempted sequences, at the front
  int64_t waiting_prompt_tokens_ = 0;  // NumQueuedPromptTokens' share of waiting_
  std::vector<Sequence*> running_;     // admission order
  std::deque<Sequence*> prefilled_;
  int64_t num_preemptions_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_ENGINE_SCHEDULER_H_
