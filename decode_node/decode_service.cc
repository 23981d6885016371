#include "decode_node/decode_service.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/serving/node_requests.h"
#include "common/serving/proto_convert.h"
#include "common/transport/handoff_codec.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

// Holds Reserve's answer until the gRPC thread picks it up.
struct ReservationSlot {
  absl::Mutex mu;
  std::optional<absl::StatusOr<KvReservation>> result ABSL_GUARDED_BY(mu);
};

bool HasResult(ReservationSlot* slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(slot->mu) {
  return slot->result.has_value();
}

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

DecodeService::DecodeService(Engine* engine, KvTransport* transport, DecodeServiceOptions options)
    : engine_(engine), transport_(transport), options_(std::move(options)) {
  transport_->SetNoticeHandler([this](std::string_view payload) { OnNotice(payload); });
}

grpc::Status DecodeService::Reserve(grpc::ServerContext* context, const v1::ReserveRequest* request,
                                    grpc::ServerWriter<v1::DecodeEvent>* writer) {
  if (options_.metrics != nullptr) options_.metrics->ReservationStarted();
  ReservationOutcome outcome = ReservationOutcome::kFailed;
  grpc::Status status = RunReserve(context, request, writer, &outcome);
  if (options_.metrics != nullptr) options_.metrics->ReservationEnded(outcome);
  return status;
}

grpc::Status DecodeService::RunReserve(grpc::ServerContext* context,
                                       const v1::ReserveRequest* request,
                                       grpc::ServerWriter<v1::DecodeEvent>* writer,
                                       ReservationOutcome* outcome) {
  if (!options_.accept_reservations) {
    *outcome = ReservationOutcome::kRefused;
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this decode node has no --cluster-secret-file: it takes no reservations "
                        "(colocated Generate only)");
  }
  absl::Duration lease =
      request->lease_ms() > 0 ? absl::Milliseconds(request->lease_ms()) : options_.default_lease;
  if (lease > options_.max_lease) {
    *outcome = ReservationOutcome::kRefused;
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("lease_ms ", request->lease_ms(), " exceeds the maximum of ",
                                     absl::ToInt64Milliseconds(options_.max_lease)));
  }
  if (absl::Status claimed = router_ids_.Claim(request->request_id()); !claimed.ok()) {
    *outcome = ReservationOutcome::kRefused;
    return ToGrpcStatus(claimed);
  }
  absl::Cleanup release_id = [&] { router_ids_.Release(request->request_id()); };
  if (waiting_reservations_.fetch_add(1) >= options_.max_waiting_reservations) {
    waiting_reservations_.fetch_sub(1);
    *outcome = ReservationOutcome::kRefused;
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat(options_.max_waiting_reservations,
                                     " reservations are already waiting for KV blocks"));
  }
  absl::Cleanup stop_waiting = [this] { waiting_reservations_.fetch_sub(1); };
  auto stream = std::make_shared<RequestStream>();
  auto slot = std::make_shared<ReservationSlot>();
  GenerateRequest engine_request =
      MakeRequest(request->prompt_token_ids(), request->sampling(), stream);
  const bool with_logprobs = engine_request.params.logprobs >= 0;
  absl::StatusOr<RequestId> id =
      engine_->Reserve(std::move(engine_request), lease, [slot](absl::StatusOr<KvReservation> r) {
        absl::MutexLock lock(&slot->mu);
        slot->result = std::move(r);
      });
  if (!id.ok()) {
    *outcome = absl::IsInvalidArgument(id.status()) ? ReservationOutcome::kRefused
                                                    : ReservationOutcome::kFailed;
    return ToGrpcStatus(id.status());
  }
  if (!router_ids_.Bind(request->request_id(), *id)) engine_->Cancel(*id);

  // Wait for blocks (FIFO behind other reservations), for at most reserve_wait_timeout; the
  // client may give up meanwhile.
  absl::StatusOr<KvReservation> reservation = absl::UnknownError("no reservation");
  const absl::Time give_up = options_.clock->Now() + options_.reserve_wait_timeout;
  bool cancel_sent = false;
  bool timed_out = false;
  while (true) {
    absl::MutexLock lock(&slot->mu);
    slot->mu.AwaitWithTimeout(absl::Condition(&HasResult, slot.get()), kPollInterval);
    if (slot->result.has_value()) {
      reservation = std::move(*slot->result);
      break;
    }
    if (!cancel_sent && (context->IsCancelled() || options_.clock->Now() >= give_up)) {
      cancel_sent = true;
      timed_out = !context->IsCancelled();
      engine_->Cancel(*id);  // on_reserved will answer Cancelled
    }
  }
  std::move(stop_waiting).Invoke();
  if (!reservation.ok() && timed_out) {
    stream->WaitWithTimeout(absl::Seconds(5));
    *outcome = ReservationOutcome::kRefused;
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("no KV blocks came free for the prompt's ", request->prompt_token_ids_size(),
                     " tokens within ", absl::FormatDuration(options_.reserve_wait_timeout)));
  }
  if (!reservation.ok()) {
    stream->WaitWithTimeout(absl::Seconds(5));
    *outcome = context->IsCancelled() || absl::IsCancelled(reservation.status())
                   ? ReservationOutcome::kCancelled
                   : ReservationOutcome::kFailed;
    return context->IsCancelled()
               ? grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled while reserving")
               : ToGrpcStatus(reservation.status());
  }

  v1::DecodeEvent first;
  // The lease counts from the reservation, on the engine's clock (the node gives the engine and
  // this service the same one).
  const int64_t lease_remaining_ms = std::max<int64_t>(
      0, (reservation->lease_deadline_nanos - options_.clock->NowNanos()) / 1'000'000);
  *first.mutable_handoff() = MakeKvHandoff(*reservation, *transport_, engine_->kv_layout(),
                                           transport_->incarnation(), lease_remaining_ms);
  first.mutable_handoff()->set_issued_unix_ms(absl::ToUnixMillis(options_.clock->Now()));
  if (options_.handoff_auth != nullptr) options_.handoff_auth->Sign(first.mutable_handoff());
  if (!writer->Write(first)) {
    engine_->Cancel(*id);
  }
  StreamSummary summary;
  grpc::Status status = StreamEvents(context, *id, with_logprobs, DecodePath::kReserve,
                                     stream.get(), writer, &summary);
  if (summary.got_token) {
    *outcome = ReservationOutcome::kImported;
  } else if (summary.finish_reason == FinishReason::kAborted) {
    *outcome = summary.status.ok() ? ReservationOutcome::kCancelled : ReservationOutcome::kFailed;
  } else if (summary.finish_reason == FinishReason::kError &&
             absl::IsDeadlineExceeded(summary.status)) {
    *outcome = ReservationOutcome::kLeaseExpired;
  } else if (summary.finish_reason == FinishReason::kError && absl::IsAborted(summary.status)) {
    *outcome = ReservationOutcome::kAborted;
  } else {
    *outcome = ReservationOutcome::kFailed;
  }
  return status;
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
  StreamSummary summary;
  return StreamEvents(context, *id, with_logprobs, DecodePath::kGenerate, stream.get(), writer,
                      &summary);
}

grpc::Status DecodeService::StreamEvents(grpc::ServerContext* context, RequestId id,
                                         bool with_logprobs, DecodePath path, RequestStream* stream,
                                         grpc::ServerWriter<v1::DecodeEvent>* writer,
                                         StreamSummary* summary) {
  bool cancelled = false;
  while (true) {
    std::optional<GenerationEvent> event = stream->NextWithTimeout(kPollInterval);
    if (!event.has_value()) {
      if (stream->finished()) break;  // final event already read
      if (!cancelled && context->IsCancelled()) {
        cancelled = true;
        engine_->Cancel(id);
      }
      continue;
    }
    if (event->finished) {
      summary->finished = true;
      summary->finish_reason = event->finish_reason;
      summary->status = event->status;
    }
    if (event->finished && event->finish_reason == FinishReason::kError) {
      return ToGrpcStatus(event->status.ok() ? absl::InternalError("request failed")
                                             : event->status);
    }
    if (event->finished && event->finish_reason == FinishReason::kAborted && !event->status.ok()) {
      return ToGrpcStatus(event->status);  // engine stopped
    }
    v1::DecodeEvent out;
    if (event->has_token()) {
      TokenToProto(*event, with_logprobs, out.add_tokens());
      if (!summary->got_token && event->queue_nanos >= 0) {
        out.set_queue_us(event->queue_nanos / 1000);
        if (options_.metrics != nullptr) {
          options_.metrics->ObserveQueueTime(path, absl::Nanoseconds(event->queue_nanos));
        }
      }
      summary->got_token = true;
    }
    if (event->finished) {
      out.set_finish_reason(std::string(FinishReasonName(event->finish_reason)));
      UsageToProto(event->usage, out.mutable_usage());
    }
    if (!cancelled && !writer->Write(out)) {
      cancelled = true;
      engine_->Cancel(id);
    }
    if (event->finished) break;
  }
  if (cancelled) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  return grpc::Status::OK;
}

grpc::Status DecodeService::Cancel(grpc::ServerContext*, const v1::CancelRequest* request,
                                   v1::CancelResponse* response) {
  const RouterRequestIds::CancelTarget target = router_ids_.ForCancel(request->request_id());
  response->set_found(target.found);
  if (target.id.has_value()) engine_->Cancel(*target.id);
  return grpc::Status::OK;
}

grpc::Status DecodeService::GetLoad(grpc::ServerContext*, const v1::LoadRequest*,
                                    v1::NodeLoad* response) {
  FillNodeLoad(*engine_, "decode", transport_->incarnation(), options_.model_name, response);
  response->set_num_held_kv_blocks(engine_->Stats().num_quarantined_blocks);
  return grpc::Status::OK;
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
