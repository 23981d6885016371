#include "decode_node/decode_service.h"

#include <algorithm>
#include <atomic>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/handoff/handoff_codec.h"
#include "common/serving/node_requests.h"
#include "common/serving/proto_convert.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

// The KvExporter ExportKv hands the engine: forwards to the writer, and
//   - refuses KV that does not fill exactly the blocks the destination reserved (its resumed
//     output and this node's request disagree), as a prefill node refuses such a prompt;
//   - tells whether the engine passed it blocks: an export the engine refused (OnAborted alone:
//     the request is not paused, or another export of it still reads) holds none, so its
//     writer's release must not free the blocks that other export reads.
// Engine thread only.
class PausedKvExport final : public KvExporter {
 public:
  PausedKvExport(std::shared_ptr<KvBlockWriter> writer, size_t reserved_blocks,
                 std::shared_ptr<std::atomic<bool>> holds_blocks)
      : writer_(std::move(writer)),
        reserved_blocks_(reserved_blocks),
        holds_blocks_(std::move(holds_blocks)) {}

  void OnBlocksReady(RequestId id, int32_t first_index, std::span<const int32_t> blocks) override {
    holds_blocks_->store(true);
    if (first_index != 0 || blocks.size() != reserved_blocks_) {
      mismatch_ = true;
      writer_->OnAborted(id, absl::InvalidArgumentError(absl::StrCat(
                                 "the handoff names ", reserved_blocks_,
                                 " blocks but the paused request's KV fills ", blocks.size())));
      return;
    }
    writer_->OnBlocksReady(id, first_index, blocks);
  }
  void OnPrefillDone(const GenerationEvent& last_token, uint64_t rng_counter) override {
    if (!mismatch_) writer_->OnPrefillDone(last_token, rng_counter);
  }
  void OnAborted(RequestId id, const absl::Status& status) override {
    writer_->OnAborted(id, status);
  }

 private:
  const std::shared_ptr<KvBlockWriter> writer_;
  const size_t reserved_blocks_;
  const std::shared_ptr<std::atomic<bool>> holds_blocks_;
  bool mismatch_ = false;
};

}  // namespace

DecodeService::DecodeService(Engine* engine, KvTransport* transport, DecodeServiceOptions options)
    : engine_(engine),
      transport_(transport),
      options_(std::move(options)),
      handoff_gate_(options_.handoff_auth),
      kv_events_(engine, transport->incarnation(), options_.kv_events_interval),
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
  bool found = target.found;
  if (target.id.has_value()) engine_->Cancel(*target.id);
  if (options_.cancel_prefill) found |= options_.cancel_prefill(request->request_id());
  response->set_found(found);
  return grpc::Status::OK;
}

grpc::Status DecodeService::PauseForMigration(grpc::ServerContext*,
                                              const v1::MigrationRequest* request,
                                              v1::MigrationResponse* response) {
  const RouterRequestIds::CancelTarget target =
      router_ids_.ForMigration(request->request_id(), RouterRequestIds::PauseIntent::kPause);
  response->set_found(target.found);
  if (target.id.has_value()) engine_->PauseForMigration(*target.id);
  return grpc::Status::OK;
}

grpc::Status DecodeService::ResumePaused(grpc::ServerContext*, const v1::MigrationRequest* request,
                                         v1::MigrationResponse* response) {
  const RouterRequestIds::CancelTarget target =
      router_ids_.ForMigration(request->request_id(), RouterRequestIds::PauseIntent::kResume);
  response->set_found(target.found);
  if (target.id.has_value()) engine_->ResumePaused(*target.id);
  return grpc::Status::OK;
}

int DecodeService::BeginDrain(bool live_migration) {
  // Pauses first: a request taken before `draining_` is set is paused when it binds.
  const int asked = live_migration ? PauseAllForMigration() : 0;
  draining_ = true;
  kv_events_.Stop();
  return asked;
}

absl::Status DecodeService::TakesNewRequests() const {
  if (!draining_) return absl::OkStatus();
  return absl::UnavailableError("this decode node is draining: it takes no new requests");
}

int DecodeService::PauseAllForMigration() {
  const std::vector<RequestId> ids = router_ids_.PauseAll();
  for (RequestId id : ids) engine_->PauseForMigration(id);
  return static_cast<int>(ids.size());
}

grpc::ServerUnaryReactor* DecodeService::ExportKv(grpc::CallbackServerContext*,
                                                  const v1::ExportKvRequest* request,
                                                  v1::ExportKvResponse* response) {
  return KvExportCall::Start(this, request, response);
}

absl::Status DecodeService::StartExport(
    const v1::ExportKvRequest& request, absl::Time received_at,
    std::function<void(absl::StatusOr<KvWriteResult>)> on_finished) {
  // 1. What this node does not do.
  if (transport_->name() == "nccl") {
    return absl::UnimplementedError(
        "ExportKv: the nccl KV transport writes from prefill to decode nodes only");
  }
  if (!options_.accept_reservations) {
    return absl::FailedPreconditionError(
        "this decode node has no --cluster-secret-file: it exports no KV");
  }
  // 2. The handoff. Nothing is written, and the destination is not contacted, for one that is not
  //    vouched for: its address and key are the caller's otherwise.
  if (absl::Status admitted =
          handoff_gate_.Admit(request.handoff(), absl::ToUnixMillis(options_.clock->Now()));
      !admitted.ok()) {
    spdlog::warn("decode: refused a KV export handoff (request {}): {}", request.request_id(),
                 std::string(admitted.message()));
    return admitted;
  }
  absl::StatusOr<KvWriteTarget> target =
      KvWriteTargetFromHandoff(request.handoff(), transport_->name());
  if (!target.ok()) return target.status();
  const absl::Time deadline = HandoffDeadline(request.handoff(), received_at);
  // From here on a refusal is told to the destination now, so that it frees the reservation.
  auto refuse = [&](absl::Status status) {
    KvBlockWriter::NotifyFailure(transport_, *target, transport_->incarnation(),
                                 options_.handoff_auth.get(), status, deadline,
                                 [](absl::Status) {});
    return status;
  };
  // 3. The request.
  const RouterRequestIds::CancelTarget named =
      router_ids_.ForMigration(request.request_id(), RouterRequestIds::PauseIntent::kNone);
  if (!named.found) {
    return refuse(absl::NotFoundError(
        absl::StrCat("no request \"", request.request_id(), "\" on this decode node")));
  }
  if (!named.id.has_value()) {
    return refuse(absl::FailedPreconditionError(
        absl::StrCat("request \"", request.request_id(), "\" is not paused for migration")));
  }
  // 4. The writer: it reports once the completion is delivered and the engine's blocks are let go.
  Engine* engine = engine_;
  auto holds_blocks = std::make_shared<std::atomic<bool>>(false);
  absl::StatusOr<std::shared_ptr<KvBlockWriter>> writer = KvBlockWriter::Create({
      .transport = transport_,
      .local_layout = engine_->kv_layout(),
      .target = *target,
      .deadline = deadline,
      .clock = options_.clock,
      .local_incarnation = transport_->incarnation(),
      .auth = options_.handoff_auth.get(),
      .release_blocks =
          [engine, holds_blocks](RequestId id) {
            if (holds_blocks->load()) engine->ReleaseExportedBlocks(id);
          },
      .on_finished = std::move(on_finished),
  });
  if (!writer.ok()) return refuse(writer.status());
  // 5. The engine passes the paused request's blocks on its thread (or refuses: not paused).
  engine_->ExportPaused(*named.id, std::make_shared<PausedKvExport>(
                                       *std::move(writer), target->block_ids.size(), holds_blocks));
  return absl::OkStatus();
}

absl::Status DecodeService::ExportError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kInternal:
      return status;
    default:  // the engine stopped, the transport was torn down, ...
      return absl::UnavailableError(status.message());
  }
}

grpc::ServerUnaryReactor* DecodeService::GetLoad(grpc::CallbackServerContext* context,
                                                 const v1::LoadRequest*, v1::NodeLoad* response) {
  // The receipts (requests each router tagged) and the load come from one engine snapshot, taken
  // after the commands that counted them were applied: a request counted is in this report.
  FillNodeLoad(*engine_, "decode", transport_->incarnation(), options_.model_name, response);
  const EngineStats stats = engine_->Stats();
  response->set_num_held_kv_blocks(stats.num_quarantined_blocks);
  response->set_num_paused(stats.num_paused);
  response->set_draining(draining_);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::Status DecodeService::WatchKvEvents(grpc::ServerContext* context,
                                          const v1::WatchKvEventsRequest*,
                                          grpc::ServerWriter<v1::KvEvents>* writer) {
  return kv_events_.Serve(context, writer);
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
