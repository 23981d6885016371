#include "decode_node/decode_stream_call.h"

#include <string>
#include <utility>

#include "common/serving/proto_convert.h"
#include "decode_node/decode_service.h"

namespace tandem {

DecodeStreamCall::DecodeStreamCall(DecodeService* service, DecodePath path)
    : service_(service), path_(path), executor_(SerialExecutor::Create(&service->workers_)) {}

template <typename Request>
grpc::ServerWriteReactor<v1::DecodeEvent>* DecodeStreamCall::Start(
    DecodeService* service, DecodePath path, const Request* request,
    void (DecodeStreamCall::*begin)(const Request&)) {
  std::shared_ptr<DecodeStreamCall> call(new DecodeStreamCall(service, path));
  call->self_ = call;
  ++service->open_calls_;
  call->Post([request, begin](DecodeStreamCall& c) { (c.*begin)(*request); });
  return call.get();
}

grpc::ServerWriteReactor<v1::DecodeEvent>* DecodeStreamCall::StartReserve(
    DecodeService* service, const v1::ReserveRequest* request) {
  return Start(service, DecodePath::kReserve, request, &DecodeStreamCall::BeginReserve);
}

grpc::ServerWriteReactor<v1::DecodeEvent>* DecodeStreamCall::StartGenerate(
    DecodeService* service, const v1::NodeGenerateRequest* request) {
  return Start(service, DecodePath::kGenerate, request, &DecodeStreamCall::BeginGenerate);
}

// --- Reactions: each posts to the executor. ---

void DecodeStreamCall::OnWriteDone(bool ok) {
  Post([ok](DecodeStreamCall& c) { c.OnWritten(ok); });
}

void DecodeStreamCall::OnCancel() {
  Post([](DecodeStreamCall& c) { c.OnClientGone(); });
}

void DecodeStreamCall::OnDone() {
  --service_->open_calls_;
  Post([](DecodeStreamCall& c) { c.self_.reset(); });
}

void DecodeStreamCall::OnTick() {
  Post([](DecodeStreamCall& c) { c.OnTicked(); });
}

// --- Event handlers. ---

void DecodeStreamCall::BeginReserve(const v1::ReserveRequest& request) {
  DecodeService& s = *service_;
  if (s.options_.metrics != nullptr) s.options_.metrics->ReservationStarted();
  router_id_ = request.request_id();
  prompt_tokens_ = request.prompt_token_ids_size();
  // 1. Refuse what this node does not take, before anything is held for the call.
  if (absl::Status taken = s.TakesNewRequests(); !taken.ok()) {
    return End({ReservationOutcome::kRefused, std::move(taken)});
  }
  absl::StatusOr<absl::Duration> lease = s.ReserveLease(request);
  if (!lease.ok()) return End({ReservationOutcome::kRefused, lease.status()});
  if (absl::Status claimed = s.router_ids_.Claim(router_id_); !claimed.ok()) {
    return End({ReservationOutcome::kRefused, std::move(claimed)});
  }
  claimed_ = true;
  if (absl::Status waiting = s.StartWaiting(); !waiting.ok()) {
    return End({ReservationOutcome::kRefused, std::move(waiting)});
  }
  waiting_ = true;

  // 2. Start: the engine answers on its thread, posted here. Resumed output: a request moving in
  //    with its KV from another decode node (the engine validates it, naming the fields).
  GenerateRequest engine_request = MakeRequest(request.prompt_token_ids(), request.sampling());
  SetResumed(request, &engine_request);
  engine_request.placement = PlacementTagFromProto(request.placement());  // counted for receipts
  if (!engine_request.resumed_output_token_ids.empty() && s.options_.metrics != nullptr) {
    s.options_.metrics->MigrationIn();
  }
  absl::StatusOr<RequestId> id =
      s.engine_->Reserve(std::move(engine_request), *lease,
                         [weak = weak_from_this()](absl::StatusOr<KvReservation> reservation) {
                           if (std::shared_ptr<DecodeStreamCall> call = weak.lock()) {
                             call->Post([r = std::move(reservation)](DecodeStreamCall& c) mutable {
                               c.OnReserved(std::move(r));
                             });
                           }
                         });
  if (!id.ok()) {
    return End({absl::IsInvalidArgument(id.status()) ? ReservationOutcome::kRefused
                                                     : ReservationOutcome::kFailed,
                id.status()});
  }
  id_ = *id;
  // 3. Await blocks (FIFO behind other reservations): the client going away or
  //    reserve_wait_timeout cancels the request once; the engine's answer is then Cancelled.
  reserve_cancel_.emplace(CancelOnce::Options{
      .clock = s.options_.clock,
      .deadline = s.options_.clock->Now() + s.options_.reserve_wait_timeout,
      .on_cancel = [engine = s.engine_, id = id_] { engine->Cancel(id); },
  });
  BindRouterId();
  stage_ = Stage::kReserving;
  s.ticker_.Watch(weak_from_this());
}

void DecodeStreamCall::BeginGenerate(const v1::NodeGenerateRequest& request) {
  DecodeService& s = *service_;
  if (s.options_.metrics != nullptr) s.options_.metrics->GenerateStarted();
  router_id_ = request.request_id();
  if (absl::Status taken = s.TakesNewRequests(); !taken.ok()) {
    return End({ReservationOutcome::kRefused, std::move(taken)});
  }
  if (absl::Status claimed = s.router_ids_.Claim(router_id_); !claimed.ok()) {
    return End({ReservationOutcome::kRefused, std::move(claimed)});
  }
  claimed_ = true;
  GenerateRequest engine_request = MakeRequest(request.prompt_token_ids(), request.sampling());
  // A migrated request: the engine validates these (naming the fields) and streams what follows.
  SetResumed(request, &engine_request);
  engine_request.placement = PlacementTagFromProto(request.placement());
  absl::StatusOr<RequestId> id = s.engine_->Submit(std::move(engine_request));
  if (!id.ok()) return End({ReservationOutcome::kFailed, id.status()});
  id_ = *id;
  BindRouterId();
  stage_ = Stage::kStreaming;
}

void DecodeStreamCall::OnReserved(absl::StatusOr<KvReservation> reservation) {
  if (stage_ != Stage::kReserving) return;
  service_->StopWaiting();
  waiting_ = false;
  // 4. Respond.
  if (!reservation.ok()) {
    reservation_error_ = reservation.status();
    stage_ = Stage::kEndingReservation;
    final_wait_until_ = service_->options_.clock->Now() + kFailedReservationWait;
    if (final_seen_) EndFailedReservation();
    return;
  }
  service_->ticker_.Unwatch(this);
  stage_ = Stage::kStreaming;
  if (client_gone_) {
    StopStreaming();
  } else {
    Enqueue(service_->HandoffEvent(*reservation));
  }
  std::vector<GenerationEvent> early = std::move(early_);
  for (const GenerationEvent& event : early) ConsumeEvent(event);
}

void DecodeStreamCall::OnEvent(const GenerationEvent& event) {
  switch (stage_) {
    case Stage::kReserving:
      // The engine answers a reservation before it sends the request's events; kept in order.
      final_seen_ = final_seen_ || event.finished;
      early_.push_back(event);
      return;
    case Stage::kEndingReservation:
      if (event.finished) {
        final_seen_ = true;
        EndFailedReservation();
      }
      return;
    case Stage::kStreaming:
      ConsumeEvent(event);
      return;
    case Stage::kStarting:
    case Stage::kFlushing:
    case Stage::kDone:
      return;  // nothing comes after the final event
  }
}

void DecodeStreamCall::OnWritten(bool ok) {
  writing_ = false;
  if (stage_ == Stage::kDone) return;
  if (!ok) {
    StopStreaming();
  } else {
    WriteNext();
  }
  EndStreamIfDone();
}

void DecodeStreamCall::OnClientGone() {
  client_gone_ = true;
  switch (stage_) {
    case Stage::kReserving:
      reserve_cancel_->CancelNow(CancelReason::kCancelled);
      return;
    case Stage::kStreaming:
    case Stage::kFlushing:
      StopStreaming();
      EndStreamIfDone();
      return;
    case Stage::kStarting:
    case Stage::kEndingReservation:  // its end comes with the final event
    case Stage::kDone:
      return;
  }
}

void DecodeStreamCall::OnTicked() {
  switch (stage_) {
    case Stage::kReserving:
      reserve_cancel_->Check();  // reserve_wait_timeout
      return;
    case Stage::kEndingReservation:
      if (service_->options_.clock->Now() >= final_wait_until_) EndFailedReservation();
      return;
    default:
      return;
  }
}

// --- Steps. ---

GenerateRequest DecodeStreamCall::MakeRequest(
    const google::protobuf::RepeatedField<int32_t>& prompt, const v1::SamplingParams& sampling) {
  GenerateRequest request;
  request.prompt.assign(prompt.begin(), prompt.end());
  request.params = SamplingFromProto(sampling);
  with_logprobs_ = request.params.logprobs >= 0;
  // On the engine thread: only posts.
  request.on_event = [weak = weak_from_this()](const GenerationEvent& event) {
    if (std::shared_ptr<DecodeStreamCall> call = weak.lock()) {
      call->Post([event](DecodeStreamCall& c) { c.OnEvent(event); });
    }
  };
  return request;
}

template <typename Request>
void DecodeStreamCall::SetResumed(const Request& request, GenerateRequest* engine_request) {
  engine_request->resumed_output_token_ids.assign(request.resumed_output_token_ids().begin(),
                                                  request.resumed_output_token_ids().end());
  engine_request->resumed_rng_counter = request.resumed_rng_counter();
}

void DecodeStreamCall::BindRouterId() {
  DecodeService& s = *service_;
  // A Cancel for the router's id that came before the engine's id was known.
  if (!s.router_ids_.Bind(router_id_, id_)) {
    s.engine_->Cancel(id_);
    return;
  }
  // A pause asked before then, or this node is draining (live KV migration).
  if (s.router_ids_.PauseRequested(router_id_)) s.engine_->PauseForMigration(id_);
}

void DecodeStreamCall::ConsumeEvent(const GenerationEvent& event) {
  if (event.finished) {
    final_seen_ = true;
    stage_ = Stage::kFlushing;
    summary_.finish_reason = event.finish_reason;
    summary_.final_status = event.status;
    if (event.finish_reason == FinishReason::kError) {
      summary_.error = event.status.ok() ? absl::InternalError("request failed") : event.status;
    } else if (event.finish_reason == FinishReason::kAborted && !event.status.ok()) {
      summary_.error = event.status;  // engine stopped
    }
    if (summary_.error.has_value()) {
      EndStreamIfDone();
      return;
    }
  }
  v1::DecodeEvent out;
  if (event.has_token()) {
    TokenToProto(event, with_logprobs_, out.add_tokens());
    out.set_rng_counter(event.rng_counter);  // where a migration of this request resumes
    DecodeMetrics* metrics = service_->options_.metrics;
    if (!summary_.got_token && metrics != nullptr) {
      metrics->PromptServed(path_, event.usage.prompt_tokens, event.usage.cached_tokens);
    }
    if (!summary_.got_token && event.queue_nanos >= 0) {
      out.set_queue_us(event.queue_nanos / 1000);
      if (metrics != nullptr) {
        metrics->ObserveQueueTime(path_, absl::Nanoseconds(event.queue_nanos));
      }
    }
    summary_.got_token = true;
  }
  if (event.paused) {
    // Live KV migration: held here, KV and all, until ExportKv, ResumePaused or a cancel.
    out.set_migration_paused(true);
    out.set_rng_counter(event.rng_counter);
  }
  if (event.finished) {
    out.set_finish_reason(std::string(FinishReasonName(event.finish_reason)));
    UsageToProto(event.usage, out.mutable_usage());
  }
  Enqueue(std::move(out));
  EndStreamIfDone();
}

void DecodeStreamCall::Enqueue(v1::DecodeEvent event) {
  if (stream_stopped_) return;
  queue_.push_back(std::move(event));
  WriteNext();
}

void DecodeStreamCall::WriteNext() {
  if (writing_ || queue_.empty() || stream_stopped_) return;
  in_flight_ = std::move(queue_.front());
  queue_.pop_front();
  writing_ = true;
  StartWrite(&in_flight_);
}

void DecodeStreamCall::StopStreaming() {
  if (stream_stopped_) return;
  stream_stopped_ = true;
  queue_.clear();
  // The request's final event still comes; nothing is written any more.
  service_->engine_->Cancel(id_);
}

void DecodeStreamCall::EndStreamIfDone() {
  if (stage_ != Stage::kFlushing) return;
  if (!stream_stopped_ && (writing_ || !queue_.empty())) return;
  absl::Status status;
  if (summary_.error.has_value()) {
    status = *summary_.error;
  } else if (stream_stopped_) {
    status = absl::CancelledError("client went away");
  }
  End({DecodeService::OutcomeOf(summary_), std::move(status)});
}

void DecodeStreamCall::EndFailedReservation() {
  End(service_->ReservationFailed(prompt_tokens_, reserve_cancel_->reason(), client_gone_,
                                  reservation_error_));
}

void DecodeStreamCall::End(Ending ending) {
  DecodeService& s = *service_;
  stage_ = Stage::kDone;
  s.ticker_.Unwatch(this);
  if (waiting_) s.StopWaiting();
  waiting_ = false;
  if (claimed_) s.router_ids_.Release(router_id_);
  claimed_ = false;
  if (path_ == DecodePath::kReserve && s.options_.metrics != nullptr) {
    s.options_.metrics->ReservationEnded(ending.reason);
  }
  Finish(ToGrpcStatus(ending.status));
}

}  // namespace tandem
