#include "prefill_node/prefill_service.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/handoff/handoff_codec.h"
#include "common/handoff/kv_block_writer.h"
#include "common/serving/await_or_cancel.h"
#include "common/serving/node_requests.h"
#include "common/serving/proto_convert.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

int64_t Micros(absl::Duration d) { return absl::ToInt64Microseconds(d); }

}  // namespace

PrefillService::PrefillService(Engine* engine, KvTransport* transport,
                               PrefillServiceOptions options)
    : engine_(engine),
      transport_(transport),
      options_(std::move(options)),
      kv_events_(engine, transport->incarnation(), options_.kv_events_interval),
      workers_(options_.worker_threads),
      ticker_(options_.tick_interval) {}

grpc::ServerUnaryReactor* PrefillService::Prefill(grpc::CallbackServerContext*,
                                                  const v1::PrefillRequest* request,
                                                  v1::PrefillResponse* response) {
  return PrefillCall::Start(this, request, response);
}

std::variant<PrefillService::Started, PrefillService::Failure> PrefillService::Start(
    const v1::PrefillRequest& request, absl::Time received_at, PrefillSinks sinks) {
  // 1. The handoff. Nothing is written, and the decode node is not contacted, for one that is not
  //    vouched for: its address and key are the caller's otherwise.
  if (absl::Status admitted = options_.handoff_gate->Admit(
          request.handoff(), absl::ToUnixMillis(options_.clock->Now()));
      !admitted.ok()) {
    spdlog::warn("prefill: refused a KV handoff (request {}): {}", request.request_id(),
                 std::string(admitted.message()));
    return Failure{KvTransferFailure::kForgedHandoff, std::move(admitted)};
  }
  absl::StatusOr<KvWriteTarget> target =
      KvWriteTargetFromHandoff(request.handoff(), transport_->name());
  if (!target.ok()) {
    return Failure{ClassifyHandoffError(target.status()), target.status()};
  }
  const absl::Time deadline = HandoffDeadline(request.handoff(), received_at);
  // From here on a refusal is told to the decode node now, so that it frees the reservation
  // instead of waiting out the lease.
  auto refuse = [&](KvTransferFailure reason, absl::Status status) {
    KvBlockWriter::NotifyFailure(transport_, *target, transport_->incarnation(),
                                 options_.handoff_auth.get(), status, deadline,
                                 [](absl::Status) {});
    return Failure{reason, std::move(status)};
  };

  // 2. The prompt must fill exactly the blocks the decode node reserved.
  GenerateRequest engine_request;
  engine_request.prompt.assign(request.prompt_token_ids().begin(),
                               request.prompt_token_ids().end());
  engine_request.params = SamplingFromProto(request.sampling());
  engine_request.placement = PlacementTagFromProto(request.placement());  // counted for receipts
  const int32_t block_size = engine_->kv_layout().block_size;
  const size_t blocks_needed = (engine_request.prompt.size() + block_size - 1) / block_size;
  if (blocks_needed != target->block_ids.size()) {
    return refuse(KvTransferFailure::kBadHandoff,
                  absl::InvalidArgumentError(absl::StrCat(
                      "the handoff names ", target->block_ids.size(), " blocks but the prompt of ",
                      engine_request.prompt.size(), " tokens needs ", blocks_needed, " of ",
                      block_size, " tokens")));
  }

  // 3. The writer: it reports the result once the engine let go of the request.
  Engine* engine = engine_;
  absl::StatusOr<std::shared_ptr<KvBlockWriter>> writer = KvBlockWriter::Create({
      .transport = transport_,
      .local_layout = engine_->kv_layout(),
      .target = *target,
      .deadline = deadline,
      .clock = options_.clock,
      .local_incarnation = transport_->incarnation(),
      .auth = options_.handoff_auth.get(),
      .release_blocks = [engine](RequestId id) { engine->ReleaseExportedBlocks(id); },
      .on_finished = std::move(sinks.on_finished),
  });
  if (!writer.ok()) return refuse(ClassifyHandoffError(writer.status()), writer.status());

  // 4. Submit; the engine thread reports the first token.
  engine_request.kv_exporter = *std::move(writer);
  engine_request.on_event = std::move(sinks.on_event);
  absl::StatusOr<RequestId> id = engine_->Submit(std::move(engine_request));
  if (!id.ok()) {
    return refuse(absl::IsInvalidArgument(id.status()) ? KvTransferFailure::kInvalidRequest
                                                       : KvTransferFailure::kOther,
                  id.status());
  }
  return Started{.id = *id, .deadline = deadline};
}

std::optional<PrefillService::Failure> PrefillService::FailureOf(const PrefillFinished& finished,
                                                                 bool client_cancelled) {
  if (finished.result.ok()) return std::nullopt;
  if (client_cancelled) {
    return Failure{KvTransferFailure::kCancelled, absl::CancelledError("prefill cancelled")};
  }
  const absl::Status& status = finished.result.status();
  switch (finished.cancelled) {
    case CancelReason::kCancelled:
      return Failure{KvTransferFailure::kCancelled, status};
    case CancelReason::kDeadline:
      return Failure{KvTransferFailure::kDeadline, status};
    case CancelReason::kNone:
      break;
  }
  if (finished.first_token.ended_without_token) {
    return Failure{KvTransferFailure::kOther, status};  // the engine failed or stopped the request
  }
  return Failure{ClassifyTransferError(status), status};
}

void PrefillService::Respond(const PrefillFinished& finished, absl::Time received_at,
                             v1::PrefillResponse* response) {
  const KvWriteResult& result = *finished.result;
  const FirstTokenReport& first_token = finished.first_token;
  v1::Token* first = response->mutable_first_token();
  first->set_id(result.first_token);
  first->set_logprob(result.logprob);
  for (const TokenLogprob& top : result.top_logprobs) {
    v1::TokenLogprob* entry = first->add_top_logprobs();
    entry->set_token_id(top.token);
    entry->set_logprob(top.logprob);
  }
  response->set_num_cached_tokens(first_token.cached_tokens);
  response->set_bytes_transferred(result.bytes);
  response->set_num_writes(result.num_writes);
  v1::PrefillTimings* timings = response->mutable_timings();
  const int64_t queue_us = std::max<int64_t>(first_token.queue_nanos, 0) / 1000;
  timings->set_queue_us(queue_us);
  // When the first token was sampled: the writer's own record, taken on the engine thread. The
  // call's copy (from the engine's event) may not have come yet: the writer's result and the
  // engine's event are posted to the call from different threads.
  const absl::Time prefill_done =
      result.prefill_done != absl::InfinitePast() ? result.prefill_done : first_token.prefill_done;
  const bool known = prefill_done != absl::InfinitePast();
  timings->set_compute_us(
      known ? std::max<int64_t>(Micros(prefill_done - received_at) - queue_us, 0) : 0);
  if (result.first_write_issued != absl::InfinitePast()) {
    timings->set_transfer_us(Micros(result.completion_sent - result.first_write_issued));
  }
  timings->set_transfer_exposed_us(
      known ? std::max<int64_t>(Micros(result.completion_sent - prefill_done), 0) : 0);
  if (options_.metrics == nullptr) return;
  PrefillSuccess success;
  success.queue = absl::Microseconds(timings->queue_us());
  success.compute = absl::Microseconds(timings->compute_us());
  success.total = options_.clock->Now() - received_at;
  if (result.first_write_issued != absl::InfinitePast()) {
    success.transfer = absl::Microseconds(timings->transfer_us());
  }
  success.transfer_exposed = absl::Microseconds(timings->transfer_exposed_us());
  success.bytes = result.bytes;
  success.blocks_written = result.num_blocks_written;
  success.blocks_skipped = result.num_blocks_skipped;
  success.writes = result.num_writes;
  options_.metrics->RequestSucceeded(success);
}

grpc::Status PrefillService::Cancel(grpc::ServerContext*, const v1::CancelRequest* request,
                                    v1::CancelResponse* response) {
  response->set_found(CancelByRouterId(request->request_id()));
  return grpc::Status::OK;
}

bool PrefillService::CancelByRouterId(const std::string& router_request_id) {
  const RouterRequestIds::CancelTarget target = router_ids_.ForCancel(router_request_id);
  if (target.id.has_value()) engine_->Cancel(*target.id);
  return target.found;
}

grpc::ServerUnaryReactor* PrefillService::GetLoad(grpc::CallbackServerContext* context,
                                                  const v1::LoadRequest*, v1::NodeLoad* response) {
  // The receipts (requests each router tagged) and the load come from one engine snapshot, taken
  // after the commands that counted them were applied: a request counted is in this report.
  FillNodeLoad(*engine_, "prefill", transport_->incarnation(), options_.model_name, response);
  response->set_num_held_kv_blocks(engine_->Stats().num_export_held_blocks);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::Status PrefillService::WatchKvEvents(grpc::ServerContext* context,
                                           const v1::WatchKvEventsRequest*,
                                           grpc::ServerWriter<v1::KvEvents>* writer) {
  return kv_events_.Serve(context, writer);
}

}  // namespace tandem
