#include "router/router_metrics.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "common/metrics/buckets.h"
#include "prometheus/metric_family.h"

namespace tandem {
namespace {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "ok";
    case grpc::StatusCode::CANCELLED:
      return "cancelled";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "invalid_argument";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "deadline_exceeded";
    case grpc::StatusCode::NOT_FOUND:
      return "not_found";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "resource_exhausted";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "out_of_range";
    case grpc::StatusCode::UNAVAILABLE:
      return "unavailable";
    case grpc::StatusCode::INTERNAL:
      return "internal";
    default:
      return "other";
  }
}

prometheus::ClientMetric Value(double v, std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = v;
  m.gauge.value = v;
  return m;
}

prometheus::MetricFamily Family(std::string name, std::string help, prometheus::MetricType type,
                                std::vector<prometheus::ClientMetric> metrics) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  f.metric = std::move(metrics);
  return f;
}

// RouterCounters and the node pool, read when Prometheus scrapes.
class RouterDecisions final : public prometheus::Collectable {
 public:
  RouterDecisions(const RouterCounters* counters, const NodePool* pool)
      : c_(counters), pool_(pool) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    using prometheus::MetricType;
    std::vector<prometheus::MetricFamily> out;
    auto v = [](const std::atomic<int64_t>& a) { return static_cast<double>(a.load()); };
    out.push_back(Family(
        "tandem_router_placements_total",
        "Attempts placed on nodes, by mode (disaggregated, local_prefill, colocated) and reason.",
        MetricType::Counter,
        {Value(v(c_->disaggregated), {{"mode", "disaggregated"}, {"reason", "prefill_node"}}),
         Value(v(c_->local_prefill_short_prompt),
               {{"mode", "local_prefill"}, {"reason", "short_prompt"}}),
         Value(v(c_->local_prefill_no_prefill_node),
               {{"mode", "local_prefill"}, {"reason", "no_prefill_node"}}),
         Value(v(c_->local_prefill_cheaper_local),
               {{"mode", "local_prefill"}, {"reason", "cheaper_local"}}),
         Value(v(c_->local_prefill_migration),
               {{"mode", "local_prefill"}, {"reason", "migration"}}),
         Value(v(c_->colocated), {{"mode", "colocated"}, {"reason", "colocated_mode"}})}));
    std::vector<prometheus::ClientMetric> retries;
    for (int i = 0; i < kNumRetryReasons; ++i) {
      const auto reason = static_cast<RetryReason>(i);
      retries.push_back(Value(static_cast<double>(c_->retries_for(reason)),
                              {{"reason", std::string(RetryReasonName(reason))}}));
    }
    out.push_back(Family("tandem_router_retries_total",
                         "Attempts that failed before the first token and were retried on "
                         "other nodes, by reason.",
                         MetricType::Counter, std::move(retries)));
    std::vector<prometheus::ClientMetric> migrations;
    for (int i = 0; i < kNumMigrationReasons; ++i) {
      const auto reason = static_cast<MigrationReason>(i);
      migrations.push_back(Value(static_cast<double>(c_->migrations_for(reason)),
                                 {{"reason", std::string(MigrationReasonName(reason))}}));
    }
    out.push_back(Family("tandem_router_migrations_total",
                         "Requests moved to another decode node after tokens had reached the "
                         "client (prompt + the tokens so far recomputed there), by reason.",
                         MetricType::Counter, std::move(migrations)));
    std::vector<prometheus::ClientMetric> kv_moves;
    for (int t = 0; t < kNumKvMoveTriggers; ++t) {
      for (int r = 0; r < kNumKvMoveResults; ++r) {
        const auto trigger = static_cast<KvMoveTrigger>(t);
        const auto result = static_cast<KvMoveResult>(r);
        kv_moves.push_back(Value(static_cast<double>(c_->kv_moves_for(trigger, result)),
                                 {{"trigger", std::string(KvMoveTriggerName(trigger))},
                                  {"result", std::string(KvMoveResultName(result))}}));
      }
    }
    out.push_back(Family("tandem_router_kv_moves_total",
                         "Live KV migrations: streams paused on a decode node (draining, or asked "
                         "to rebalance) and moved with their KV to another decode node, or "
                         "resumed where they were, or migrated by recomputing when their node "
                         "failed during the move; by trigger and result.",
                         MetricType::Counter, std::move(kv_moves)));
    out.push_back(Family("tandem_router_kv_move_bytes_total",
                         "KV bytes live migrations moved between decode nodes.",
                         MetricType::Counter, {Value(v(c_->kv_move_bytes))}));
    out.push_back(Family("tandem_router_no_node_available_total",
                         "Requests that found no usable node to place on.", MetricType::Counter,
                         {Value(v(c_->no_node_available))}));
    out.push_back(Family("tandem_router_queued_total",
                         "Requests that waited in the router's admission queue (every "
                         "--max-concurrent-requests slot taken).",
                         MetricType::Counter, {Value(v(c_->queued))}));
    out.push_back(Family("tandem_router_queue_timeouts_total",
                         "Requests refused (429) after waiting --queue-timeout-ms in the admission "
                         "queue.",
                         MetricType::Counter, {Value(v(c_->queue_timeouts))}));
    out.push_back(Family("tandem_router_kv_waits_total",
                         "Requests that waited at the router because no decode node reported "
                         "room for their prompt's KV.",
                         MetricType::Counter, {Value(v(c_->kv_waits))}));
    out.push_back(Family("tandem_router_kv_wait_refusals_total",
                         "Requests refused (UNAVAILABLE / HTTP 503) after waiting for KV room "
                         "past --kv-wait-timeout-ms, or with the wait queue full.",
                         MetricType::Counter, {Value(v(c_->kv_wait_refusals))}));
    out.push_back(Family("tandem_router_failed_after_first_token_total",
                         "Requests that failed after tokens had reached the client and were not "
                         "migrated (--migration-limit reached, or no other decode node).",
                         MetricType::Counter, {Value(v(c_->failed_after_first_token))}));
    out.push_back(Family("tandem_router_stop_string_hits_total",
                         "Requests ended by a stop string the router matched.", MetricType::Counter,
                         {Value(v(c_->stop_string_hits))}));
    out.push_back(Family("tandem_router_cancels_sent_total",
                         "Cancel RPCs sent to nodes (client disconnects, stop strings, abandoned "
                         "attempts).",
                         MetricType::Counter, {Value(v(c_->cancels_sent))}));
    if (pool_ != nullptr) {
      std::vector<prometheus::ClientMetric> nodes;
      for (NodeRole role : {NodeRole::kPrefill, NodeRole::kDecode}) {
        const double known = static_cast<double>(pool_->Nodes(role).size());
        const double up = static_cast<double>(pool_->UpNodes(role).size());
        const std::string name(NodeRoleName(role));
        nodes.push_back(Value(up, {{"role", name}, {"state", "up"}}));
        nodes.push_back(Value(known - up, {{"role", name}, {"state", "down"}}));
      }
      out.push_back(Family("tandem_router_nodes", "Nodes the router knows, by role and health.",
                           MetricType::Gauge, std::move(nodes)));
      // Each node as placement sees it: its last load report plus this router's placements there
      // that the report does not show yet (router/in_flight.h).
      std::vector<prometheus::ClientMetric> in_flight;
      std::vector<prometheus::ClientMetric> queued;
      std::vector<prometheus::ClientMetric> cached;
      for (NodeRole role : {NodeRole::kPrefill, NodeRole::kDecode}) {
        for (const std::shared_ptr<Node>& node : pool_->Nodes(role)) {
          const Node::Snapshot s = node->snapshot();
          std::vector<prometheus::ClientMetric::Label> labels = {
              {"role", std::string(NodeRoleName(role))}, {"node", node->address()}};
          in_flight.push_back(Value(static_cast<double>(s.pending_requests), labels));
          queued.push_back(
              Value(static_cast<double>(s.load.num_queued_tokens() + s.pending_tokens), labels));
          cached.push_back(Value(static_cast<double>(node->num_cached_blocks()), labels));
        }
      }
      out.push_back(Family("tandem_router_node_in_flight_requests",
                           "Requests this router placed on a node that the node's load reports "
                           "do not show yet.",
                           MetricType::Gauge, std::move(in_flight)));
      out.push_back(Family("tandem_router_node_queued_tokens",
                           "Prompt tokens queued on a node as placement sees them: its last load "
                           "report (every router's work) plus this router's placements in flight.",
                           MetricType::Gauge, std::move(queued)));
      out.push_back(Family("tandem_router_node_cached_kv_blocks",
                           "Blocks of a node's prefix cache as this router knows them from the "
                           "node's WatchKvEvents stream (prefill nodes under prefix_aware and "
                           "cost, decode nodes under cost; 0 when not watched).",
                           MetricType::Gauge, std::move(cached)));
      const NodePoolCounters& pc = pool_->counters();
      out.push_back(Family("tandem_router_node_slow_checks_total",
                           "Health checks that timed out on a node left up because it was busy, "
                           "not dead (its streams made progress, or not for long enough).",
                           MetricType::Counter, {Value(v(pc.slow_checks))}));
      out.push_back(Family("tandem_router_node_marked_down_total",
                           "Times a node was marked down (failed health check or call).",
                           MetricType::Counter, {Value(v(pc.marked_down))}));
      out.push_back(Family("tandem_router_node_restarts_total",
                           "Node restarts seen (a new incarnation id at a known address).",
                           MetricType::Counter, {Value(v(pc.incarnation_changes))}));
      out.push_back(Family("tandem_router_dns_failures_total",
                           "Failed DNS resolutions of node service names.", MetricType::Counter,
                           {Value(v(pc.dns_failures))}));
    }
    return out;
  }

 private:
  const RouterCounters* const c_;
  const NodePool* const pool_;
};

}  // namespace

std::string_view RequestApiName(RequestApi api) {
  switch (api) {
    case RequestApi::kGrpc:
      return "grpc";
    case RequestApi::kCompletions:
      return "completions";
    case RequestApi::kChatCompletions:
      return "chat_completions";
  }
  return "?";
}

RouterMetrics::RouterMetrics(const RouterCounters* counters, const NodePool* pool)
    : registry_(std::make_shared<prometheus::Registry>()),
      decisions_(std::make_shared<RouterDecisions>(counters, pool)) {
  prometheus::Registry& r = *registry_;
  requests_ = &prometheus::BuildCounter()
                   .Name("tandem_router_requests_total")
                   .Help(
                       "Requests by API (grpc, completions, chat_completions) and final status "
                       "(ok, or the gRPC status code name of the error).")
                   .Register(r);
  in_flight_ = &prometheus::BuildGauge()
                    .Name("tandem_router_requests_in_flight")
                    .Help("Requests being served right now.")
                    .Register(r)
                    .Add({});
  auto histogram = [&r](const char* name, const char* help, std::vector<double> buckets) {
    return &prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add(
        {}, prometheus::Histogram::BucketBoundaries(std::move(buckets)));
  };
  ttft_ = histogram("tandem_router_time_to_first_token_seconds",
                    "Arrival at the router until the first token was written to the client, of "
                    "requests that produced tokens.",
                    RequestLatencyBuckets());
  kv_move_pause_ = histogram(
      "tandem_router_kv_move_pause_seconds",
      "Live KV migration: from the pause of a stream on its decode node until the destination's "
      "first token reached the router (the extra gap the client sees between two tokens).",
      {1e-3, 2e-3, 5e-3, 10e-3, 20e-3, 50e-3, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0});
  own_first_token_ = histogram(
      "tandem_router_own_first_token_seconds",
      "The router's own share of a request's time to first token: arrival until its node call "
      "was sent (parsing, tokenizing, admission, placement; also any wait for a slot or KV room), "
      "plus the node's first token arriving until its write to the client began. The network and "
      "the nodes are not in it.",
      {25e-6, 50e-6, 100e-6, 150e-6, 200e-6, 300e-6, 500e-6, 750e-6, 1e-3, 2e-3, 5e-3, 10e-3, 50e-3,
       0.1, 1.0});
  inter_token_ = histogram("tandem_router_inter_token_latency_seconds",
                           "Time between consecutive token-carrying responses to a client.",
                           StepLatencyBuckets());
  tpot_ = histogram("tandem_router_time_per_output_token_seconds",
                    "Per request: (last token - first token) / (completion tokens - 1), for "
                    "requests with at least two completion tokens.",
                    StepLatencyBuckets());
  e2e_ = histogram("tandem_router_e2e_request_latency_seconds",
                   "Arrival at the router until the request ended, of requests that were placed.",
                   RequestLatencyBuckets());
  queue_ = histogram("tandem_router_request_queue_time_seconds",
                     "Arrival until the prompt was scheduled on a node: router time before "
                     "dispatch plus the node's reported queue time.",
                     RequestLatencyBuckets());
  auto counter = [&r](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
  };
  prompt_tokens_ =
      counter("tandem_router_prompt_tokens_total", "Prompt tokens of placed requests.");
  completion_tokens_ =
      counter("tandem_router_completion_tokens_total", "Completion tokens sent to clients.");
  cached_tokens_ = counter("tandem_router_cached_prompt_tokens_total",
                           "Prompt tokens served from a node's prefix cache.");
}

void RouterMetrics::RequestStarted() { in_flight_->Increment(); }

void RouterMetrics::TokensWritten(RequestTimer& timer, int64_t n, absl::Time now) {
  if (n <= 0) return;
  if (timer.tokens_ == 0) {
    timer.first_token_ = now;
    ttft_->Observe(Seconds(now - timer.arrival_));
  } else {
    inter_token_->Observe(Seconds(now - timer.last_token_));
  }
  timer.last_token_ = now;
  timer.tokens_ += n;
}

void RouterMetrics::FirstTokenForwarded(RequestTimer& timer, absl::Time now) {
  if (timer.first_token_forwarded_ || timer.first_event_ == absl::InfinitePast() ||
      timer.dispatched_ == absl::InfinitePast()) {
    return;
  }
  timer.first_token_forwarded_ = true;
  own_first_token_->Observe(
      Seconds((timer.dispatched_ - timer.arrival_) + (now - timer.first_event_)));
}

void RouterMetrics::KvMovePaused(absl::Duration pause) {
  kv_move_pause_->Observe(absl::ToDoubleSeconds(pause));
}

void RouterMetrics::RequestFinished(RequestApi api, grpc::StatusCode code,
                                    const RequestTimer& timer, absl::Time now,
                                    int64_t prompt_tokens, int64_t completion_tokens,
                                    int64_t cached_tokens) {
  in_flight_->Decrement();
  requests_->Add({{"api", std::string(RequestApiName(api))}, {"status", CodeName(code)}})
      .Increment();
  e2e_->Observe(Seconds(now - timer.arrival()));
  queue_->Observe(Seconds(timer.queue()));
  if (completion_tokens >= 2 && timer.has_first_token()) {
    tpot_->Observe(Seconds(timer.last_token() - timer.first_token()) /
                   static_cast<double>(completion_tokens - 1));
  }
  prompt_tokens_->Increment(static_cast<double>(prompt_tokens));
  completion_tokens_->Increment(static_cast<double>(completion_tokens));
  cached_tokens_->Increment(static_cast<double>(cached_tokens));
}

void RouterMetrics::RequestRefused(RequestApi api, grpc::StatusCode code) {
  requests_->Add({{"api", std::string(RequestApiName(api))}, {"status", CodeName(code)}})
      .Increment();
}

}  // namespace tandem
