// A request's life in the engine (engine.h, the state table): the Submit and Cancel commands, the
// one place a token goes out (EmitToken) and the one place a request ends (EndRequest). Engine
// thread only; touches the scheduler, callbacks_, and, to end a request, pending_reservations_,
// awaiting_kv_, quarantine_ and export_held_.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/engine/engine.h"
#include "common/engine/kv_exporter.h"

namespace tandem {
namespace {

bool Contains(const std::vector<int>& ids, TokenId token) {
  return std::find(ids.begin(), ids.end(), token) != ids.end();
}

// Why a request ended, for those told only of failures: OK (a cancel) becomes Cancelled.
absl::Status AsError(RequestId id, const absl::Status& status) {
  if (!status.ok()) return status;
  return absl::CancelledError(absl::StrCat("request ", id, " was cancelled"));
}

}  // namespace

void Engine::Apply(engine_command::Submit& command) {
  const RequestId id = command.seq->id;
  receipts_.Count(command.placement);
  // A resumed request whose resumed tokens already end it (request.h): ends now, with no token.
  const FinishReason stop =
      command.seq->num_output_tokens() > 0 ? CheckStop(*command.seq) : FinishReason::kNone;
  if (command.on_event) callbacks_.emplace(id, std::move(command.on_event));
  scheduler_.Add(std::move(command.seq));
  if (stop != FinishReason::kNone) EndRequest(id, stop, absl::OkStatus(), BlockFate::kFree);
}

void Engine::Apply(engine_command::Cancel& command) {
  EndRequest(command.id, FinishReason::kAborted, absl::OkStatus(),
             UnfinishedBlockFate(command.id, /*writer_stopped=*/false));
}

FinishReason Engine::CheckStop(const Sequence& seq) const {
  if (seq.num_output_tokens() >= seq.params.max_tokens || seq.num_tokens() >= max_context_tokens_) {
    return FinishReason::kLength;
  }
  const TokenId last = seq.tokens.back();
  if (!seq.params.ignore_eos && Contains(backend_->config().eos_token_ids, last)) {
    return FinishReason::kStop;
  }
  if (std::find(seq.params.stop_token_ids.begin(), seq.params.stop_token_ids.end(), last) !=
      seq.params.stop_token_ids.end()) {
    return FinishReason::kStop;
  }
  return FinishReason::kNone;
}

bool Engine::EmitToken(Sequence* seq, const SampleResult& token) {
  seq->tokens.push_back(token.token);
  ++num_generated_tokens_;
  GenerationEvent event;
  event.request_id = seq->id;
  event.token = token.token;
  event.rng_counter = seq->rng.counter();
  if (seq->first_token_nanos < 0) {
    seq->first_token_nanos = clock_->NowNanos();
    event.queue_nanos = seq->first_scheduled_nanos - seq->arrival_nanos;
  }
  if (seq->params.logprobs >= 0) {
    event.logprob = token.logprob;
    event.top_logprobs = token.top_logprobs;
  }
  if (seq->kv_exporter != nullptr) {
    // Prefill-only: the prompt is done. Its last blocks go out; the exporter reads them all.
    ExportBlocks(seq, /*prompt_done=*/true);
    EndRequest(seq->id, FinishReason::kPrefillDone, absl::OkStatus(), BlockFate::kHoldForExport,
               std::move(event));
    return true;
  }
  const FinishReason stop = CheckStop(*seq);
  if (stop != FinishReason::kNone) {
    EndRequest(seq->id, stop, absl::OkStatus(), BlockFate::kFree, std::move(event));
    return true;
  }
  event.usage = seq->usage();
  Deliver(event);
  return false;
}

void Engine::EndRequest(RequestId id, FinishReason reason, const absl::Status& status,
                        BlockFate blocks, GenerationEvent last) {
  TakenRequest taken = TakeRequest(id, reason);
  if (taken.seq == nullptr) return;  // already ended, or never existed
  pause_asked_.erase(id);
  if (draft_model_ != nullptr) draft_model_->Forget(id);
  Sequence& seq = *taken.seq;
  seq.status = SequenceStatus::kFinished;
  seq.finish_reason = reason;
  ++num_finished_requests_;
  const uint64_t rng_counter = seq.rng.counter();
  DisposeBlocks(id, seq, blocks);

  last.request_id = id;
  last.finished = true;
  last.finish_reason = reason;
  last.usage = seq.usage();
  last.status = status;
  last.rng_counter = rng_counter;
  if (taken.on_reserved) taken.on_reserved(AsError(id, status));
  if (seq.kv_exporter != nullptr) {
    if (reason == FinishReason::kPrefillDone) {
      seq.kv_exporter->OnPrefillDone(last, rng_counter);
    } else {
      seq.kv_exporter->OnAborted(id, AsError(id, status));
    }
  }
  Deliver(last);
}

Engine::TakenRequest Engine::TakeRequest(RequestId id, FinishReason reason) {
  if (std::unique_ptr<Sequence> seq = scheduler_.Finish(id, reason, /*keep_blocks=*/true)) {
    return TakenRequest{std::move(seq), nullptr};
  }
  if (auto node = awaiting_kv_.extract(id)) return TakenRequest{std::move(node.mapped()), nullptr};
  if (auto node = paused_.extract(id)) return TakenRequest{std::move(node.mapped().seq), nullptr};
  auto pending = std::find_if(pending_reservations_.begin(), pending_reservations_.end(),
                              [id](const PendingReservation& p) { return p.seq->id == id; });
  if (pending == pending_reservations_.end()) return TakenRequest{};
  TakenRequest taken{std::move(pending->seq), std::move(pending->on_reserved)};
  pending_reservations_.erase(pending);
  return taken;
}

Engine::BlockFate Engine::UnfinishedBlockFate(RequestId id, bool writer_stopped) {
  if (awaiting_kv_.contains(id)) return writer_stopped ? BlockFate::kFree : BlockFate::kQuarantine;
  if (auto it = paused_.find(id); it != paused_.end()) {
    return it->second.exporter != nullptr ? BlockFate::kHoldForExport : BlockFate::kFree;
  }
  const Sequence* seq = scheduler_.Find(id);
  if (seq != nullptr && seq->kv_exporter != nullptr) return BlockFate::kHoldForExport;
  return BlockFate::kFree;
}

void Engine::DisposeBlocks(RequestId id, Sequence& seq, BlockFate fate) {
  switch (fate) {
    case BlockFate::kFree:
      block_manager_.Free(&seq.block_table);
      return;
    case BlockFate::kQuarantine: {
      // A writer may still be putting bytes into these blocks: keep them out of use until it says
      // it stopped, or until writes that started before the lease deadline have surely landed.
      const int64_t release_at = std::max(seq.lease_deadline_nanos, clock_->NowNanos()) +
                                 absl::ToInt64Nanoseconds(options_.kv_write_grace);
      quarantine_.emplace(id, QuarantinedBlocks{std::move(seq.block_table), release_at});
      return;
    }
    case BlockFate::kHoldForExport:
      // Writes of blocks already handed out may be in flight: the exporter releases them.
      if (!seq.block_table.empty()) export_held_[id] = std::move(seq.block_table);
      return;
  }
}

std::vector<RequestId> Engine::UnfinishedIds() const {
  std::vector<RequestId> ids;
  for (const PendingReservation& pending : pending_reservations_) ids.push_back(pending.seq->id);
  for (const auto& [id, seq] : awaiting_kv_) ids.push_back(id);
  for (const auto& [id, paused] : paused_) ids.push_back(id);
  for (RequestId id : scheduler_.UnfinishedIds()) ids.push_back(id);
  return ids;
}

void Engine::Deliver(const GenerationEvent& event) {
  auto it = callbacks_.find(event.request_id);
  if (it == callbacks_.end()) return;
  if (!event.finished) {
    it->second(event);
    return;
  }
  EventCallback callback = std::move(it->second);
  callbacks_.erase(it);
  callback(event);
}

}  // namespace tandem
