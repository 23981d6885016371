// A request's flow and the decode nodes' KV (request_flow.h): the wait for KV room before an
// attempt, and live KV migration (the move steps): a stream its decode node paused moves with its
// KV to another decode node — Reserve there with the tokens so far, ExportKv on the source into
// the destination's blocks, then the destination's stream replaces the source's — or resumes
// where it is. On the flow's executor, like every handler of the flow.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "router/client_errors.h"
#include "router/kv_admission.h"
#include "router/request_flow.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

// A request waiting for KV room looks at the decode nodes' load reports this often.
constexpr absl::Duration kKvWaitPoll = absl::Milliseconds(10);

}  // namespace

// True when some decode node reports room for the prompt's KV (or none reports at all). Else the
// request waits, in a queue of at most --max-kv-waiting-requests and for at most
// --kv-wait-timeout-ms (within its deadline), and then gets UNAVAILABLE.
bool RequestFlow::KvRoomOrWait() {
  RequestRunner& r = *runner_;
  // A migrated request's next node computes its output so far too.
  const int64_t prompt_tokens = static_cast<int64_t>(
      request_->prompt.size() + (migrations_ > 0 ? stream_->output_ids.size() : 0));
  std::vector<v1::NodeLoad> loads;
  for (const auto& node : r.pool_->UpNodes(NodeRole::kDecode))
    loads.push_back(node->snapshot().load);
  const bool full = DecodeKvRoom(loads, prompt_tokens) == KvRoom::kFull;
  const absl::Time now = r.clock_->Now();
  if (!full) {
    if (waiting_for_kv_) {
      waiting_for_kv_ = false;
      r.waiting_for_kv_.fetch_sub(1);
    }
    return true;
  }
  if (!waiting_for_kv_) {
    ++r.counters_->kv_waits;
    if (r.waiting_for_kv_.fetch_add(1) >= r.options_.max_kv_waiting_requests) {
      r.waiting_for_kv_.fetch_sub(1);
      ++r.counters_->kv_wait_refusals;
      ++r.counters_->requests_failed;
      End(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                       WithRequestId(absl::StrCat("the decode nodes' KV cache is full and ",
                                                  r.options_.max_kv_waiting_requests,
                                                  " requests are already waiting for room; retry "
                                                  "later"),
                                     request_->request_id)));
      return false;
    }
    waiting_for_kv_ = true;
    kv_give_up_ = std::min(deadline_, now + absl::Milliseconds(r.options_.kv_wait_timeout_ms));
  }
  if (now >= kv_give_up_) {
    waiting_for_kv_ = false;
    r.waiting_for_kv_.fetch_sub(1);
    ++r.counters_->kv_wait_refusals;
    ++r.counters_->requests_failed;
    spdlog::warn("{}: no decode node had room for {} prompt tokens within {} ms",
                 request_->request_id, prompt_tokens, r.options_.kv_wait_timeout_ms);
    End(grpc::Status(
        grpc::StatusCode::UNAVAILABLE,
        WithRequestId(
            absl::StrCat("no decode node had free KV cache for this prompt of ", prompt_tokens,
                         " tokens within ", r.options_.kv_wait_timeout_ms, " ms; retry later"),
            request_->request_id)));
    return false;
  }
  stage_ = Stage::kWaitingForKv;
  guard_->WakeAt(now + kKvWaitPoll);
  return false;
}

// One ExportKv call; owned by its completion callback (and the flow while the move runs), so its
// context outlives the call whatever happens to the flow.
struct RequestFlow::ExportCall {
  grpc::ClientContext ctx;
  v1::ExportKvRequest request;
  v1::ExportKvResponse response;
};

void RequestFlow::AskToMove() {
  Post([](RequestFlow& f) {
    if (f.stage_ != Stage::kStreaming || f.move_ != nullptr || f.move_asked_) return;
    if (!f.attempt_->first_token || f.attempt_->last.has_value() || !f.attempt_->reading) return;
    f.movable_.store(false);
    f.SendPauseOrResume(/*resume=*/false);
  });
}

void RequestFlow::OnPaused() {
  RequestRunner& r = *runner_;
  movable_.store(false);
  Attempt& source = *attempt_;
  const KvMoveTrigger trigger =
      move_asked_ ? KvMoveTrigger::kRebalance : KvMoveTrigger::kNodePaused;
  move_asked_ = false;
  source.stream->ReadNext();  // its end, or its tokens once resumed
  if (move_ != nullptr || source.last.has_value()) return;
  const int64_t kv_tokens =
      static_cast<int64_t>(request_->prompt.size() + stream_->output_ids.size());
  RequestRunner::KvMoveTarget target;
  std::string why;
  if (!r.options_.live_kv_migration) {
    why = "--no-live-kv-migration";
  } else if (migrations_ >= r.options_.migration_limit) {
    why = "--migration-limit reached";
  } else if (stream_->output_ids.empty()) {
    why = "no token was streamed yet";
  } else {
    target = r.PlaceKvMove(*request_, kv_tokens, source.chosen.decode, failed_nodes_);
    if (target.node == nullptr) why = "no other decode node reports room for its KV";
  }
  if (target.node == nullptr) {
    r.counters_->AddKvMove(trigger, KvMoveResult::kResumed);
    spdlog::info("{}: paused on {} after {} tokens; resuming it there ({})", request_->request_id,
                 source.chosen.decode->address(), stream_->output_ids.size(), why);
    SendPauseOrResume(/*resume=*/true);
    return;
  }
  const absl::Time now = r.clock_->Now();
  move_ = std::make_unique<KvMove>();
  move_->trigger = trigger;
  move_->paused_at = now;
  move_->give_up = std::min(deadline_, now + absl::Milliseconds(r.options_.kv_move_timeout_ms));
  auto t = std::make_unique<Attempt>();
  t->number = ++attempt_number_;
  t->chosen.kind = PlacementKind::kLocalPrefill;  // no prefill node: the KV comes from the source
  t->chosen.reason = PlacementReason::kMigration;
  t->chosen.decode = std::move(target.node);
  t->chosen.decode_tag = target.tag;
  t->node_request_id = absl::StrCat(request_->request_id, "#", t->number);
  t->decode_ctx = std::make_unique<grpc::ClientContext>();
  t->decode_ctx->set_deadline(absl::ToChronoTime(deadline_));
  guard_->Attach(t->decode_ctx.get());
  guard_->WakeAt(move_->give_up);
  v1::ReserveRequest reserve;
  reserve.mutable_prompt_token_ids()->Assign(request_->prompt.begin(), request_->prompt.end());
  *reserve.mutable_sampling() = request_->node_sampling;
  reserve.set_request_id(t->node_request_id);
  reserve.set_lease_ms(r.options_.lease_ms);
  reserve.mutable_resumed_output_token_ids()->Assign(stream_->output_ids.begin(),
                                                     stream_->output_ids.end());
  reserve.set_resumed_rng_counter(stream_->rng_counter);
  SetPlacementTag(t->chosen.decode_tag, reserve.mutable_placement());
  spdlog::debug("{}: paused on {} after {} tokens; moving its KV to {}", request_->request_id,
                source.chosen.decode->address(), stream_->output_ids.size(),
                t->chosen.decode->address());
  Attempt* raw = t.get();
  move_->target = std::move(t);
  // Its events are posted (this executor is busy), so the move is complete before they run.
  raw->stream = raw->chosen.decode->client().StartReserve(raw->decode_ctx.get(), reserve,
                                                          ReceiverFor(raw->number));
}

void RequestFlow::OnMoveEvent(const v1::DecodeEvent& event) {
  KvMove& m = *move_;
  Attempt& t = *m.target;
  if (!t.reading) return;
  t.chosen.decode->NoteProgress(runner_->clock_->Now());
  if (!m.exporting) {
    if (!event.has_handoff()) {
      DropMove("the destination's first event carried no handoff");
      AfterMoveDropped();
      return;
    }
    m.exporting = true;
    auto call = std::make_shared<ExportCall>();
    call->request.set_request_id(attempt_->node_request_id);
    *call->request.mutable_handoff() = event.handoff();
    call->ctx.set_deadline(absl::ToChronoTime(m.give_up));
    attempt_->chosen.decode->client().ExportKv(
        &call->ctx, &call->request, &call->response,
        [call, weak = weak_from_this(), n = t.number](grpc::Status status) {
          if (std::shared_ptr<RequestFlow> flow = weak.lock()) {
            flow->Post([n, status, bytes = call->response.bytes_transferred()](RequestFlow& f) {
              f.OnExportAnswer(n, status, bytes);
            });
          }
        });
    t.stream->ReadNext();
    return;
  }
  // The destination admitted the KV and streams on.
  SwitchToMoveTarget();
  ConsumeEvent(event);
}

void RequestFlow::OnMoveStreamDone(const grpc::Status& status) {
  move_->target->stream_ended = true;
  move_->target->reading = false;
  DropMove(absl::StrCat("the destination's stream ended: ", status.error_message()));
  AfterMoveDropped();
}

void RequestFlow::OnExportAnswer(int attempt, const grpc::Status& status, int64_t bytes) {
  if (stage_ == Stage::kDone || move_ == nullptr || move_->target->number != attempt) return;
  if (status.ok()) {
    move_->exported = true;
    runner_->counters_->kv_move_bytes += bytes;
    return;  // the destination's first token switches the stream
  }
  DropMove(absl::StrCat("ExportKv on the source failed: ", status.error_message()));
  AfterMoveDropped();
}

void RequestFlow::SwitchToMoveTarget() {
  RequestRunner& r = *runner_;
  KvMove& m = *move_;
  const absl::Duration pause = r.clock_->Now() - m.paused_at;
  r.counters_->AddKvMove(m.trigger, KvMoveResult::kMoved);
  r.metrics_->KvMovePaused(pause);
  ++migrations_;
  moves_.fetch_add(1);
  Attempt& source = *attempt_;
  spdlog::info("{}: moved with its KV from {} to {} after {} tokens ({} pause)",
               request_->request_id, source.chosen.decode->address(),
               m.target->chosen.decode->address(), stream_->output_ids.size(),
               absl::FormatDuration(pause));
  // A draining node takes nothing more of this request.
  if (m.trigger == KvMoveTrigger::kNodePaused) {
    failed_nodes_.push_back(source.chosen.decode->address());
  }
  // The source frees the KV once its stream is cancelled.
  source.decode_ctx->TryCancel();
  if (source.reading) {
    source.reading = false;
    source.stream->StopReading();
  }
  guard_->Detach(source.decode_ctx.get());
  retired_.push_back(std::move(attempt_));
  attempt_ = std::move(m.target);
  move_.reset();
}

void RequestFlow::DropMove(const std::string& why) {
  RequestRunner& r = *runner_;
  KvMove& m = *move_;
  const KvMoveResult result =
      attempt_->stream_ended ? KvMoveResult::kFellBack : KvMoveResult::kResumed;
  r.counters_->AddKvMove(m.trigger, result);
  spdlog::warn("{}: live KV move from {} to {} dropped, {}: {}", request_->request_id,
               attempt_->chosen.decode->address(), m.target->chosen.decode->address(),
               result == KvMoveResult::kFellBack ? "the source failed too" : "resuming the source",
               why);
  Attempt& t = *m.target;
  t.decode_ctx->TryCancel();  // the destination frees (or quarantines) its reservation
  if (t.reading) {
    t.reading = false;
    t.stream->StopReading();
  }
  guard_->Detach(t.decode_ctx.get());
  retired_.push_back(std::move(m.target));
  move_.reset();
}

void RequestFlow::AfterMoveDropped() {
  if (attempt_->stream_ended) {
    if (!attempt_->writing) StreamEnded();  // the attempt's verdict: a migration by recomputing
    return;
  }
  if (!guard_->client_cancelled() && !guard_->timed_out()) SendPauseOrResume(/*resume=*/true);
}

bool RequestFlow::SourceEndedDuringMove() {
  if (move_->exported) return true;  // the destination has the KV: its first token decides
  DropMove(absl::StrCat("the source's stream ended: ", attempt_->outcome.status.error_message()));
  return false;
}

void RequestFlow::CheckMove() {
  if (runner_->clock_->Now() < move_->give_up) return;
  DropMove(absl::StrCat("it took longer than --kv-move-timeout-ms (",
                        runner_->options_.kv_move_timeout_ms, " ms)"));
  AfterMoveDropped();
}

void RequestFlow::SendPauseOrResume(bool resume) {
  if (!resume) move_asked_ = true;
  runner_->SendPauseOrResume(attempt_->chosen.decode, attempt_->node_request_id, resume);
}

}  // namespace tandem
