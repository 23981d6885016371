#include "decode_node/decode_service.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/handoff/handoff_codec.h"
#include "common/serving/node_requests.h"
#include "common/serving/proto_convert.h"
#include "spdlog/spdlog.h"

namespace tandem {

DecodeService::DecodeService(Engine* engine, KvTransport* transport, DecodeServiceOptions options)
    : engine_(engine),
      transport_(transport),
      options_(std::move(options)),
      verifier_(std::make_unique<KvImportVerifier>(
          transport, engine != nullptr ? engine->kv_layout() : KvLayout(),
          KvImportVerifierOptions{.checksums = options_.kv_checksums, .clock = options_.clock})),
      workers_(options_.worker_threads),
      ticker_(options_.tick_interval) {
  transport_->SetNoticeHandler([this](std::string_view payload) { OnNotice(payload); });
}

grpc::ServerWriteReactor<v1::DecodeEvent>* DecodeService::Reserve(
    grpc::CallbackServerContext*, const v1::ReserveRequest* request) {
  return DecodeStreamCall::StartReserve(this, request);
}

grpc::ServerWriteReactor<v1::DecodeEvent>* DecodeService::Generate(
    grpc::CallbackServerContext*, const v1::NodeGenerateRequest* request) {
  return DecodeStreamCall::StartGenerate(this, request);
}

absl::StatusOr<absl::Duration> DecodeService::ReserveLease(
    const v1::ReserveRequest& request) const {
  if (!options_.accept_reservations) {
    return absl::FailedPreconditionError(
        "this decode node has no --cluster-secret-file: it takes no reservations "
        "(colocated Generate only)");
  }
  const absl::Duration lease =
      request.lease_ms() > 0 ? absl::Milliseconds(request.lease_ms()) : options_.default_lease;
  if (lease > options_.max_lease) {
    return absl::InvalidArgumentError(absl::StrCat("lease_ms ", request.lease_ms(),
                                                   " exceeds the maximum of ",
                                                   absl::ToInt64Milliseconds(options_.max_lease)));
  }
  return lease;
}

absl::Status DecodeService::StartWaiting() {
  if (waiting_reservations_.fetch_add(1) >= options_.max_waiting_reservations) {
    waiting_reservations_.fetch_sub(1);
    return absl::ResourceExhaustedError(absl::StrCat(
        options_.max_waiting_reservations, " reservations are already waiting for KV blocks"));
  }
  return absl::OkStatus();
}

void DecodeService::StopWaiting() { waiting_reservations_.fetch_sub(1); }

DecodeService::ReserveEnd DecodeService::ReservationFailed(int prompt_tokens, CancelReason gave_up,
                                                           bool client_gone,
                                                           const absl::Status& status) const {
  if (gave_up == CancelReason::kDeadline) {
    return {ReservationOutcome::kRefused,
            absl::ResourceExhaustedError(absl::StrCat(
                "no KV blocks came free for the prompt's ", prompt_tokens, " tokens within ",
                absl::FormatDuration(options_.reserve_wait_timeout)))};
  }
  if (client_gone) {
    return {ReservationOutcome::kCancelled,
            absl::CancelledError("client cancelled while reserving")};
  }
  return {absl::IsCancelled(status) ? ReservationOutcome::kCancelled : ReservationOutcome::kFailed,
          status};
}

v1::DecodeEvent DecodeService::HandoffEvent(const KvReservation& reservation) const {
  v1::DecodeEvent first;
  // The lease counts from the reservation, on the engine's clock (the node gives the engine and
  // this service the same one).
  const int64_t lease_remaining_ms = std::max<int64_t>(
      0, (reservation.lease_deadline_nanos - options_.clock->NowNanos()) / 1'000'000);
  *first.mutable_handoff() =
      MakeKvHandoff(reservation, *transport_, engine_->kv_layout(), transport_->incarnation(),
                    lease_remaining_ms, verifier_->Seal(reservation));
  first.mutable_handoff()->set_issued_unix_ms(absl::ToUnixMillis(options_.clock->Now()));
  if (options_.handoff_auth != nullptr) options_.handoff_auth->Sign(first.mutable_handoff());
  return first;
}

ReservationOutcome DecodeService::OutcomeOf(const DecodeStreamSummary& summary) {
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
  verifier_->Judge(*std::move(completion), [this](ImportVerdict verdict) { Act(verdict); });
}

void DecodeService::Act(ImportVerdict verdict) {
  switch (verdict.kind) {
    case ImportVerdict::Kind::kAdmit:
      if (verdict.verified && options_.metrics != nullptr) options_.metrics->ImportVerified();
      engine_->CompleteImport(std::move(verdict.prefill));
      return;
    case ImportVerdict::Kind::kWriterStopped:
      engine_->AbortImport(verdict.id, verdict.status);
      return;
    case ImportVerdict::Kind::kRefused:
      spdlog::warn("decode: {}", std::string(verdict.status.message()));
      if (options_.metrics != nullptr) options_.metrics->ImportRefused(verdict.refusal);
      engine_->AbortImport(verdict.id, verdict.status, verdict.writer_stopped);
      return;
  }
}

}  // namespace tandem
