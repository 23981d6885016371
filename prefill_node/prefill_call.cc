#include "prefill_node/prefill_call.h"

#include <utility>
#include <variant>

#include "common/serving/proto_convert.h"
#include "prefill_node/prefill_service.h"

namespace tandem {

PrefillCall::PrefillCall(PrefillService* service, v1::PrefillResponse* response)
    : service_(service),
      response_(response),
      executor_(SerialExecutor::Create(&service->workers_)) {}

grpc::ServerUnaryReactor* PrefillCall::Start(PrefillService* service,
                                             const v1::PrefillRequest* request,
                                             v1::PrefillResponse* response) {
  std::shared_ptr<PrefillCall> call(new PrefillCall(service, response));
  call->self_ = call;
  call->Post([request](PrefillCall& c) { c.Begin(*request); });
  return call.get();
}

// --- Reactions: each posts to the executor. ---

void PrefillCall::OnCancel() {
  Post([](PrefillCall& c) { c.OnClientGone(); });
}

void PrefillCall::OnDone() {
  Post([](PrefillCall& c) { c.self_.reset(); });
}

void PrefillCall::OnTick() {
  Post([](PrefillCall& c) { c.OnTicked(); });
}

// --- Event handlers. ---

void PrefillCall::Begin(const v1::PrefillRequest& request) {
  PrefillService& s = *service_;
  received_at_ = s.options_.clock->Now();
  if (s.options_.metrics != nullptr) s.options_.metrics->RequestReceived();
  router_id_ = request.request_id();
  // A second request under the id of a live one is refused before it touches the handoff.
  if (absl::Status claimed = s.router_ids_.Claim(router_id_); !claimed.ok()) {
    return End(Failure{KvTransferFailure::kInvalidRequest, std::move(claimed)});
  }
  claimed_ = true;
  // The engine thread and the writer only post here.
  PrefillSinks sinks{
      .on_event =
          [weak = weak_from_this()](const GenerationEvent& event) {
            if (std::shared_ptr<PrefillCall> call = weak.lock()) {
              call->Post([event](PrefillCall& c) { c.OnEvent(event); });
            }
          },
      .on_finished =
          [weak = weak_from_this()](absl::StatusOr<KvWriteResult> result) {
            if (std::shared_ptr<PrefillCall> call = weak.lock()) {
              call->Post([r = std::move(result)](PrefillCall& c) mutable {
                c.OnWriterFinished(std::move(r));
              });
            }
          },
  };
  std::variant<PrefillService::Started, Failure> started =
      s.Start(request, received_at_, std::move(sinks));
  if (Failure* refused = std::get_if<Failure>(&started)) return End(std::move(*refused));
  const PrefillService::Started& submitted = std::get<PrefillService::Started>(started);
  cancel_.emplace(CancelOnce::Options{
      .clock = s.options_.clock,
      .deadline = submitted.deadline,
      .on_cancel = [engine = s.engine_, id = submitted.id] { engine->Cancel(id); },
  });
  // A Cancel for the router's id that came before the engine's id was known.
  if (!s.router_ids_.Bind(router_id_, submitted.id)) cancel_->CancelNow(CancelReason::kCancelled);
  stage_ = Stage::kAwaiting;
  s.ticker_.Watch(weak_from_this());
}

void PrefillCall::OnEvent(const GenerationEvent& event) {
  if (!event.has_token()) {
    first_token_.ended_without_token = event.finished;
    return;
  }
  first_token_.prefill_done = service_->options_.clock->Now();
  first_token_.queue_nanos = event.queue_nanos;
  first_token_.cached_tokens = event.usage.cached_tokens;
}

void PrefillCall::OnWriterFinished(absl::StatusOr<KvWriteResult> result) {
  if (stage_ != Stage::kAwaiting) return;
  const PrefillFinished finished{
      .result = std::move(result), .first_token = first_token_, .cancelled = cancel_->reason()};
  if (std::optional<Failure> failed = PrefillService::FailureOf(finished, client_gone_)) {
    return End(std::move(failed));
  }
  service_->Respond(finished, received_at_, response_);
  End(std::nullopt);
}

void PrefillCall::OnClientGone() {
  client_gone_ = true;
  if (stage_ == Stage::kAwaiting) cancel_->CancelNow(CancelReason::kCancelled);
}

void PrefillCall::OnTicked() {
  if (stage_ == Stage::kAwaiting) cancel_->Check();  // the handoff's deadline
}

void PrefillCall::End(std::optional<Failure> failure) {
  PrefillService& s = *service_;
  stage_ = Stage::kDone;
  s.ticker_.Unwatch(this);
  if (claimed_) s.router_ids_.Release(router_id_);
  claimed_ = false;
  if (!failure.has_value()) {
    Finish(grpc::Status::OK);
    return;
  }
  if (s.options_.metrics != nullptr) s.options_.metrics->RequestFailed(failure->reason);
  Finish(ToGrpcStatus(failure->status));
}

}  // namespace tandem
