// One request's whole path through the router, for every public API (gRPC Generate, the
// OpenAI-compatible HTTP endpoints): validate and tokenize (request_builder), place (placement
// over the node pool), then run it
//   disaggregated: DecodeNode.Reserve → its KvHandoff → PrefillNode.Prefill(tokens, sampling,
//                  handoff) while D's token stream is read;
//   local prefill / colocated: DecodeNode.Generate;
// and stream the tokens to a ResponseSink with UTF-8-safe incremental text and stop strings
// (output_text).
//
// Failures before any token reached the client cancel what the attempt holds and retry the whole
// request on another pair, up to max_retries; after a token was sent the request fails with the
// node's status. A client that goes away, a stop string and an abandoned attempt cancel the node
// calls and send Cancel RPCs. Every decision is counted (RouterCounters) and every request is
// measured (RouterMetrics).
//
// The runner owns what requests share (admission, the watchdog, placement, the counters) and the
// decisions (Place, JudgeAttempt's facts and Apply); each request is a RequestFlow
// (request_flow.h), a state machine driven by gRPC's callbacks that no thread waits on.
#ifndef TANDEM_ROUTER_REQUEST_RUNNER_H_
#define TANDEM_ROUTER_REQUEST_RUNNER_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/util/clock.h"
#include "common/util/worker_pool.h"
#include "grpcpp/support/status.h"
#include "router/admission_queue.h"
#include "router/attempt_verdict.h"
#include "router/call_watchdog.h"
#include "router/client_stream.h"
#include "router/kv_rebalance.h"
#include "router/node_directory.h"
#include "router/placement.h"
#include "router/request_builder.h"
#include "router/response_sink.h"
#include "router/router_counters.h"
#include "router/router_metrics.h"
#include "router/router_options.h"
#include "router/served_model.h"
#include "tandem/v1/generate.pb.h"

namespace tandem {

class RequestFlow;

struct RunOptions {
  RequestApi api = RequestApi::kGrpc;
  // The client's own deadline (gRPC deadline); the router's --request-timeout-ms applies too.
  absl::Time deadline = absl::InfiniteFuture();
  // sampling.max_tokens unset: fill the context left after the prompt (OpenAI chat's default)
  // instead of BuildRequest's default of 16.
  bool unset_max_tokens_fills_context = false;
  // The router's id for this request when the caller already made one (the HTTP front end sends
  // it back in X-Request-Id); "": the runner makes one.
  std::string request_id;
};

class RequestRunner {
 public:
  // `nodes`, `counters`, `metrics` and `clock` must outlive the runner. Deadlines and timers read
  // `clock` (gRPC deadlines on node calls too: a virtual clock is for runs without real nodes).
  RequestRunner(std::shared_ptr<const ServedModel> model, NodeDirectory* nodes,
                const RouterOptions& options, RouterCounters* counters, RouterMetrics* metrics,
                Clock* clock = Clock::Real());
  // Cancels the requests still running and waits (bounded) for them and for Cancel RPCs still
  // in flight to end.
  ~RequestRunner();
  RequestRunner(const RequestRunner&) = delete;
  RequestRunner& operator=(const RequestRunner&) = delete;

  // Starts `request`; its responses go to `sink` and `done` runs once, last, with how it ended
  // (on any thread; the sink is not touched after). No thread waits on the request
  // (request_flow.h). OK: the last response (finish_reason and usage set) was written. Errors
  // carry gRPC codes: INVALID_ARGUMENT / OUT_OF_RANGE for bad input (nothing was written),
  // NOT_FOUND for a model this router does not serve, RESOURCE_EXHAUSTED when no slot is to be
  // had (the admission queue was full or the wait for one ran out; the API layers add
  // Retry-After (HTTP) or grpc-retry-pushback-ms (gRPC) of kRetryAfterSeconds), UNAVAILABLE when
  // no node can take it, CANCELLED when the client went away, DEADLINE_EXCEEDED, and the node's
  // status otherwise. An error may follow responses already written (a node failed after the
  // first token). `sink` must stay valid until `done` runs.
  void Start(const v1::GenerateRequest& request, const RunOptions& options, ResponseSink* sink,
             absl::AnyInvocable<void(grpc::Status)> done);
  // Start, then waits for the end on the calling thread (tests, tools).
  grpc::Status Run(const v1::GenerateRequest& request, const RunOptions& options,
                   ResponseSink& sink);

  // A request its API layer refused before Run (e.g. HTTP JSON that does not parse): counted in
  // the requests metric like the ones Run refuses.
  void CountRefused(RequestApi api, grpc::StatusCode code) {
    ++counters_->requests;
    ++counters_->requests_invalid;
    metrics_->RequestRefused(api, code);
  }

  const ServedModel& model() const { return *model_; }
  // Requests started and not ended (running or waiting for a slot).
  int64_t in_flight() const { return in_flight_.load(); }
  const AdmissionQueue& admission() const { return admission_; }

  // Live KV migration: one round of rebalancing (kv_rebalance.h) over the decode nodes' last load
  // reports and the streams this router runs; asks each chosen stream's node to pause it (its
  // flow then moves it). Returns the moves asked for. The router runs it every
  // --kv-rebalance-interval-ms; tests call it directly.
  std::vector<RebalanceMove> RebalanceKvOnce();

  // What a client refused for load is told to wait before it tries again.
  static constexpr int kRetryAfterSeconds = 1;

 private:
  friend class RequestFlow;

  struct Chosen {
    PlacementKind kind = PlacementKind::kDisaggregated;
    PlacementReason reason = PlacementReason::kDisaggregated;
    std::shared_ptr<Node> decode;
    std::shared_ptr<Node> prefill;            // kDisaggregated only
    int64_t cached_prefix_tokens = 0;         // the prefill node's (placement.h)
    int64_t decode_cached_prefix_tokens = 0;  // the decode node's (the cost policy only)
    // What the requests to them carry (in_flight.h).
    PlacementTag decode_tag;
    PlacementTag prefill_tag;
  };
  // Live KV migration: the decode node a stream moves to, and its Reserve's tag.
  struct KvMoveTarget {
    std::shared_ptr<Node> node;  // null: none has room
    PlacementTag tag;
  };
  struct AttemptResult {
    grpc::Status status;  // OK: the request is done
    bool retry = false;
    RetryReason reason = RetryReason::kDecodeFailed;
    bool migrate = false;  // tokens reached the client: another decode node may go on from them
    MigrationReason migration_reason = MigrationReason::kStreamFailed;
    std::vector<std::shared_ptr<Node>> blame;  // not to be used again by this request if possible
  };

  absl::StatusOr<Chosen> Place(const RouterRequest& request,
                               const std::vector<std::string>& failed_nodes);
  // Counts and logs attempt `attempt`'s placement.
  void CountPlacement(const Chosen& chosen, const RouterRequest& request, int attempt);
  // The facts every attempt shares: the nodes' names and the request's and client's state.
  AttemptFacts CommonFacts(const Chosen& chosen, const CallGuard& guard,
                           const ClientStream& stream) const;
  // Carries out JudgeAttempt's verdict: Cancel RPCs, nodes marked down, nodes to avoid.
  AttemptResult Apply(const AttemptVerdict& verdict, const Chosen& chosen,
                      const std::string& node_request_id);
  template <typename Request, typename Response>
  void SendDetached(const std::shared_ptr<Node>& node, Request request,
                    absl::AnyInvocable<void(NodeClient&, grpc::ClientContext*, const Request*,
                                            Response*, NodeClient::Done)>
                        start,
                    absl::AnyInvocable<void(const grpc::Status&, const Response&)> on_done);
  // Best-effort Cancel RPC; does not wait.
  void SendCancel(const std::shared_ptr<Node>& node, const std::string& request_id);
  // Live KV migration: best-effort PauseForMigration (or ResumePaused) RPC; does not wait.
  void SendPauseOrResume(const std::shared_ptr<Node>& node, const std::string& request_id,
                         bool resume);
  // The decode node to move a stream of `kv_tokens` tokens to, with its KV: up, not `from`, not
  // among `failed_nodes`, with free KV blocks for those tokens and the rest of the request; the
  // one with the most; no node when none has room. Counts the blocks as pending there.
  KvMoveTarget PlaceKvMove(const RouterRequest& request, int64_t kv_tokens,
                           const std::shared_ptr<Node>& from,
                           const std::vector<std::string>& failed_nodes);

  // The streams this runner has on decode nodes (for RebalanceKvOnce), by flow.
  void TrackStream(uint64_t key, std::weak_ptr<RequestFlow> flow, const std::string& node);
  void UntrackStream(uint64_t key);
  void RebalanceLoop();

  const std::shared_ptr<const ServedModel> model_;
  NodeDirectory* const pool_;
  const RouterOptions options_;
  RouterCounters* const counters_;
  RouterMetrics* const metrics_;
  Clock* const clock_;
  // Where the requests' flows run (a few threads, whatever the number of requests); outlives the
  // watchdog, which posts to them.
  WorkerPool workers_;
  const Placer placer_;
  CallWatchdog watchdog_;
  AdmissionQueue admission_;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> live_flows_{0};  // RequestFlow objects not yet destroyed
  absl::Mutex place_mu_;                // Place: snapshots, choice and in-flight counts as one
  std::atomic<int64_t> waiting_for_kv_{0};

  absl::Mutex cancels_mu_;
  int cancels_in_flight_ ABSL_GUARDED_BY(cancels_mu_) = 0;

  struct TrackedStream {
    std::weak_ptr<RequestFlow> flow;
    std::string node;
  };
  std::atomic<uint64_t> next_flow_key_{1};
  absl::Mutex streams_mu_;
  absl::flat_hash_map<uint64_t, TrackedStream> streams_ ABSL_GUARDED_BY(streams_mu_);
  absl::Notification stop_rebalancer_;
  std::thread rebalancer_;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_REQUEST_RUNNER_H_
