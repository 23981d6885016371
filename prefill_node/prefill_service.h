// tandem-prefill's gRPC service (tandem.v1.PrefillNode): computes a prompt's KV in chunks, writes
// each finished piece straight into the blocks a decode node reserved (KvBlockWriter over the KV
// transport) while the next chunk computes, samples the first token, sends the completion to the
// decode node, then answers. Also publishes the prefix cache's content for prefix-aware routing.
//
// A Prefill call costs memory, not a thread: it is a callback-API method, each call a PrefillCall
// (prefill_call.h), a state machine driven by the engine's and the writer's reports, gRPC's
// reactions and the service's one CallTicker, its handlers run on the service's few worker
// threads: claim the router's id -> Start (check the handoff,
// build the writer, submit) -> await the writer's result (the client going away or the handoff's
// deadline cancels the request once) -> Respond (the proto and the success metrics). Each step
// returns what it produced or a Failure (the metrics' KvTransferFailure and the status). GetLoad,
// the router's liveness probe, is a callback-API method too. WatchKvEvents (one long-lived stream
// per router) and Cancel stay on the sync pool.
//
// Owns: the router-id table of this node's calls, the ticker of their deadlines. Touches: the
// engine (Submit, Cancel, load), the KV transport through KvBlockWriter (never directly but for
// its name and incarnation), the handoff gate and the metrics it is given.
#ifndef TANDEM_PREFILL_NODE_PREFILL_SERVICE_H_
#define TANDEM_PREFILL_NODE_PREFILL_SERVICE_H_

#include <memory>
#include <optional>
#include <variant>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/engine/engine.h"
#include "common/serving/await_or_cancel.h"
#include "common/serving/call_ticker.h"
#include "common/serving/kv_events_publisher.h"
#include "common/serving/node_requests.h"
#include "common/transport/handoff_auth.h"
#include "common/transport/handoff_gate.h"
#include "common/transport/kv_transport.h"
#include "common/util/clock.h"
#include "common/util/worker_pool.h"
#include "prefill_node/prefill_call.h"
#include "prefill_node/prefill_metrics.h"
#include "tandem/v1/node.grpc.pb.h"

namespace tandem {

struct PrefillServiceOptions {
  std::string model_name;
  // How often WatchKvEvents looks for prefix-cache changes.
  absl::Duration kv_events_interval = absl::Milliseconds(100);
  // Where each Prefill call's times, KV bytes and failures are counted; borrowed; may be null.
  PrefillMetrics* metrics = nullptr;
  // Checks every handoff before anything is written for it (common/transport/handoff_gate.h) and
  // signs completions; borrowed; required.
  HandoffGate* handoff_gate = nullptr;
  // Signs completion notices; null: unsigned (--insecure-no-handoff-auth).
  std::shared_ptr<const HandoffAuthenticator> handoff_auth;
  // Deadlines, waits, the handoff gate's time and the timings reported are read on it (borrowed).
  Clock* clock = Clock::Real();
  // How often (real time) the ticker checks the deadlines of waiting calls.
  absl::Duration tick_interval = kAwaitPollInterval;
  // The threads every call's handlers run on, however many calls are open.
  int worker_threads = 4;
};

class PrefillService final
    : public v1::PrefillNode::WithCallbackMethod_Prefill<
          v1::PrefillNode::WithCallbackMethod_GetLoad<v1::PrefillNode::Service>> {
 public:
  // `engine` and `transport` are borrowed.
  PrefillService(Engine* engine, KvTransport* transport, PrefillServiceOptions options);

  grpc::ServerUnaryReactor* Prefill(grpc::CallbackServerContext* context,
                                    const v1::PrefillRequest* request,
                                    v1::PrefillResponse* response) override;
  grpc::Status Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override;
  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* context,
                                    const v1::LoadRequest* request,
                                    v1::NodeLoad* response) override;
  // The prefix cache's content (common/serving/kv_events_publisher.h).
  grpc::Status WatchKvEvents(grpc::ServerContext* context, const v1::WatchKvEventsRequest* request,
                             grpc::ServerWriter<v1::KvEvents>* writer) override;

  // The router's Cancel of `router_request_id` (what Cancel runs): ends this node's Prefill call
  // of that id, if any; returns whether one was known (a decode node that also serves this
  // service forwards its own Cancels here). Thread-safe.
  bool CancelByRouterId(const std::string& router_request_id);

  // Thread-safe. The node drains: WatchKvEvents streams end (UNAVAILABLE) and new ones are
  // refused, so that they do not hold the server's shutdown until the drain deadline.
  void StopKvEvents() { kv_events_.Stop(); }

 private:
  friend class PrefillCall;
  // How a Prefill call failed: the reason the metrics count and the status its caller gets.
  using Failure = CallEnd<KvTransferFailure>;
  // A validated, submitted prefill: Start's answer.
  struct Started {
    RequestId id = 0;
    absl::Time deadline;  // the handoff's, on options_.clock
  };

  // The steps a PrefillCall runs; none blocks.
  //
  // Checks the handoff, builds the writer (its result to `sinks.on_finished`) and submits the
  // prompt (its events to `sinks.on_event`). A refusal after the handoff was read is also told to
  // the decode node, so that it frees the reservation at once.
  std::variant<Started, Failure> Start(const v1::PrefillRequest& request, absl::Time received_at,
                                       PrefillSinks sinks);
  // How a finished prefill failed, if it did. `client_cancelled`: the caller went away.
  static std::optional<Failure> FailureOf(const PrefillFinished& finished, bool client_cancelled);
  // Fills the response with the first token, the transfer's counts and the timings; counts the
  // success in the metrics.
  void Respond(const PrefillFinished& finished, absl::Time received_at,
               v1::PrefillResponse* response);

  Engine* const engine_;
  KvTransport* const transport_;
  const PrefillServiceOptions options_;
  RouterRequestIds router_ids_;
  KvEventsPublisher kv_events_;
  // Where the calls' handlers run; outlives the ticker, which posts to them.
  WorkerPool workers_;
  CallTicker ticker_;
};

}  // namespace tandem

#endif  // TANDEM_PREFILL_NODE_PREFILL_SERVICE_H_
