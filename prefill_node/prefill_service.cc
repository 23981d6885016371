#include "prefill_node/prefill_service.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/serving/node_requests.h"
#include "common/serving/proto_convert.h"
#include "common/transport/handoff_codec.h"
#include "common/transport/kv_block_writer.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

// What the engine thread and the writer report to the waiting gRPC thread.
struct PrefillOutcome {
  absl::Mutex mu;
  std::optional<absl::StatusOr<KvWriteResult>> result ABSL_GUARDED_BY(mu);
  absl::Time prefill_done ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  int64_t queue_nanos ABSL_GUARDED_BY(mu) = -1;
  int32_t cached_tokens ABSL_GUARDED_BY(mu) = 0;
  // The engine ended the request without a first token (an engine error or stop, a cancel).
  bool ended_without_token ABSL_GUARDED_BY(mu) = false;
};

bool HasResult(PrefillOutcome* outcome) ABSL_EXCLUSIVE_LOCKS_REQUIRED(outcome->mu) {
  return outcome->result.has_value();
}

int64_t Micros(absl::Duration d) { return absl::ToInt64Microseconds(d); }

}  // namespace

PrefillService::PrefillService(Engine* engine, KvTransport* transport,
                               PrefillServiceOptions options)
    : engine_(engine), transport_(transport), options_(std::move(options)) {}

grpc::Status PrefillService::Prefill(grpc::ServerContext* context,
                                     const v1::PrefillRequest* request,
                                     v1::PrefillResponse* response) {
  const absl::Time received_at = options_.clock->Now();
  if (options_.metrics != nullptr) options_.metrics->RequestReceived();
  KvTransferFailure failure = KvTransferFailure::kOther;
  grpc::Status status = RunPrefill(context, request, response, received_at, &failure);
  if (!status.ok() && options_.metrics != nullptr) options_.metrics->RequestFailed(failure);
  return status;
}

grpc::Status PrefillService::RunPrefill(grpc::ServerContext* context,
                                        const v1::PrefillRequest* request,
                                        v1::PrefillResponse* response, absl::Time received_at,
                                        KvTransferFailure* failure) {
  // A second request under the id of a live one is refused before it touches the handoff.
  if (absl::Status claimed = router_ids_.Claim(request->request_id()); !claimed.ok()) {
    *failure = KvTransferFailure::kInvalidRequest;
    return ToGrpcStatus(claimed);
  }
  absl::Cleanup release_id = [&] { router_ids_.Release(request->request_id()); };
  // Nothing is written, and the decode node is not contacted, for a handoff that is not vouched
  // for: its address and key are the caller's otherwise.
  if (absl::Status admitted = options_.handoff_gate->Admit(
          request->handoff(), absl::ToUnixMillis(options_.clock->Now()));
      !admitted.ok()) {
    *failure = KvTransferFailure::kForgedHandoff;
    spdlog::warn("prefill: refused a KV handoff (request {}): {}", request->request_id(),
                 std::string(admitted.message()));
    return ToGrpcStatus(admitted);
  }
  absl::StatusOr<KvWriteTarget> target =
      KvWriteTargetFromHandoff(request->handoff(), transport_->name());
  if (!target.ok()) {
    *failure = ClassifyHandoffError(target.status());
    return ToGrpcStatus(target.status());
  }
  const absl::Time deadline = HandoffDeadline(request->handoff(), received_at);

  GenerateRequest engine_request;
  engine_request.prompt.assign(request->prompt_token_ids().begin(),
                               request->prompt_token_ids().end());
  engine_request.params = SamplingFromProto(request->sampling());
  const int32_t block_size = engine_->kv_layout().block_size;
  const size_t blocks_needed = (engine_request.prompt.size() + block_size - 1) / block_size;
  absl::Status refused;
  if (blocks_needed != target->block_ids.size()) {
    refused = absl::InvalidArgumentError(
        absl::StrCat("the handoff names ", target->block_ids.size(), " blocks but the prompt of ",
                     engine_request.prompt.size(), " tokens needs ", blocks_needed, " of ",
                     block_size, " tokens"));
    *failure = KvTransferFailure::kBadHandoff;
  }

  auto outcome = std::make_shared<PrefillOutcome>();
  std::shared_ptr<KvBlockWriter> writer;
  if (refused.ok()) {
    Engine* engine = engine_;
    absl::StatusOr<std::shared_ptr<KvBlockWriter>> created = KvBlockWriter::Create({
        .transport = transport_,
        .local_layout = engine_->kv_layout(),
        .target = *target,
        .deadline = deadline,
        .clock = options_.clock,
        .local_incarnation = transport_->incarnation(),
        .auth = options_.handoff_auth.get(),
        .release_blocks = [engine](RequestId id) { engine->ReleaseExportedBlocks(id); },
        .on_finished =
            [outcome](absl::StatusOr<KvWriteResult> result) {
              absl::MutexLock lock(&outcome->mu);
              outcome->result = std::move(result);
            },
    });
    if (created.ok()) {
      writer = *std::move(created);
    } else {
      refused = created.status();
      *failure = ClassifyHandoffError(refused);
    }
  }
  absl::StatusOr<RequestId> id = absl::UnknownError("not submitted");
  if (refused.ok()) {
    engine_request.kv_exporter = writer;
    engine_request.on_event = [outcome, clock = options_.clock](const GenerationEvent& event) {
      absl::MutexLock lock(&outcome->mu);
      if (!event.has_token()) {
        outcome->ended_without_token = event.finished;
        return;
      }
      outcome->prefill_done = clock->Now();
      outcome->queue_nanos = event.queue_nanos;
      outcome->cached_tokens = event.usage.cached_tokens;
    };
    id = engine_->Submit(std::move(engine_request));
    if (!id.ok()) {
      refused = id.status();
      *failure = absl::IsInvalidArgument(refused) ? KvTransferFailure::kInvalidRequest
                                                  : KvTransferFailure::kOther;
    }
  }
  if (!refused.ok()) {
    // Tell the decode node now, so that it frees the reservation instead of waiting out the lease.
    KvBlockWriter::NotifyFailure(transport_, *target, transport_->incarnation(),
                                 options_.handoff_auth.get(), refused, deadline,
                                 [](absl::Status) {});
    return ToGrpcStatus(refused);
  }
  // Set when this call asked the engine to stop the request.
  std::optional<KvTransferFailure> cancelled;
  if (!router_ids_.Bind(request->request_id(), *id)) {
    cancelled = KvTransferFailure::kCancelled;
    engine_->Cancel(*id);
  }
  absl::StatusOr<KvWriteResult> result = absl::UnknownError("no result");
  absl::Time prefill_done;
  int64_t queue_nanos = -1;
  int32_t cached_tokens = 0;
  bool ended_without_token = false;
  while (true) {
    absl::MutexLock lock(&outcome->mu);
    outcome->mu.AwaitWithTimeout(absl::Condition(&HasResult, outcome.get()), kPollInterval);
    if (outcome->result.has_value()) {
      result = std::move(*outcome->result);
      prefill_done = outcome->prefill_done;
      queue_nanos = outcome->queue_nanos;
      cached_tokens = outcome->cached_tokens;
      ended_without_token = outcome->ended_without_token;
      break;
    }
    if (!cancelled.has_value() && (context->IsCancelled() || options_.clock->Now() > deadline)) {
      // The writer reports once the engine let go of the request.
      cancelled =
          context->IsCancelled() ? KvTransferFailure::kCancelled : KvTransferFailure::kDeadline;
      engine_->Cancel(*id);
    }
  }
  if (!result.ok()) {
    if (cancelled.has_value()) {
      *failure = *cancelled;
    } else if (ended_without_token) {
      *failure = KvTransferFailure::kOther;  // the engine failed or stopped the request
    } else {
      *failure = ClassifyTransferError(result.status());
    }
    if (context->IsCancelled()) {
      *failure = KvTransferFailure::kCancelled;
      return grpc::Status(grpc::StatusCode::CANCELLED, "prefill cancelled");
    }
    return ToGrpcStatus(result.status());
  }

  v1::Token* first = response->mutable_first_token();
  first->set_id(result->first_token);
  first->set_logprob(result->logprob);
  for (const TokenLogprob& top : result->top_logprobs) {
    v1::TokenLogprob* entry = first->add_top_logprobs();
    entry->set_token_id(top.token);
    entry->set_logprob(top.logprob);
  }
  response->set_num_cached_tokens(cached_tokens);
  response->set_bytes_transferred(result->bytes);
  response->set_num_writes(result->num_writes);
  v1::PrefillTimings* timings = response->mutable_timings();
  const int64_t queue_us = std::max<int64_t>(queue_nanos, 0) / 1000;
  timings->set_queue_us(queue_us);
  timings->set_compute_us(std::max<int64_t>(Micros(prefill_done - received_at) - queue_us, 0));
  if (result->first_write_issued != absl::InfinitePast()) {
    timings->set_transfer_us(Micros(result->completion_sent - result->first_write_issued));
  }
  timings->set_transfer_exposed_us(
      std::max<int64_t>(Micros(result->completion_sent - prefill_done), 0));
  if (options_.metrics != nullptr) {
    PrefillSuccess success;
    success.queue = absl::Microseconds(timings->queue_us());
    success.compute = absl::Microseconds(timings->compute_us());
    success.total = options_.clock->Now() - received_at;
    if (result->first_write_issued != absl::InfinitePast()) {
      success.transfer = absl::Microseconds(timings->transfer_us());
    }
    success.transfer_exposed = absl::Microseconds(timings->transfer_exposed_us());
    success.bytes = result->bytes;
    success.blocks_written = result->num_blocks_written;
    success.blocks_skipped = result->num_blocks_skipped;
    success.writes = result->num_writes;
    options_.metrics->RequestSucceeded(success);
  }
  return grpc::Status::OK;
}

grpc::Status PrefillService::Cancel(grpc::ServerContext*, const v1::CancelRequest* request,
                                    v1::CancelResponse* response) {
  const RouterRequestIds::CancelTarget target = router_ids_.ForCancel(request->request_id());
  response->set_found(target.found);
  if (target.id.has_value()) engine_->Cancel(*target.id);
  return grpc::Status::OK;
}

grpc::Status PrefillService::GetLoad(grpc::ServerContext*, const v1::LoadRequest*,
                                     v1::NodeLoad* response) {
  FillNodeLoad(*engine_, "prefill", transport_->incarnation(), options_.model_name, response);
  response->set_num_held_kv_blocks(engine_->Stats().num_export_held_blocks);
  return grpc::Status::OK;
}

grpc::Status PrefillService::WatchKvEvents(grpc::ServerContext* context,
                                           const v1::WatchKvEventsRequest*,
                                           grpc::ServerWriter<v1::KvEvents>* writer) {
  std::vector<uint64_t> known;
  bool first = true;
  while (!context->IsCancelled()) {
    std::vector<uint64_t> now = engine_->CachedBlockHashes();
    if (first || now != known) {
      v1::KvEvents events;
      events.set_incarnation(transport_->incarnation());
      events.set_block_size(engine_->kv_layout().block_size);
      events.set_reset(first);
      std::vector<uint64_t> stored;
      std::vector<uint64_t> removed;
      if (first) {
        stored = now;
      } else {
        std::set_difference(now.begin(), now.end(), known.begin(), known.end(),
                            std::back_inserter(stored));
        std::set_difference(known.begin(), known.end(), now.begin(), now.end(),
                            std::back_inserter(removed));
      }
      events.mutable_stored()->Assign(stored.begin(), stored.end());
      events.mutable_removed()->Assign(removed.begin(), removed.end());
      if (!writer->Write(events)) break;
      known = std::move(now);
      first = false;
    }
    absl::SleepFor(options_.kv_events_interval);
  }
  return grpc::Status::OK;
}

}  // namespace tandem
