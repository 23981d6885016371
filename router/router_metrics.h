// The router's Prometheus metrics (prefix tandem_router_, base units): requests by API and
// status, in-flight requests, TTFT / inter-token latency / TPOT / end-to-end / queue time
// histograms, prompt / completion / cached tokens, and — read from RouterCounters and the node
// pool at scrape time — every placement decision by mode and reason, retries by reason, stop
// string hits, Cancel RPCs, and the nodes up and down by role.
#ifndef TANDEM_ROUTER_ROUTER_METRICS_H_
#define TANDEM_ROUTER_ROUTER_METRICS_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/time/time.h"
#include "grpcpp/support/status.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "router/node_pool.h"
#include "router/router_counters.h"

namespace tandem {

// Which public API a request came through (the `api` label).
enum class RequestApi { kGrpc, kCompletions, kChatCompletions };
std::string_view RequestApiName(RequestApi api);  // "grpc", "completions", "chat_completions"

// The times of one request, as the router saw them. Not thread-safe: the request's thread.
class RequestTimer {
 public:
  explicit RequestTimer(absl::Time arrival) : arrival_(arrival) {}

  // An attempt was sent to its nodes (the last call before the first token counts).
  void Dispatched(absl::Time now) {
    if (!has_first_token()) dispatched_ = now;
  }
  // The decode node's first token of the request reached the router (across attempts: the first).
  void FirstEventArrived(absl::Time when) {
    if (first_event_ == absl::InfinitePast()) first_event_ = when;
  }
  // Time the request waited on a node before its prompt was scheduled (reported by the node).
  void SetNodeQueue(absl::Duration queued) { node_queue_ = queued; }

  absl::Time arrival() const { return arrival_; }
  bool has_first_token() const { return tokens_ > 0; }
  absl::Time first_token() const { return first_token_; }
  absl::Time last_token() const { return last_token_; }
  int64_t tokens() const { return tokens_; }
  // Router time before dispatch plus the node's queue time.
  absl::Duration queue() const {
    return (dispatched_ == absl::InfinitePast() ? absl::ZeroDuration() : dispatched_ - arrival_) +
           node_queue_;
  }

 private:
  friend class RouterMetrics;
  const absl::Time arrival_;
  absl::Time dispatched_ = absl::InfinitePast();
  absl::Time first_event_ = absl::InfinitePast();
  bool first_token_forwarded_ = false;
  absl::Time first_token_ = absl::InfinitePast();
  absl::Time last_token_ = absl::InfinitePast();
  absl::Duration node_queue_ = absl::ZeroDuration();
  int64_t tokens_ = 0;
};

class RouterMetrics {
 public:
  // `counters` and `pool` (may be null) are read at scrape time and must outlive the registry's
  // last scrape (the router server stops the metrics server first).
  RouterMetrics(const RouterCounters* counters, const NodePool* pool);

  // Serve this on /metrics (MetricsServer::Register).
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  std::shared_ptr<prometheus::Collectable> decisions() const { return decisions_; }

  void RequestStarted();
  // A response carrying `n` > 0 tokens reached the client: updates `timer`, and observes the gap
  // since the previous such response (inter-token latency).
  void TokensWritten(RequestTimer& timer, int64_t n, absl::Time now);
  // The response with the request's first token starts its write to the client (`now`): observes
  // the router's own share of the time to first token, once per request.
  void FirstTokenForwarded(RequestTimer& timer, absl::Time now);
  // A live KV move switched a stream to its destination after `pause`.
  void KvMovePaused(absl::Duration pause);
  // Ends a request started with RequestStarted: counts it by API and status, observes its
  // latencies (TTFT etc. only when it produced tokens) and adds its token counts.
  void RequestFinished(RequestApi api, grpc::StatusCode code, const RequestTimer& timer,
                       absl::Time now, int64_t prompt_tokens, int64_t completion_tokens,
                       int64_t cached_tokens);
  // A request refused before it started (bad input, overload): counted by API and status only.
  void RequestRefused(RequestApi api, grpc::StatusCode code);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> decisions_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Gauge* in_flight_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* own_first_token_;
  prometheus::Histogram* kv_move_pause_;
  prometheus::Histogram* inter_token_;
  prometheus::Histogram* tpot_;
  prometheus::Histogram* e2e_;
  prometheus::Histogram* queue_;
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* completion_tokens_;
  prometheus::Counter* cached_tokens_;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_ROUTER_METRICS_H_
