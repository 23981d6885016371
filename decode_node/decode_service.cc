#include "decode_node/decode_service.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/handoff/handoff_codec.h"
#include "common/serving/node_requests.h"
#include "common/serving/proto_convert.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

GenerateRequest MakeRequest(const google::protobuf::RepeatedField<int32_t>& prompt,
                            const v1::SamplingParams& sampling,
                            const std::shared_ptr<RequestStream>& stream) {
  GenerateRequest request;
  request.prompt.assign(prompt.begin(), prompt.end());
  request.params = SamplingFromProto(sampling);
  request.on_event = [stream](const GenerationEvent& event) { stream->Push(event); };
  return request;
}

}  // namespace

struct DecodeService::ReservationSlot {
  bool HasResult() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return result.has_value(); }

  absl::Mutex mu;
  // Set once, by the engine thread.
  std::optional<absl::StatusOr<KvReservation>> result ABSL_GUARDED_BY(mu);
};

DecodeService::DecodeService(Engine* engine, KvTransport* transport, DecodeServiceOptions options)
    : engine_(engine), transport_(transport), options_(std::move(options)) {
  transport_->SetNoticeHandler([this](std::string_view payload) { OnNotice(payload); });
}

grpc::Status DecodeService::Reserve(grpc::ServerContext* context, const v1::ReserveRequest* request,
                                    grpc::ServerWriter<v1::DecodeEvent>* writer) {
  if (options_.metrics != nullptr) options_.metrics->ReservationStarted();
  const ReserveEnd end = RunReserve(context, *request, writer);
  if (options_.metrics != nullptr) options_.metrics->ReservationEnded(end.reason);
  return ToGrpcStatus(end.status);
}

DecodeService::ReserveEnd DecodeService::RunReserve(grpc::ServerContext* context,
                                                    const v1::ReserveRequest& request,
                                                    grpc::ServerWriter<v1::DecodeEvent>* writer) {
  // 1. Refuse what this node does not take, before anything is held for the call.
  if (!options_.accept_reservations) {
    return {ReservationOutcome::kRefused,
            absl::FailedPreconditionError(
                "this decode node has no --cluster-secret-file: it takes no reservations "
                "(colocated Generate only)")};
  }
  const absl::Duration lease =
      request.lease_ms() > 0 ? absl::Milliseconds(request.lease_ms()) : options_.default_lease;
  if (lease > options_.max_lease) {
    return {ReservationOutcome::kRefused,
            absl::InvalidArgumentError(
                absl::StrCat("lease_ms ", request.lease_ms(), " exceeds the maximum of ",
                             absl::ToInt64Milliseconds(options_.max_lease)))};
  }
  if (absl::Status claimed = router_ids_.Claim(request.request_id()); !claimed.ok()) {
    return {ReservationOutcome::kRefused, std::move(claimed)};
  }
  absl::Cleanup release_id = [&] { router_ids_.Release(request.request_id()); };
  if (waiting_reservations_.fetch_add(1) >= options_.max_waiting_reservations) {
    waiting_reservations_.fetch_sub(1);
    return {ReservationOutcome::kRefused, absl::ResourceExhaustedError(absl::StrCat(
                                              options_.max_waiting_reservations,
                                              " reservations are already waiting for KV blocks"))};
  }
  absl::Cleanup stop_waiting = [this] { waiting_reservations_.fetch_sub(1); };

  // 2. Start.
  absl::StatusOr<StartedReservation> started = StartReserve(request, lease);
  if (!started.ok()) {
    return {absl::IsInvalidArgument(started.status()) ? ReservationOutcome::kRefused
                                                      : ReservationOutcome::kFailed,
            started.status()};
  }
  // 3. Await blocks.
  const AwaitedReservation awaited = AwaitReservation(context, *started);
  std::move(stop_waiting).Invoke();
  // 4. Respond.
  if (!awaited.reservation.ok()) return ReservationFailed(context, request, *started, awaited);
  return RespondReserve(context, *started, *awaited.reservation, writer);
}

absl::StatusOr<DecodeService::StartedReservation> DecodeService::StartReserve(
    const v1::ReserveRequest& request, absl::Duration lease) {
  StartedReservation started{.stream = std::make_shared<RequestStream>(),
                             .slot = std::make_shared<ReservationSlot>()};
  GenerateRequest engine_request =
      MakeRequest(request.prompt_token_ids(), request.sampling(), started.stream);
  started.with_logprobs = engine_request.params.logprobs >= 0;
  absl::StatusOr<RequestId> id = engine_->Reserve(
      std::move(engine_request), lease, [slot = started.slot](absl::StatusOr<KvReservation> r) {
        absl::MutexLock lock(&slot->mu);
        slot->result = std::move(r);
      });
  if (!id.ok()) return id.status();
  started.id = *id;
  // A Cancel for the router's id that came before the engine's id was known.
  if (!router_ids_.Bind(request.request_id(), started.id)) engine_->Cancel(started.id);
  return started;
}

DecodeService::AwaitedReservation DecodeService::AwaitReservation(
    grpc::ServerContext* context, const StartedReservation& started) {
  CancelOnce cancel({
      .clock = options_.clock,
      .deadline = options_.clock->Now() + options_.reserve_wait_timeout,
      .is_cancelled = [context] { return context->IsCancelled(); },
      // The engine's answer to the reservation is then Cancelled.
      .on_cancel = [this, id = started.id] { engine_->Cancel(id); },
  });
  ReservationSlot& slot = *started.slot;
  AwaitOrCancel(slot.mu, absl::Condition(&slot, &ReservationSlot::HasResult), cancel);
  absl::MutexLock lock(&slot.mu);
  return {.reservation = *std::move(slot.result), .cancelled = cancel.reason()};
}

DecodeService::ReserveEnd DecodeService::ReservationFailed(grpc::ServerContext* context,
                                                           const v1::ReserveRequest& request,
                                                           const StartedReservation& started,
                                                           const AwaitedReservation& awaited) {
  started.stream->WaitWithTimeout(absl::Seconds(5));
  if (awaited.cancelled == CancelReason::kDeadline) {
    return {ReservationOutcome::kRefused,
            absl::ResourceExhaustedError(absl::StrCat(
                "no KV blocks came free for the prompt's ", request.prompt_token_ids_size(),
                " tokens within ", absl::FormatDuration(options_.reserve_wait_timeout)))};
  }
  if (context->IsCancelled()) {
    return {ReservationOutcome::kCancelled,
            absl::CancelledError("client cancelled while reserving")};
  }
  const absl::Status& status = awaited.reservation.status();
  return {absl::IsCancelled(status) ? ReservationOutcome::kCancelled : ReservationOutcome::kFailed,
          status};
}

DecodeService::ReserveEnd DecodeService::RespondReserve(
    grpc::ServerContext* context, const StartedReservation& started,
    const KvReservation& reservation, grpc::ServerWriter<v1::DecodeEvent>* writer) {
  v1::DecodeEvent first;
  // The lease counts from the reservation, on the engine's clock (the node gives the engine and
  // this service the same one).
  const int64_t lease_remaining_ms = std::max<int64_t>(
      0, (reservation.lease_deadline_nanos - options_.clock->NowNanos()) / 1'000'000);
  *first.mutable_handoff() = MakeKvHandoff(reservation, *transport_, engine_->kv_layout(),
                                           transport_->incarnation(), lease_remaining_ms);
  first.mutable_handoff()->set_issued_unix_ms(absl::ToUnixMillis(options_.clock->Now()));
  if (options_.handoff_auth != nullptr) options_.handoff_auth->Sign(first.mutable_handoff());
  if (!writer->Write(first)) engine_->Cancel(started.id);
  const StreamSummary summary = StreamEvents(context, started.id, started.with_logprobs,
                                             DecodePath::kReserve, started.stream.get(), writer);
  return {OutcomeOf(summary), summary.status};
}

ReservationOutcome DecodeService::OutcomeOf(const StreamSummary& summary) {
  if (summary.got_token) return ReservationOutcome::kImported;
  switch (summary.finish_reason) {
    case FinishReason::kAborted:
      return summary.final_status.ok() ? ReservationOutcome::kCancelled
                                       : ReservationOutcome::kFailed;
    case FinishReason::kError:
      if (absl::IsDeadlineExceeded(summary.final_status)) return ReservationOutcome::kLeaseExpired;
      if (absl::IsAborted(summary.final_status)) return ReservationOutcome::kAborted;
      return ReservationOutcome::kFailed;
    default:
      return ReservationOutcome::kFailed;
  }
}

grpc::Status DecodeService::Generate(grpc::ServerContext* context,
                                     const v1::NodeGenerateRequest* request,
                                     grpc::ServerWriter<v1::DecodeEvent>* writer) {
  if (options_.metrics != nullptr) options_.metrics->GenerateStarted();
  if (absl::Status claimed = router_ids_.Claim(request->request_id()); !claimed.ok()) {
    return ToGrpcStatus(claimed);
  }
  absl::Cleanup release_id = [&] { router_ids_.Release(request->request_id()); };
  auto stream = std::make_shared<RequestStream>();
  GenerateRequest engine_request =
      MakeRequest(request->prompt_token_ids(), request->sampling(), stream);
  const bool with_logprobs = engine_request.params.logprobs >= 0;
  absl::StatusOr<RequestId> id = engine_->Submit(std::move(engine_request));
  if (!id.ok()) return ToGrpcStatus(id.status());
  if (!router_ids_.Bind(request->request_id(), *id)) engine_->Cancel(*id);
  return ToGrpcStatus(
      StreamEvents(context, *id, with_logprobs, DecodePath::kGenerate, stream.get(), writer)
          .status);
}

DecodeService::StreamSummary DecodeService::StreamEvents(
    grpc::ServerContext* context, RequestId id, bool with_logprobs, DecodePath path,
    RequestStream* stream, grpc::ServerWriter<v1::DecodeEvent>* writer) {
  StreamSummary summary;
  // The request's final event still comes after a cancel; nothing is written once cancelled.
  CancelOnce cancel({
      .is_cancelled = [context] { return context->IsCancelled(); },
      .on_cancel = [this, id] { engine_->Cancel(id); },
  });
  while (true) {
    std::optional<GenerationEvent> event;
    AwaitOrCancel(
        [&](absl::Duration interval) {
          event = stream->NextWithTimeout(interval);
          return event.has_value();
        },
        cancel);
    if (event->finished) {
      summary.finish_reason = event->finish_reason;
      summary.final_status = event->status;
    }
    if (event->finished && event->finish_reason == FinishReason::kError) {
      summary.status = event->status.ok() ? absl::InternalError("request failed") : event->status;
      return summary;
    }
    if (event->finished && event->finish_reason == FinishReason::kAborted && !event->status.ok()) {
      summary.status = event->status;  // engine stopped
      return summary;
    }
    v1::DecodeEvent out;
    if (event->has_token()) {
      TokenToProto(*event, with_logprobs, out.add_tokens());
      if (!summary.got_token && event->queue_nanos >= 0) {
        out.set_queue_us(event->queue_nanos / 1000);
        if (options_.metrics != nullptr) {
          options_.metrics->ObserveQueueTime(path, absl::Nanoseconds(event->queue_nanos));
        }
      }
      summary.got_token = true;
    }
    if (event->finished) {
      out.set_finish_reason(std::string(FinishReasonName(event->finish_reason)));
      UsageToProto(event->usage, out.mutable_usage());
    }
    if (!cancel.cancelled() && !writer->Write(out)) cancel.CancelNow(CancelReason::kCancelled);
    if (event->finished) break;
  }
  if (cancel.cancelled()) summary.status = absl::CancelledError("client went away");
  return summary;
}

grpc::Status DecodeService::Cancel(grpc::ServerContext*, const v1::CancelRequest* request,
                                   v1::CancelResponse* response) {
  const RouterRequestIds::CancelTarget target = router_ids_.ForCancel(request->request_id());
  response->set_found(target.found);
  if (target.id.has_value()) engine_->Cancel(*target.id);
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* DecodeService::GetLoad(grpc::CallbackServerContext* context,
                                                 const v1::LoadRequest*, v1::NodeLoad* response) {
  FillNodeLoad(*engine_, "decode", transport_->incarnation(), options_.model_name, response);
  response->set_num_held_kv_blocks(engine_->Stats().num_quarantined_blocks);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::Status DecodeService::ConnectKv(grpc::ServerContext*, const v1::ConnectKvRequest* request,
                                      v1::ConnectKvResponse*) {
  if (!options_.accept_kv_connection) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        absl::StrCat("this decode node's KV transport is '",
                                     std::string(transport_->name()), "', not nccl"));
  }
  return ToGrpcStatus(
      options_.accept_kv_connection(request->nccl_unique_id(), request->prefill_incarnation()));
}

void DecodeService::OnNotice(std::string_view payload) {
  absl::StatusOr<v1::KvCompletion> completion = ParseKvCompletion(payload);
  if (!completion.ok()) {
    spdlog::warn("decode: dropped a KV notice: {}", completion.status().ToString());
    return;
  }
  if (options_.handoff_auth != nullptr) {
    if (absl::Status s = options_.handoff_auth->Verify(*completion); !s.ok()) {
      // Not from a prefill node of this cluster: the reservation it names is left alone.
      spdlog::warn("decode: dropped a KV completion for request {}: {}", completion->request_id(),
                   std::string(s.message()));
      if (options_.metrics != nullptr) options_.metrics->CompletionRefused();
      return;
    }
  }
  if (completion->decode_incarnation() != transport_->incarnation()) {
    // Addressed to an earlier run of this node: the request it names is not ours.
    spdlog::warn("decode: dropped a completion for request {} addressed to incarnation {:x}",
                 completion->request_id(), completion->decode_incarnation());
    return;
  }
  if (!completion->ok()) {
    engine_->AbortImport(completion->request_id(),
                         absl::AbortedError(absl::StrCat("the prefill node stopped writing: ",
                                                         completion->error())));
    return;
  }
  engine_->CompleteImport(ImportedPrefillFromCompletion(*completion));
}

}  // namespace tandem
