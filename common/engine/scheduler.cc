#include "common/engine/scheduler.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

// A sequence's prompt tokens whose KV is still to be computed.
int64_t QueuedPromptTokens(const Sequence* seq) {
  return std::max(seq->num_prompt_tokens - seq->num_computed_tokens, 0);
}

}  // namespace

absl::Status SchedulerOptions::Validate() const {
  if (max_num_seqs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_num_seqs must be >= 1, got ", max_num_seqs));
  }
  if (max_num_batched_tokens < max_num_seqs) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_num_batched_tokens (", max_num_batched_tokens,
                     ") must be >= max_num_seqs (", max_num_seqs, ")"));
  }
  return absl::OkStatus();
}

void SchedulerOutput::Clear() {
  chunks.clear();
  num_decodes = 0;
  num_batched_tokens = 0;
  preempted.clear();
}

Scheduler::Scheduler(const SchedulerOptions& options, BlockManager* block_manager, Clock* clock)
    : options_(options), block_manager_(block_manager), clock_(clock) {}

void Scheduler::Add(std::unique_ptr<Sequence> seq) {
  Sequence* raw = seq.get();
  raw->status = SequenceStatus::kWaiting;
  raw->arrival_nanos = clock_->NowNanos();
  auto [it, inserted] = sequences_.emplace(raw->id, std::move(seq));
  assert(inserted);
  (void)it;
  (void)inserted;
  waiting_.push_back(raw);
  waiting_prompt_tokens_ += QueuedPromptTokens(raw);
}

void Scheduler::AddPrefilled(std::unique_ptr<Sequence> seq) {
  Sequence* raw = seq.get();
  assert(raw->num_computed_tokens == raw->num_tokens() - 1);
  raw->status = SequenceStatus::kPrefilled;
  if (raw->arrival_nanos < 0) raw->arrival_nanos = clock_->NowNanos();
  auto [it, inserted] = sequences_.emplace(raw->id, std::move(seq));
  assert(inserted);
  (void)it;
  (void)inserted;
  prefilled_.push_back(raw);
}

int64_t Scheduler::NumQueuedPromptTokens() const {
  int64_t total = waiting_prompt_tokens_;
  for (const Sequence* seq : running_) total += QueuedPromptTokens(seq);
  return total;
}

Sequence* Scheduler::Find(RequestId id) {
  auto it = sequences_.find(id);
  return it == sequences_.end() ? nullptr : it->second.get();
}

std::vector<RequestId> Scheduler::UnfinishedIds() const {
  std::vector<RequestId> ids;
  ids.reserve(sequences_.size());
  for (const Sequence* seq : running_) ids.push_back(seq->id);
  for (const Sequence* seq : prefilled_) ids.push_back(seq->id);
  for (const Sequence* seq : waiting_) ids.push_back(seq->id);
  return ids;
}

void Scheduler::Preempt(Sequence* seq, SchedulerOutput* out) {
  // Only decodes trigger preemption, and an exporting (prefill-only) sequence never decodes.
  assert(seq->kv_exporter == nullptr);
  seq->DropDrafts();
  block_manager_->Free(&seq->block_table);
  seq->num_computed_tokens = 0;
  seq->status = SequenceStatus::kPreempted;
  ++seq->num_preemptions;
  ++num_preemptions_;
  waiting_.push_front(seq);
  waiting_prompt_tokens_ += QueuedPromptTokens(seq);
  out->preempted.push_back(seq->id);
  spdlog::debug("scheduler: preempted request {} ({} tokens) to free KV blocks", seq->id,
                seq->num_tokens());
}

bool Scheduler::ReserveSlots(Sequence* seq, int32_t num_tokens, SchedulerOutput* out) {
  const int32_t missing = seq->num_computed_tokens + num_tokens - seq->block_table.num_tokens;
  if (missing <= 0) return true;
  while (!block_manager_->CanAppend(seq->block_table, missing)) {
    Sequence* victim = running_.back();
    running_.pop_back();
    Preempt(victim, out);
    if (victim == seq) return false;
  }
  const bool appended = block_manager_->Append(&seq->block_table, missing);
  assert(appended);
  (void)appended;
  return true;
}

void Scheduler::AddChunk(Sequence* seq, int32_t num_tokens, SchedulerOutput* out) {
  ScheduledChunk chunk;
  chunk.seq = seq;
  chunk.start_pos = seq->num_computed_tokens;
  chunk.num_tokens = num_tokens;
  chunk.want_logits = seq->num_computed_tokens + num_tokens == seq->num_tokens();
  chunk.num_logits = chunk.want_logits ? 1 + seq->num_draft_tokens : 1;
  out->chunks.push_back(chunk);
  out->num_batched_tokens += num_tokens;
}

void Scheduler::Schedule(SchedulerOutput* out) {
  out->Clear();
  int32_t budget = options_.max_num_batched_tokens;

  // 1. Decodes, oldest first; preempt from the newest end when blocks run out. Drafts ride along
  //    only where the budget and the free blocks have room for them: nobody is preempted for one.
  size_t i = 0;
  while (i < running_.size()) {
    Sequence* seq = running_[i];
    if (seq->num_uncomputed_tokens() != 1 + seq->num_draft_tokens) {
      ++i;
      continue;
    }
    if (seq->num_draft_tokens > 0) {
      const int32_t n = 1 + seq->num_draft_tokens;
      const int32_t missing = seq->num_computed_tokens + n - seq->block_table.num_tokens;
      if (budget < n || (missing > 0 && !block_manager_->CanAppend(seq->block_table, missing))) {
        seq->DropDrafts();
      }
    }
    if (budget < 1) break;
    const int32_t n = 1 + seq->num_draft_tokens;
    if (!ReserveSlots(seq, n, out)) break;  // seq was the newest left: nothing after it
    AddChunk(seq, n, out);
    budget -= n;
    ++i;
  }
  for (; i < running_.size(); ++i) running_[i]->DropDrafts();  // left out of this step
  out->num_decodes = static_cast<int32_t>(out->chunks.size());

  // 2. Prefill chunks of admitted sequences (their blocks were reserved at admission).
  for (Sequence* seq : running_) {
    const int32_t remaining = seq->num_uncomputed_tokens();
    if (remaining <= 1 + seq->num_draft_tokens) continue;  // a decode (step 1)
    if (budget < 1) break;
    const int32_t n = std::min(remaining, budget);
    const int32_t missing = seq->num_computed_tokens + n - seq->block_table.num_tokens;
    if (missing > 0 && !block_manager_->Append(&seq->block_table, missing)) {
      continue;  // not expected: admission reserved the whole sequence
    }
    AddChunk(seq, n, out);
    budget -= n;
  }

  // 3. Prefilled sequences: their prompt blocks are held; they need a seat and one slot.
  if (!out->preempted.empty()) return;
  while (!prefilled_.empty() && budget >= 1 &&
         static_cast<int32_t>(running_.size()) < options_.max_num_seqs) {
    Sequence* seq = prefilled_.front();
    const int32_t missing = seq->num_computed_tokens + 1 - seq->block_table.num_tokens;
    if (missing > 0 && !block_manager_->Append(&seq->block_table, missing)) break;
    prefilled_.pop_front();
    if (seq->first_scheduled_nanos < 0) seq->first_scheduled_nanos = clock_->NowNanos();
    seq->status = SequenceStatus::kRunning;
    running_.push_back(seq);
    AddChunk(seq, 1, out);  // counted with the prefill chunks: it comes after them
    --budget;
  }

  // 4. Admissions, first come first served (preempted sequences sit at the front).
  while (!waiting_.empty() && budget >= 1 &&
         static_cast<int32_t>(running_.size()) < options_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    std::optional<int32_t> cached = block_manager_->Allocate(seq->tokens, &seq->block_table);
    if (!cached.has_value()) break;  // the head waits for blocks; nobody overtakes it
    waiting_.pop_front();
    waiting_prompt_tokens_ -= QueuedPromptTokens(seq);
    seq->num_computed_tokens = *cached;
    if (seq->num_cached_tokens < 0) seq->num_cached_tokens = *cached;
    if (seq->first_scheduled_nanos < 0) seq->first_scheduled_nanos = clock_->NowNanos();
    seq->status = SequenceStatus::kRunning;
    running_.push_back(seq);
    const int32_t n = std::min(seq->num_uncomputed_tokens(), budget);
    AddChunk(seq, n, out);
    budget -= n;
  }
}

void Scheduler::CompleteStep(const SchedulerOutput& out) {
  for (const ScheduledChunk& chunk : out.chunks) {
    Sequence* seq = chunk.seq;
    assert(seq->num_computed_tokens == chunk.start_pos);
    seq->num_computed_tokens += chunk.num_tokens;
    block_manager_->CacheComputedBlocks(seq->tokens, seq->num_computed_tokens, &seq->block_table);
  }
}

std::unique_ptr<Sequence> Scheduler::Remove(RequestId id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) return nullptr;
  std::unique_ptr<Sequence> seq = std::move(it->second);
  sequences_.erase(it);
  if (seq->status == SequenceStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), seq.get()));
  } else if (seq->status == SequenceStatus::kPrefilled) {
    prefilled_.erase(std::find(prefilled_.begin(), prefilled_.end(), seq.get()));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), seq.get()));
    waiting_prompt_tokens_ -= QueuedPromptTokens(seq.get());
  }
  return seq;
}

std::unique_ptr<Sequence> Scheduler::Finish(RequestId id, FinishReason reason, bool keep_blocks) {
  std::unique_ptr<Sequence> seq = Remove(id);
  if (seq == nullptr) return nullptr;
  if (!keep_blocks) block_manager_->Free(&seq->block_table);
  seq->status = SequenceStatus::kFinished;
  seq->finish_reason = reason;
  return seq;
}

}  // namespace tandem
