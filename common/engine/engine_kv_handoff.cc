// The engine's side of the prefill/decode handoff (engine.h): reservations under leases, imported
// prefills, quarantine of blocks a writer may still write, and a prefill node's KV export.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/engine/engine.h"
#include "common/engine/kv_exporter.h"
#include "spdlog/spdlog.h"

namespace tandem {

void Engine::EndPendingReservation(PendingReservation& pending, FinishReason reason,
                                   const absl::Status& status) {
  ++num_finished_requests_;
  if (pending.on_reserved) pending.on_reserved(status);
  if (!pending.on_event) return;
  GenerationEvent event;
  event.request_id = pending.seq->id;
  event.finished = true;
  event.finish_reason = reason;
  event.usage = pending.seq->usage();
  event.status =
      reason == FinishReason::kAborted && absl::IsCancelled(status) ? absl::OkStatus() : status;
  pending.on_event(event);
}

bool Engine::HasTimedWork() const {
  return !pending_reservations_.empty() || !awaiting_kv_.empty() || !quarantine_.empty();
}

void Engine::RunHousekeeping() {
  if (!HasTimedWork()) return;
  ExpireLeases();
  ReleaseQuarantine(/*release_all=*/false);
  AdmitReservations();
  PublishStats();
}

void Engine::AdmitReservations() {
  while (!pending_reservations_.empty()) {
    PendingReservation& head = pending_reservations_.front();
    Sequence* seq = head.seq.get();
    std::optional<int32_t> cached = block_manager_.Allocate(seq->tokens, &seq->block_table);
    if (!cached.has_value()) return;  // FIFO: the head waits for blocks
    PendingReservation pending = std::move(head);
    pending_reservations_.pop_front();
    const int64_t now = clock_->NowNanos();
    seq->num_computed_tokens = *cached;
    seq->num_cached_tokens = *cached;
    seq->status = SequenceStatus::kAwaitingKv;
    // A reservation is scheduled when it gets its blocks: its queue time ends here.
    seq->first_scheduled_nanos = now;
    seq->lease_deadline_nanos = now + absl::ToInt64Nanoseconds(pending.lease);
    KvReservation reservation;
    reservation.request_id = seq->id;
    reservation.block_ids = seq->block_table.blocks;
    reservation.num_cached_tokens = *cached;
    reservation.lease_deadline_nanos = seq->lease_deadline_nanos;
    if (pending.on_event) callbacks_.emplace(seq->id, std::move(pending.on_event));
    awaiting_kv_.emplace(seq->id, std::move(pending.seq));
    if (pending.on_reserved) pending.on_reserved(std::move(reservation));
  }
}

void Engine::ExpireLeases() {
  const int64_t now = clock_->NowNanos();
  std::vector<RequestId> expired;
  for (const auto& [id, seq] : awaiting_kv_) {
    if (seq->lease_deadline_nanos <= now) expired.push_back(id);
  }
  for (RequestId id : expired) {
    ++num_expired_leases_;
    EndAwaiting(id, FinishReason::kError,
                absl::DeadlineExceededError(absl::StrCat(
                    "request ", id, ": the prompt's KV did not arrive before the lease ran out")),
                /*writer_stopped=*/false);
  }
}

void Engine::ReleaseQuarantine(bool release_all) {
  const int64_t now = clock_->NowNanos();
  for (auto it = quarantine_.begin(); it != quarantine_.end();) {
    if (release_all || it->second.release_at_nanos <= now) {
      block_manager_.Free(&it->second.table);
      it = quarantine_.erase(it);
    } else {
      ++it;
    }
  }
}

void Engine::EndAwaiting(RequestId id, FinishReason reason, const absl::Status& status,
                         bool writer_stopped) {
  auto it = awaiting_kv_.find(id);
  if (it == awaiting_kv_.end()) return;
  std::unique_ptr<Sequence> seq = std::move(it->second);
  awaiting_kv_.erase(it);
  if (writer_stopped) {
    block_manager_.Free(&seq->block_table);
  } else {
    // A writer may still be putting bytes into these blocks: keep them out of use until it says
    // it stopped, or until writes that started before the lease deadline have surely landed.
    const int64_t release_at = std::max(seq->lease_deadline_nanos, clock_->NowNanos()) +
                               absl::ToInt64Nanoseconds(options_.kv_write_grace);
    quarantine_.emplace(id, QuarantinedBlocks{std::move(seq->block_table), release_at});
  }
  ++num_finished_requests_;
  seq->status = SequenceStatus::kFinished;
  seq->finish_reason = reason;
  GenerationEvent event;
  event.request_id = id;
  event.finished = true;
  event.finish_reason = reason;
  event.usage = seq->usage();
  event.status = status;
  Deliver(event);
}

void Engine::ApplyImport(ImportedPrefill& prefill) {
  const RequestId id = prefill.request_id;
  if (auto q = quarantine_.find(id); q != quarantine_.end()) {
    // The request ended already; the completion proves its writes are finished.
    block_manager_.Free(&q->second.table);
    quarantine_.erase(q);
    return;
  }
  auto it = awaiting_kv_.find(id);
  if (it == awaiting_kv_.end()) {
    spdlog::warn("engine: completion for unknown request {} ignored", id);
    return;
  }
  if (prefill.first_token < 0 || prefill.first_token >= vocab_size_) {
    EndAwaiting(
        id, FinishReason::kError,
        absl::DataLossError(absl::StrCat("request ", id, ": the prefill node sent first token ",
                                         prefill.first_token, ", outside the vocabulary")),
        /*writer_stopped=*/true);
    return;
  }
  std::unique_ptr<Sequence> seq = std::move(it->second);
  awaiting_kv_.erase(it);
  ++num_imported_requests_;
  const int64_t now = clock_->NowNanos();
  seq->num_computed_tokens = seq->num_prompt_tokens;
  block_manager_.CacheComputedBlocks(seq->tokens, seq->num_computed_tokens, &seq->block_table);
  seq->rng.set_counter(prefill.rng_counter);
  seq->tokens.push_back(prefill.first_token);
  seq->first_token_nanos = now;
  ++num_generated_tokens_;

  GenerationEvent event;
  event.request_id = id;
  event.token = prefill.first_token;
  event.queue_nanos = seq->first_scheduled_nanos - seq->arrival_nanos;
  if (seq->params.logprobs >= 0) {
    event.logprob = prefill.logprob;
    event.top_logprobs = std::move(prefill.top_logprobs);
  }
  event.usage = seq->usage();
  event.finish_reason = CheckStop(*seq);
  event.finished = event.finish_reason != FinishReason::kNone;
  if (event.finished) {
    block_manager_.Free(&seq->block_table);
    ++num_finished_requests_;
  } else {
    scheduler_.AddPrefilled(std::move(seq));
  }
  Deliver(event);
}

void Engine::ApplyAbortedImport(const AbortedImport& aborted) {
  if (auto q = quarantine_.find(aborted.id); q != quarantine_.end()) {
    block_manager_.Free(&q->second.table);
    quarantine_.erase(q);
    return;
  }
  if (!awaiting_kv_.contains(aborted.id)) return;
  absl::Status status = aborted.reason.ok()
                            ? absl::AbortedError("the prefill node stopped writing the KV")
                            : aborted.reason;
  EndAwaiting(aborted.id, FinishReason::kError, status, /*writer_stopped=*/true);
}

void Engine::ExportBlocks(Sequence* seq, bool prompt_done) {
  const int32_t block_size = block_manager_.block_size();
  const int32_t total = static_cast<int32_t>(seq->block_table.blocks.size());
  int32_t ready = std::min(seq->num_computed_tokens / block_size, total);
  if (prompt_done) ready = std::min(block_manager_.BlocksForTokens(seq->num_prompt_tokens), total);
  if (ready <= seq->num_exported_blocks) return;
  const int32_t first = seq->num_exported_blocks;
  seq->num_exported_blocks = ready;
  seq->kv_exporter->OnBlocksReady(
      seq->id, first,
      std::span<const int32_t>(seq->block_table.blocks).subspan(first, ready - first));
}

void Engine::FinishExport(Sequence* seq, GenerationEvent& event) {
  ExportBlocks(seq, /*prompt_done=*/true);
  const uint64_t rng_counter = seq->rng.counter();
  const RequestId id = seq->id;
  event.finished = true;
  event.finish_reason = FinishReason::kPrefillDone;
  std::unique_ptr<Sequence> done =
      scheduler_.Finish(id, FinishReason::kPrefillDone, /*keep_blocks=*/true);
  ++num_finished_requests_;
  export_held_[id] = std::move(done->block_table);
  done->kv_exporter->OnPrefillDone(event, rng_counter);
}

}  // namespace tandem
