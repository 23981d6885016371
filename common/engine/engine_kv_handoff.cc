// The engine's side of the prefill/decode handoff (engine.h): the Reserve, Import, AbortImport and
// Release commands, reservations under leases, quarantine of blocks a writer may still write, and
// a prefill node's KV export. Engine thread only; touches pending_reservations_, awaiting_kv_,
// quarantine_ and export_held_, and ends requests only through EndRequest (engine_lifecycle.cc).
#include <algorithm>
#include <optional>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/engine/engine.h"
#include "common/engine/kv_exporter.h"
#include "spdlog/spdlog.h"

namespace tandem {

void Engine::Apply(engine_command::Reserve& command) {
  receipts_.Count(command.placement);
  command.seq->arrival_nanos = clock_->NowNanos();
  if (command.on_event) callbacks_.emplace(command.seq->id, std::move(command.on_event));
  pending_reservations_.push_back(
      PendingReservation{std::move(command.seq), std::move(command.on_reserved), command.lease});
}

void Engine::Apply(engine_command::Import& command) {
  ImportedPrefill& prefill = command.prefill;
  const RequestId id = prefill.request_id;
  // The request ended already; the completion proves its writes are finished.
  if (FreeQuarantined(id)) return;
  auto it = awaiting_kv_.find(id);
  if (it == awaiting_kv_.end()) {
    spdlog::warn("engine: completion for unknown request {} ignored", id);
    return;
  }
  if (prefill.first_token < 0 || prefill.first_token >= vocab_size_) {
    EndRequest(
        id, FinishReason::kError,
        absl::DataLossError(absl::StrCat("request ", id, ": the prefill node sent first token ",
                                         prefill.first_token, ", outside the vocabulary")),
        BlockFate::kFree);
    return;
  }
  Sequence* seq = it->second.get();
  if (seq->num_output_tokens() > 0) {
    // Moved in with its KV (live migration): the writer's "first token" is the request's last,
    // which the client already has.
    if (prefill.first_token != seq->tokens.back()) {
      EndRequest(
          id, FinishReason::kError,
          absl::DataLossError(absl::StrCat(
              "request ", id, ": the source decode node's completion names token ",
              prefill.first_token, " as the last one, but the request's is ", seq->tokens.back())),
          BlockFate::kFree);
      return;
    }
    ++num_imported_requests_;
    seq->num_computed_tokens = seq->num_tokens() - 1;
    block_manager_.CacheComputedBlocks(seq->tokens, seq->num_computed_tokens, &seq->block_table);
    seq->rng.set_counter(prefill.rng_counter);
    scheduler_.AddPrefilled(std::move(awaiting_kv_.extract(id).mapped()));
    return;
  }
  ++num_imported_requests_;
  seq->num_computed_tokens = seq->num_prompt_tokens;
  block_manager_.CacheComputedBlocks(seq->tokens, seq->num_computed_tokens, &seq->block_table);
  seq->rng.set_counter(prefill.rng_counter);
  // The first token is delivered, then checked for stop: one that stops frees the blocks.
  if (EmitToken(seq, SampleResult{prefill.first_token, prefill.logprob,
                                  std::move(prefill.top_logprobs)})) {
    return;
  }
  scheduler_.AddPrefilled(std::move(awaiting_kv_.extract(id).mapped()));
}

void Engine::Apply(engine_command::AbortImport& command) {
  if (command.writer_stopped && FreeQuarantined(command.id)) return;
  if (!awaiting_kv_.contains(command.id)) return;
  absl::Status status = command.reason.ok()
                            ? absl::AbortedError("the prefill node stopped writing the KV")
                            : std::move(command.reason);
  EndRequest(command.id, FinishReason::kError, status,
             command.writer_stopped ? BlockFate::kFree : BlockFate::kQuarantine);
}

void Engine::Apply(engine_command::Release& command) {
  if (ReleasePausedExport(command.id)) return;
  auto it = export_held_.find(command.id);
  if (it == export_held_.end()) return;
  block_manager_.Free(&it->second);
  export_held_.erase(it);
}

bool Engine::HasTimedWork() const {
  return !pending_reservations_.empty() || !awaiting_kv_.empty() || !quarantine_.empty();
}

bool Engine::QueueHeadMayWaitForHeldBlocks() {
  if (awaiting_kv_.empty() && quarantine_.empty() && export_held_.empty() && paused_.empty()) {
    return false;
  }
  if (awaiting_kv_.empty()) return true;
  // Waiting here for a reservation's KV, while another node's reservation may wait for a prompt
  // queued here: a circle.
  for (RequestId id : scheduler_.UnfinishedIds()) {
    const Sequence* seq = scheduler_.Find(id);
    if (seq != nullptr && seq->kv_exporter != nullptr) return false;
  }
  return true;
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
    // The KV the writer sends: the prompt's; a request moving in with its KV, all but its last
    // token's (the next step computes that one).
    const size_t kv_tokens = seq->tokens.size() - (seq->num_output_tokens() > 0 ? 1 : 0);
    std::optional<int32_t> cached = block_manager_.Allocate(
        std::span<const TokenId>(seq->tokens).first(kv_tokens), &seq->block_table);
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
    EndRequest(id, FinishReason::kError,
               absl::DeadlineExceededError(absl::StrCat(
                   "request ", id, ": the prompt's KV did not arrive before the lease ran out")),
               BlockFate::kQuarantine);
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

bool Engine::FreeQuarantined(RequestId id) {
  auto it = quarantine_.find(id);
  if (it == quarantine_.end()) return false;
  block_manager_.Free(&it->second.table);
  quarantine_.erase(it);
  return true;
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

}  // namespace tandem
