// Starts a real cluster (decode nodes, prefill nodes, router) on loopback for integration tests,
// and talks to it over gRPC: Generate through the router, GetLoad on the nodes.
#ifndef TANDEM_TESTS_INTEGRATION_CLUSTER_LOCAL_CLUSTER_FIXTURE_H_
#define TANDEM_TESTS_INTEGRATION_CLUSTER_LOCAL_CLUSTER_FIXTURE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tandem/v1/generate.grpc.pb.h"
#include "tandem/v1/node.grpc.pb.h"
#include "tests/integration/process_launcher.h"

namespace tandem::testing {

struct ClusterSpec {
  std::string model_dir;
  int num_prefill = 1;
  int num_decode = 1;
  std::string ucx_tls = "tcp";
  std::vector<std::string> node_args;    // extra flags for every node
  std::vector<std::string> decode_args;  // extra flags for decode nodes
  // Extra flags for decode node i alone (after decode_args); may be shorter than num_decode.
  std::vector<std::vector<std::string>> decode_args_each;
  std::vector<std::string> router_args;  // extra flags for the router
  EnvVars prefill_env;                   // extra environment for prefill nodes (test hooks)
};

struct GenerateOutcome {
  std::vector<int> tokens;
  std::string text;
  std::string finish_reason;
  grpc::Status status;
  int num_messages = 0;
};

class LocalCluster {
 public:
  // Starts every process and waits until all are ready; ASSERTs inside (call from a test body
  // with ASSERT_NO_FATAL_FAILURE).
  void Start(const ClusterSpec& spec);
  // For tests that start processes one by one with StartDecode/StartPrefill.
  void SetSpec(const ClusterSpec& spec) { spec_ = spec; }
  ~LocalCluster();

  // Starts (again) decode node `i` with the same flags (a new incarnation, a new port unless the
  // caller asks for the old one).
  absl::StatusOr<std::string> StartDecode(int i, const std::string& listen = "127.0.0.1:0");
  absl::StatusOr<std::string> StartPrefill(int i, const std::string& listen = "127.0.0.1:0");

  LaunchedProcess& decode(int i) { return *decode_[i]; }
  LaunchedProcess& prefill(int i) { return *prefill_[i]; }
  LaunchedProcess& router() { return *router_; }
  const std::string& router_address() const { return router_address_; }
  // Router replicas: another router in front of the same nodes, with the spec's router flags
  // and `extra_args`; returns its index (Start's router is 0).
  absl::StatusOr<int> StartRouterReplica(const std::vector<std::string>& extra_args = {});
  int num_routers() const { return 1 + static_cast<int>(replicas_.size()); }
  // Router `i`'s gRPC and Prometheus addresses (0: Start's router).
  std::string router_address(int i) const;
  std::string router_metrics_address(int i) const;
  // A node's gRPC address.
  const std::string& decode_address(int i) const { return decode_addresses_[i]; }
  const std::string& prefill_address(int i) const { return prefill_addresses_[i]; }
  // Addresses from the processes' ready files ("" when a process does not serve one): each
  // node's and the router's Prometheus /metrics, the router's OpenAI-compatible HTTP API.
  std::string decode_metrics_address(int i) const;
  std::string prefill_metrics_address(int i) const;
  std::string router_metrics_address() const;
  std::string router_http_address() const;
  std::string Logs();

  // A Generate call through the router, read to the end. `deadline` bounds the whole call.
  GenerateOutcome Generate(const v1::GenerateRequest& request,
                           absl::Duration deadline = absl::Seconds(120));
  // The same through router `router` (StartRouterReplica).
  GenerateOutcome GenerateVia(int router, const v1::GenerateRequest& request,
                              absl::Duration deadline = absl::Seconds(120));
  absl::StatusOr<v1::NodeLoad> DecodeLoad(const std::string& address);
  absl::StatusOr<v1::NodeLoad> PrefillLoad(const std::string& address);

  // Polls until `pred(load)` holds for the node at `address` (decode when `decode`), or timeout.
  bool WaitForLoad(const std::string& address, bool decode,
                   const std::function<bool(const v1::NodeLoad&)>& pred, absl::Duration timeout);

 private:
  absl::StatusOr<std::string> StartNode(const std::string& binary,
                                        const std::vector<std::string>& extra_args,
                                        const std::string& listen,
                                        std::vector<std::unique_ptr<LaunchedProcess>>* processes,
                                        std::vector<std::string>* addresses, int i);
  // Starts a router over the nodes started so far, with the spec's flags and `extra_args`.
  absl::StatusOr<std::unique_ptr<LaunchedProcess>> LaunchRouter(
      const std::vector<std::string>& extra_args);

  ClusterSpec spec_;
  std::vector<std::unique_ptr<LaunchedProcess>> decode_;
  std::vector<std::unique_ptr<LaunchedProcess>> prefill_;
  std::unique_ptr<LaunchedProcess> router_;
  std::vector<std::string> decode_addresses_;
  std::vector<std::string> prefill_addresses_;
  std::string router_address_;
  std::shared_ptr<grpc::Channel> router_channel_;
  struct Replica {
    std::unique_ptr<LaunchedProcess> process;
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
  };
  std::vector<Replica> replicas_;
};

// GET http://`address`/metrics (curl), the body on status 200.
absl::StatusOr<std::string> ScrapeMetrics(const std::string& address);

// The value of `series` (its name and labels exactly as exported, e.g.
// `tandem_router_migrations_total{reason="node_unreachable"}`) in a /metrics body; -1 if absent.
double MetricValue(const std::string& body, const std::string& series);
// Waits until the router whose metrics are at `metrics_address` counts at least `decode` decode
// and `prefill` prefill nodes up; false after `timeout`.
bool RouterSeesNodesUp(const std::string& metrics_address, int decode, int prefill,
                       absl::Duration timeout);

// What a sim-backend node emits after `prompt` (greedy, the Llama-3 vocabulary's ordinary
// tokens): each token follows from the one before and its position (SimBackend::NextToken).
std::vector<int> SimTokens(const std::vector<int>& prompt, int n);

// A greedy token-id request of `max_tokens` that ignores EOS.
v1::GenerateRequest GreedyTokenRequest(const std::vector<int>& prompt, int max_tokens);

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_INTEGRATION_CLUSTER_LOCAL_CLUSTER_FIXTURE_H_
