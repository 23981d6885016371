// One Prefill call of tandem-prefill (prefill_service.h) as a state machine that no thread waits
// on. Its events arrive on other threads and are handled one at a time on its SerialExecutor, on
// the service's few worker threads, so its handlers hold no lock, none of them blocks, and none
// runs inside the call that posted it:
//   - the request's events (the engine thread, which only posts here): the first token's report;
//   - the KV writer's result, once the engine let go of the request (engine or transport thread);
//   - the client going away (gRPC's callback threads);
//   - the service's CallTicker: the handoff's deadline, read on the injected clock.
//
//   stage        what it waits for                          moved out by
//   kStarting    nothing: Begin runs (claim the router's     refused → kDone; submitted →
//                id, Start, bind the engine's id)            kAwaiting
//   kAwaiting    the writer's result; the client going      the result → kDone (Respond, or
//                away or the handoff's deadline asks the     the failure)
//                engine to stop the request, once (the
//                writer reports also after that)
//   kDone        gRPC's OnDone: Finish was called; later events are ignored.
// Every way out to kDone goes through End: the router id released, a failure counted
// (RequestFailed), Finish with the status.
//
// Owns: what it learnt of the first token. Touches, through the service it belongs to (borrowed;
// it outlives every call): the engine (Cancel), the router-id table, the metrics, the ticker; the
// response gRPC gave it.
#ifndef TANDEM_PREFILL_NODE_PREFILL_CALL_H_
#define TANDEM_PREFILL_NODE_PREFILL_CALL_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/engine/engine.h"
#include "common/handoff/kv_block_writer.h"
#include "common/serving/await_or_cancel.h"
#include "common/serving/call_ticker.h"
#include "common/util/serial_executor.h"
#include "grpcpp/grpcpp.h"
#include "prefill_node/prefill_metrics.h"
#include "tandem/v1/node.grpc.pb.h"

namespace tandem {

class PrefillService;

// What the engine thread reported about the request's first token.
struct FirstTokenReport {
  absl::Time prefill_done = absl::InfinitePast();
  int64_t queue_nanos = -1;
  int32_t cached_tokens = 0;
  // The engine ended the request without a first token (an engine error or stop, a cancel).
  bool ended_without_token = false;
};

// What a call collected once the writer finished.
struct PrefillFinished {
  absl::StatusOr<KvWriteResult> result;
  FirstTokenReport first_token;
  // Why the call asked the engine to stop the request, if it did.
  CancelReason cancelled = CancelReason::kNone;
};

// Where PrefillService::Start sends the request's reports: the engine's events and the writer's
// result (each may run on the engine thread: they only post).
struct PrefillSinks {
  EventCallback on_event;
  std::function<void(absl::StatusOr<KvWriteResult>)> on_finished;
};

class PrefillCall final : public grpc::ServerUnaryReactor,
                          public CallTicker::Tickable,
                          public std::enable_shared_from_this<PrefillCall> {
 public:
  enum class Stage { kStarting, kAwaiting, kDone };

  // Starts a call; the reactor lives until gRPC's OnDone (and any report still in flight).
  // `request` and `response` are gRPC's: valid until OnDone.
  static grpc::ServerUnaryReactor* Start(PrefillService* service, const v1::PrefillRequest* request,
                                         v1::PrefillResponse* response);

  // gRPC's reactions and the ticker's tick: each posts to the executor.
  void OnCancel() override;
  void OnDone() override;
  void OnTick() override;

 private:
  using Failure = CallEnd<KvTransferFailure>;

  PrefillCall(PrefillService* service, v1::PrefillResponse* response);

  // Event handlers (on the executor).
  void Begin(const v1::PrefillRequest& request);
  void OnEvent(const GenerationEvent& event);
  void OnWriterFinished(absl::StatusOr<KvWriteResult> result);
  void OnClientGone();
  void OnTicked();

  // The only way to kDone: `failure` empty when the response is filled.
  void End(std::optional<Failure> failure);

  // Posts `handler` to run on the executor (on the service's workers) with this call alive.
  template <typename Handler>
  void Post(Handler handler) {
    executor_->Post(
        [self = shared_from_this(), handler = std::move(handler)]() mutable { handler(*self); });
  }

  PrefillService* const service_;
  v1::PrefillResponse* const response_;  // gRPC's, until OnDone
  const std::shared_ptr<SerialExecutor> executor_;
  std::shared_ptr<PrefillCall> self_;  // until OnDone

  Stage stage_ = Stage::kStarting;
  absl::Time received_at_;
  std::string router_id_;
  bool claimed_ = false;              // router_id_ is claimed in the service's table
  std::optional<CancelOnce> cancel_;  // kAwaiting
  bool client_gone_ = false;
  FirstTokenReport first_token_;
};

}  // namespace tandem

#endif  // TANDEM_PREFILL_NODE_PREFILL_CALL_H_
