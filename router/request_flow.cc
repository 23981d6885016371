#include "router/request_flow.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "router/client_errors.h"
#include "router/kv_admission.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

// The decode stream finished while the prefill call had not answered yet (its answer races with
// the first token): how long it gets before it is cancelled.
constexpr absl::Duration kPrefillAnswerGrace = absl::Seconds(1);

}  // namespace

// Hands a decode stream's events to the flow's executor, tagged with the attempt. They arrive in
// gRPC reactions, which hold none of our locks (CallGuard and PrefillCall cancel calls under an
// InlineBlock), so they may run inline.
class RequestFlow::Receiver final : public DecodeStreamReceiver {
 public:
  Receiver(std::shared_ptr<RequestFlow> flow, int attempt)
      : flow_(std::move(flow)), attempt_(attempt) {}
  void OnEvent(const v1::DecodeEvent& event) override {
    const absl::Time arrived = flow_->runner_->clock_->Now();
    flow_->RunOrPost([n = attempt_, event, arrived](RequestFlow& f) {
      if (event.tokens_size() > 0) f.timer_.FirstEventArrived(arrived);
      f.OnStreamEvent(n, event);
    });
  }
  void OnDone(const grpc::Status& status) override {
    flow_->RunOrPost([n = attempt_, status](RequestFlow& f) { f.OnStreamDone(n, status); });
  }

 private:
  const std::shared_ptr<RequestFlow> flow_;
  const int attempt_;
};

std::shared_ptr<DecodeStreamReceiver> RequestFlow::ReceiverFor(int attempt) {
  return std::make_shared<Receiver>(shared_from_this(), attempt);
}

RequestFlow::RequestFlow(RequestRunner* runner, ResponseSink* sink, Done done, RequestApi api)
    : live_(&runner->live_flows_),
      runner_(runner),
      sink_(sink),
      done_(std::move(done)),
      api_(api),
      executor_(SerialExecutor::Create(&runner->workers_)),
      key_(runner->next_flow_key_.fetch_add(1)),
      timer_(runner->clock_->Now()) {}

void RequestFlow::Start(RequestRunner* runner, const v1::GenerateRequest& request,
                        const RunOptions& options, ResponseSink* sink, Done done) {
  std::shared_ptr<RequestFlow> flow(new RequestFlow(runner, sink, std::move(done), options.api));
  flow->self_ = flow;
  flow->Post([request, options](RequestFlow& f) { f.Begin(request, options); });
}

void RequestFlow::Begin(const v1::GenerateRequest& request, const RunOptions& options) {
  RequestRunner& r = *runner_;
  ++r.counters_->requests;
  r.in_flight_.fetch_add(1);
  // The router's --request-timeout-ms and the client's own deadline, from arrival: the wait for a
  // slot counts.
  deadline_ = std::min(r.clock_->Now() + absl::Milliseconds(r.options_.request_timeout_ms),
                       options.deadline);
  absl::StatusOr<RouterRequest> built =
      BuildRequest(request, *r.model_, options.unset_max_tokens_fills_context);
  if (!built.ok()) {
    ++r.counters_->requests_invalid;
    Refuse(grpc::Status(static_cast<grpc::StatusCode>(built.status().code()),
                        std::string(built.status().message())));
    return;
  }
  if (!options.request_id.empty()) built->request_id = options.request_id;
  if (!built->client_request_id.empty()) {
    spdlog::debug("{}: the client calls it {}", built->request_id, built->client_request_id);
  }
  request_ = *std::move(built);
  guard_ = std::make_shared<CallGuard>(sink_, deadline_);
  guard_->SetWaker(PosterIfAlive([](RequestFlow& f) { f.OnWake(); }));
  r.watchdog_.Add(guard_);

  const bool must_wait = r.admission_.running() >= r.options_.max_concurrent_requests;
  const Admission admission =
      r.admission_.Admit(static_cast<int64_t>(request_->prompt.size()),
                         PosterIfAlive([](RequestFlow& f) { f.OnAdmitted(); }), &ticket_);
  switch (admission) {
    case Admission::kAdmitted:
      if (must_wait) ++r.counters_->queued;
      Admitted();
      return;
    case Admission::kQueued:
      ++r.counters_->queued;
      stage_ = Stage::kQueued;
      queue_give_up_ = std::min(deadline_, r.clock_->Now() + r.admission_.options().max_wait);
      guard_->WakeAt(queue_give_up_);
      return;
    case Admission::kQueueFull:
      ++r.counters_->requests_refused;
      Refuse(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          WithRequestId(
              absl::StrCat("the router is running ", r.options_.max_concurrent_requests,
                           " requests and its queue is full (--max-queued-requests ",
                           r.options_.max_queued_requests, ", --max-queued-prompt-tokens ",
                           r.options_.max_queued_prompt_tokens, "); retry later"),
              request_->request_id)));
      return;
  }
}

void RequestFlow::OnAdmitted() {
  if (stage_ != Stage::kQueued) {  // kDone
    // Admitted while it was leaving (Leave lost the race): hand the slot on.
    runner_->admission_.Release();
    return;
  }
  Admitted();
}

void RequestFlow::Admitted() {
  admitted_ = true;
  started_ = true;
  runner_->metrics_->RequestStarted();
  stream_.emplace(sink_, *request_, *runner_->model_->tokenizer, &timer_, runner_->metrics_,
                  runner_->clock_);
  stage_ = Stage::kWaitingForKv;
  NextAttempt();
}

void RequestFlow::OnWake() {
  if (stage_ == Stage::kDone) return;
  RequestRunner& r = *runner_;
  const absl::Time now = r.clock_->Now();
  switch (stage_) {
    case Stage::kQueued: {
      const bool gone = guard_->client_cancelled();
      if (!gone && now < queue_give_up_) return;
      if (!r.admission_.Leave(ticket_)) return;  // admitted meanwhile: OnAdmitted comes
      stage_ = Stage::kDone;
      if (gone) {
        ++r.counters_->requests_cancelled;
        Refuse(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled"));
      } else if (now >= deadline_) {
        ++r.counters_->requests_failed;
        Refuse(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                            WithRequestId("the request ran past its deadline waiting for a slot",
                                          request_->request_id)));
      } else {
        ++r.counters_->queue_timeouts;
        ++r.counters_->requests_refused;
        Refuse(grpc::Status(
            grpc::StatusCode::RESOURCE_EXHAUSTED,
            WithRequestId(
                absl::StrCat("no slot freed within ", r.options_.queue_timeout_ms,
                             " ms (--queue-timeout-ms) among the ",
                             r.options_.max_concurrent_requests, " running requests; retry later"),
                request_->request_id)));
      }
      return;
    }
    case Stage::kWaitingForKv:
      if (waiting_for_kv_) NextAttempt();
      return;
    case Stage::kEndingPrefill:
      EndPrefill();
      return;
    case Stage::kStreaming:
      if (move_ != nullptr) CheckMove();
      return;
    case Stage::kReserving:
    case Stage::kDone:
      return;  // the guard cancels node calls itself; their ends drive the flow
  }
}

// The loop head of the attempts: checks, KV room, placement, then one attempt.
void RequestFlow::NextAttempt() {
  RequestRunner& r = *runner_;
  const int attempt = attempt_number_ + 1;
  if (guard_->client_cancelled()) {
    ++r.counters_->requests_cancelled;
    End(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled"));
    return;
  }
  if (guard_->timed_out()) {
    ++r.counters_->requests_failed;
    End(grpc::Status(
        grpc::StatusCode::DEADLINE_EXCEEDED,
        WithRequestId(attempt == 0 ? std::string("the request ran past its deadline")
                                   : absl::StrCat("the request ran past its deadline; last error: ",
                                                  last_error_),
                      request_->request_id)));
    return;
  }
  if (!KvRoomOrWait()) return;
  absl::StatusOr<RequestRunner::Chosen> chosen = r.Place(*request_, failed_nodes_);
  if (!chosen.ok()) {
    ++r.counters_->no_node_available;
    ++r.counters_->requests_failed;
    if (stream_->sent_tokens) ++r.counters_->failed_after_first_token;
    std::string message(chosen.status().message());
    if (attempt > 0) absl::StrAppend(&message, "; last error: ", last_error_);
    End(grpc::Status(grpc::StatusCode::UNAVAILABLE, WithRequestId(message, request_->request_id)));
    return;
  }
  if (migrations_ > 0) {  // the tokens so far exist only here: the decode node recomputes them
    chosen->kind = PlacementKind::kLocalPrefill;
    chosen->reason = PlacementReason::kMigration;
    if (chosen->prefill != nullptr) chosen->prefill->WithdrawPlacement(chosen->prefill_tag.seq);
    chosen->prefill = nullptr;
  }
  r.CountPlacement(*chosen, *request_, attempt);
  attempt_number_ = attempt;
  attempt_ = std::make_unique<Attempt>();
  attempt_->number = attempt;
  attempt_->chosen = *std::move(chosen);
  attempt_->node_request_id =
      attempt == 0 ? request_->request_id : absl::StrCat(request_->request_id, "#", attempt);
  attempt_->decode_ctx = std::make_unique<grpc::ClientContext>();
  attempt_->decode_ctx->set_deadline(absl::ToChronoTime(deadline_));
  timer_.Dispatched(r.clock_->Now());
  guard_->SetAttemptDeadline(r.clock_->Now() +
                             absl::Milliseconds(r.options_.first_token_timeout_ms));
  guard_->Attach(attempt_->decode_ctx.get());
  if (attempt_->chosen.kind == PlacementKind::kDisaggregated) {
    StartDisaggregated();
  } else {
    StartLocal();
  }
}

void RequestFlow::StartDisaggregated() {
  RequestRunner& r = *runner_;
  stage_ = Stage::kReserving;
  v1::ReserveRequest reserve;
  reserve.mutable_prompt_token_ids()->Assign(request_->prompt.begin(), request_->prompt.end());
  *reserve.mutable_sampling() = request_->node_sampling;
  reserve.set_request_id(attempt_->node_request_id);
  reserve.set_lease_ms(r.options_.lease_ms);
  SetPlacementTag(attempt_->chosen.decode_tag, reserve.mutable_placement());
  attempt_->stream = attempt_->chosen.decode->client().StartReserve(
      attempt_->decode_ctx.get(), reserve,
      std::make_shared<Receiver>(shared_from_this(), attempt_->number));
}

void RequestFlow::StartLocal() {
  stage_ = Stage::kStreaming;
  v1::NodeGenerateRequest generate;
  generate.mutable_prompt_token_ids()->Assign(request_->prompt.begin(), request_->prompt.end());
  *generate.mutable_sampling() = request_->node_sampling;
  generate.set_request_id(attempt_->node_request_id);
  SetPlacementTag(attempt_->chosen.decode_tag, generate.mutable_placement());
  if (migrations_ > 0) {
    generate.mutable_resumed_output_token_ids()->Assign(stream_->output_ids.begin(),
                                                        stream_->output_ids.end());
    generate.set_resumed_rng_counter(stream_->rng_counter);
  }
  attempt_->stream = attempt_->chosen.decode->client().StartGenerate(
      attempt_->decode_ctx.get(), generate,
      std::make_shared<Receiver>(shared_from_this(), attempt_->number));
}

void RequestFlow::OnStreamEvent(int attempt, const v1::DecodeEvent& event) {
  if (stage_ == Stage::kDone) return;
  if (move_ != nullptr && attempt == move_->target->number) {
    OnMoveEvent(event);
    return;
  }
  if (attempt_ == nullptr || attempt != attempt_->number || !attempt_->reading) return;
  attempt_->chosen.decode->NoteProgress(runner_->clock_->Now());  // busy, not dead
  if (stage_ == Stage::kReserving) {
    OnHandoff(event);
    return;
  }
  if (event.migration_paused()) {
    OnPaused();
    return;
  }
  ConsumeEvent(event);
}

// Reserve's first event: the handoff, then prefill on P while D's stream is read.
void RequestFlow::OnHandoff(const v1::DecodeEvent& event) {
  if (!event.has_handoff()) {
    attempt_->reserve = ReserveEnd::kNoHandoff;
    attempt_->decode_ctx->TryCancel();
    StopReading();  // its end brings the verdict
    return;
  }
  stream_->cached_tokens =
      std::max<int64_t>(stream_->cached_tokens, event.handoff().num_cached_tokens());
  v1::PrefillRequest prefill;
  prefill.mutable_prompt_token_ids()->Assign(request_->prompt.begin(), request_->prompt.end());
  *prefill.mutable_sampling() = request_->node_sampling;
  *prefill.mutable_handoff() = event.handoff();
  prefill.set_request_id(attempt_->node_request_id);
  SetPlacementTag(attempt_->chosen.prefill_tag, prefill.mutable_placement());
  // Its placement was counted since Place; it counts from now (in_flight.h).
  attempt_->chosen.prefill->PlacementSent(attempt_->chosen.prefill_tag.seq);
  attempt_->prefill = PrefillCall::Create(std::move(prefill), deadline_);
  guard_->Attach(attempt_->prefill->context());
  stage_ = Stage::kStreaming;
  // A prefill that fails before D's first token cancels D's stream, so the attempt ends at once.
  grpc::ClientContext* decode_ctx = attempt_->decode_ctx.get();
  attempt_->prefill->Start(
      attempt_->chosen.prefill->client(), [decode_ctx] { decode_ctx->TryCancel(); },
      PosterIfAlive([n = attempt_->number](RequestFlow& f) { f.OnPrefillAnswer(n); }));
  attempt_->stream->ReadNext();
}

void RequestFlow::ConsumeEvent(const v1::DecodeEvent& event) {
  if (attempt_->last.has_value()) {  // finished: the node ends its stream next
    attempt_->stream->ReadNext();
    return;
  }
  if (event.tokens_size() > 0 && !attempt_->first_token) {
    attempt_->first_token = true;
    runner_->TrackStream(key_, weak_from_this(), attempt_->chosen.decode->address());
    guard_->SetAttemptDeadline(absl::InfiniteFuture());
    if (attempt_->prefill != nullptr) {
      attempt_->prefill->ProtectStream();  // a late prefill error must not cut a live stream
    } else if (migrations_ == 0) {         // the request's first token, not a migration's
      timer_.SetNodeQueue(absl::Microseconds(event.queue_us()));
    }
  }
  ClientStream::EventStep step = stream_->OnEvent(event);
  if (step.result != ClientStream::EventResult::kContinue) attempt_->last = step.result;
  kv_tokens_.store(static_cast<int64_t>(request_->prompt.size() + stream_->output_ids.size()),
                   std::memory_order_relaxed);
  movable_.store(move_ == nullptr && !attempt_->last.has_value(), std::memory_order_relaxed);
  if (!step.response.has_value()) {
    AfterEvent();
    return;
  }
  attempt_->writing = true;
  if (step.response->tokens_size() > 0) {
    runner_->metrics_->FirstTokenForwarded(timer_, runner_->clock_->Now());
  }
  sink_->Write(*step.response,
               [weak = std::weak_ptr<RequestFlow>(shared_from_this()), n = attempt_->number,
                tokens = step.response->tokens_size()](bool ok) {
                 // A sink completes a write in its own reaction or I/O handler, lock-free.
                 if (std::shared_ptr<RequestFlow> flow = weak.lock()) {
                   flow->RunOrPost([n, tokens, ok](RequestFlow& f) { f.OnWritten(n, tokens, ok); });
                 }
               });
}

void RequestFlow::OnWritten(int attempt, int tokens, bool ok) {
  if (stage_ == Stage::kDone) return;
  stream_->Written(tokens, ok);
  if (attempt_ == nullptr || attempt != attempt_->number) return;
  attempt_->writing = false;
  AfterEvent();
}

// After an event (and its write): read on, stop, or conclude a stream that already ended.
void RequestFlow::AfterEvent() {
  Attempt& a = *attempt_;
  if (stream_->client_gone) {
    a.decode_ctx->TryCancel();
    StopReading();
  } else if (a.last == ClientStream::EventResult::kStopped) {
    a.outcome.stopped = true;
    a.outcome.finished = true;
    a.decode_ctx->TryCancel();
    StopReading();
  } else if (a.reading && !a.stream_ended) {
    if (a.last == ClientStream::EventResult::kFinished) a.outcome.finished = true;
    a.stream->ReadNext();  // after the last response: drain the stream for its status
  }
  if (a.stream_ended) StreamEnded();
}

void RequestFlow::StopReading() {
  attempt_->reading = false;
  attempt_->stream->StopReading();
}

void RequestFlow::OnStreamDone(int attempt, const grpc::Status& status) {
  if (stage_ == Stage::kDone) return;
  if (move_ != nullptr && attempt == move_->target->number) {
    OnMoveStreamDone(status);
    return;
  }
  if (attempt_ == nullptr || attempt != attempt_->number) return;
  attempt_->stream_ended = true;
  attempt_->reading = false;
  attempt_->outcome.status = status;
  if (attempt_->last == ClientStream::EventResult::kFinished) attempt_->outcome.finished = true;
  if (stage_ == Stage::kReserving) {
    if (attempt_->reserve == ReserveEnd::kHandoff) attempt_->reserve = ReserveEnd::kNoEvent;
    Conclude();
    return;
  }
  if (move_ != nullptr && SourceEndedDuringMove()) return;
  if (!attempt_->writing) StreamEnded();  // else OnWritten gets here
}

void RequestFlow::StreamEnded() {
  if (stage_ != Stage::kStreaming) return;
  if (attempt_->prefill == nullptr) {
    Conclude();
    return;
  }
  stage_ = Stage::kEndingPrefill;
  attempt_->prefill->ProtectStream();
  if (attempt_->outcome.finished) {
    // Its answer races with the first token: it gets a grace before it is cancelled.
    attempt_->prefill_grace_until = runner_->clock_->Now() + kPrefillAnswerGrace;
    guard_->WakeAt(attempt_->prefill_grace_until);
  }
  EndPrefill();
}

// The prefill call ends before the attempt does: it answers, gets its grace after a finished
// stream, or is cancelled; the deadline (plus a margin against a lost callback) bounds the wait.
void RequestFlow::EndPrefill() {
  if (stage_ != Stage::kEndingPrefill) return;
  Attempt& a = *attempt_;
  const absl::Time now = runner_->clock_->Now();
  if (a.prefill->answered()) {
    Conclude();
    return;
  }
  if (a.prefill_wait_until == absl::InfiniteFuture()) {
    if (now < a.prefill_grace_until) return;  // still in its grace
    a.prefill->Cancel();
    a.prefill_wait_until = std::max(deadline_, now) + absl::Seconds(1);
    guard_->WakeAt(a.prefill_wait_until);
    return;
  }
  if (now >= a.prefill_wait_until) Conclude();  // no answer came: give up on it
}

void RequestFlow::OnPrefillAnswer(int attempt) {
  if (stage_ == Stage::kDone) return;
  if (attempt_ == nullptr || attempt != attempt_->number) return;
  EndPrefill();
}

void RequestFlow::Conclude() {
  RequestRunner& r = *runner_;
  Attempt& a = *attempt_;
  AttemptFacts facts = r.CommonFacts(a.chosen, *guard_, *stream_);
  facts.reserve = a.reserve;
  if (a.reserve == ReserveEnd::kNoEvent) facts.reserve_status = a.outcome.status;
  if (a.chosen.prefill != nullptr && a.prefill == nullptr) {
    // No handoff came: the prefill was never sent, and its node never counts it.
    a.chosen.prefill->WithdrawPlacement(a.chosen.prefill_tag.seq);
  }
  if (a.prefill != nullptr) {
    a.prefill->ProtectStream();
    const PrefillCall::Result prefill = a.prefill->result();
    guard_->Detach(a.prefill->context());
    if (prefill.end == PrefillEnd::kOk) {
      timer_.SetNodeQueue(absl::Microseconds(prefill.queue_us));
      a.chosen.prefill->NoteProgress(r.clock_->Now());
    }
    facts.prefill = prefill.end;
    facts.prefill_status = prefill.status;
  }
  facts.stream = a.outcome;
  guard_->Detach(a.decode_ctx.get());
  RequestRunner::AttemptResult result = r.Apply(JudgeAttempt(facts), a.chosen, a.node_request_id);
  AfterAttempt(std::move(result));
}

// The tail of the attempts' loop: done, or another attempt.
void RequestFlow::AfterAttempt(RequestRunner::AttemptResult result) {
  RequestRunner& r = *runner_;
  guard_->SetAttemptDeadline(absl::InfiniteFuture());
  // The old attempt's calls have ended (or hold nothing of the flow's): keep it until the next
  // replaces it, so a late callback finds its context alive.
  if (result.status.ok()) {
    ++r.counters_->requests_ok;
    End(grpc::Status::OK);
    return;
  }
  if (stream_->client_gone || guard_->client_cancelled()) {
    ++r.counters_->requests_cancelled;
    End(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled"));
    return;
  }
  if (guard_->timed_out()) {
    ++r.counters_->requests_failed;
    spdlog::warn("{}: ran past its deadline: {}", request_->request_id,
                 result.status.error_message());
    End(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                     WithRequestId("the request ran past its deadline", request_->request_id)));
    return;
  }
  const int attempt = attempt_number_;
  if (stream_->sent_tokens && result.migrate && migrations_ < r.options_.migration_limit) {
    Migrate(result);
    return;
  }
  if (!result.retry || stream_->sent_tokens || attempt >= r.options_.max_retries) {
    ++r.counters_->requests_failed;
    if (stream_->sent_tokens) ++r.counters_->failed_after_first_token;
    spdlog::warn("{}: failed: {}", request_->request_id, result.status.error_message());
    End(ClientNodeError(result.status, result.reason, result.retry ? attempt + 1 : 1,
                        request_->request_id));
    return;
  }
  r.counters_->AddRetry(result.reason);
  spdlog::warn("{}: attempt {} failed ({}), retrying: {}", request_->request_id, attempt,
               RetryReasonName(result.reason), result.status.error_message());
  for (const auto& node : result.blame) failed_nodes_.push_back(node->address());
  last_error_ = ClientNodeErrorText(result.status, result.reason, 1);
  stage_ = Stage::kWaitingForKv;
  NextAttempt();
}

// Tokens reached the client and the decode side failed: the next attempt recomputes prompt + the
// tokens so far on another decode node and the client's stream goes on from there.
void RequestFlow::Migrate(const RequestRunner::AttemptResult& result) {
  RequestRunner& r = *runner_;
  ++migrations_;
  moves_.fetch_add(1);
  r.counters_->AddMigration(result.migration_reason);
  spdlog::warn("{}: decode side failed after {} tokens ({}), migrating ({} of {}): {}",
               request_->request_id, stream_->output_ids.size(),
               MigrationReasonName(result.migration_reason), migrations_,
               r.options_.migration_limit, result.status.error_message());
  for (const auto& node : result.blame) failed_nodes_.push_back(node->address());
  last_error_ = ClientNodeErrorText(result.status, result.reason, 1);
  stage_ = Stage::kWaitingForKv;
  NextAttempt();
}

void RequestFlow::End(grpc::Status status) {
  RequestRunner& r = *runner_;
  if (move_ != nullptr) DropMove("the request ended");
  stage_ = Stage::kDone;
  movable_.store(false);
  r.UntrackStream(key_);
  if (waiting_for_kv_) {
    waiting_for_kv_ = false;
    r.waiting_for_kv_.fetch_sub(1);
  }
  r.watchdog_.Remove(guard_);  // the sink is not polled any more
  r.metrics_->RequestFinished(api_, status.error_code(), timer_, r.clock_->Now(),
                              static_cast<int64_t>(request_->prompt.size()),
                              stream_->completion_tokens, stream_->cached_tokens);
  if (admitted_) r.admission_.Release();
  Done done = std::move(done_);
  r.in_flight_.fetch_sub(1);
  self_.reset();
  done(std::move(status));
}

void RequestFlow::Refuse(grpc::Status status) {
  RequestRunner& r = *runner_;
  stage_ = Stage::kDone;
  if (guard_ != nullptr) r.watchdog_.Remove(guard_);
  r.metrics_->RequestRefused(api_, status.error_code());
  Done done = std::move(done_);
  r.in_flight_.fetch_sub(1);
  self_.reset();
  done(std::move(status));
}

}  // namespace tandem
