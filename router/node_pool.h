// The prefill and decode nodes of a cluster: a static list per role, or DNS names re-resolved
// every dns_refresh_ms (nodes appear and disappear with the name's addresses). A background
// health round every health_interval_ms (gRPC health Check + GetLoad) marks each node up or
// down; a node that fails an RPC with UNAVAILABLE is marked down at once and is used again once a
// check passes. Busy is not dead: checks that only time out leave a node up until they have
// failed for node_down_after_ms with no progress on its streams.
// Restarts (a new incarnation) are noticed and counted. Thread-safe.
#ifndef TANDEM_ROUTER_NODE_POOL_H_
#define TANDEM_ROUTER_NODE_POOL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/util/clock.h"
#include "router/dns_resolver.h"
#include "router/kv_events_watcher.h"
#include "router/node.h"
#include "router/node_directory.h"
#include "router/router_options.h"

namespace tandem {

struct NodePoolCounters {
  std::atomic<int64_t> marked_down{0};
  std::atomic<int64_t> marked_up{0};
  std::atomic<int64_t> incarnation_changes{0};
  std::atomic<int64_t> dns_failures{0};
  // Health checks that ran out of time on a node left up (busy, not dead).
  std::atomic<int64_t> slow_checks{0};
};

class NodePool : public NodeDirectory {
 public:
  // `resolver` null: getaddrinfo. `clock` (must outlive the pool) times slow checks and
  // progress.
  NodePool(NodePoolOptions options, std::shared_ptr<DnsResolver> resolver = nullptr,
           Clock* clock = Clock::Real());
  ~NodePool() override;  // Stop()
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;

  // Checks the addresses, resolves the names, runs one health round (so healthy nodes are up
  // when it returns; it gives them first_check_timeout_ms) and starts the background threads.
  // Nodes that are down are not an error.
  absl::Status Start();
  void Stop();

  // Every known node of `role`, sorted by address.
  std::vector<std::shared_ptr<Node>> Nodes(NodeRole role) const override;
  // Those that are up and not draining.
  std::vector<std::shared_ptr<Node>> UpNodes(NodeRole role) const override;

  // An RPC to `node` failed in a way that says the node is unreachable: mark it down until the
  // next health check passes.
  void ReportFailure(const std::shared_ptr<Node>& node, const std::string& error) override;

  // One health round over every node (the background thread runs this).
  void CheckHealth();
  // One resolution of each DNS name (the background thread runs this); new nodes are checked
  // at once.
  void RefreshDns();

  const NodePoolCounters& counters() const { return counters_; }

 private:
  // Adds `addresses` of `role` that are new, drops DNS nodes of `name` that are gone. Returns the
  // added nodes.
  std::vector<std::shared_ptr<Node>> UpdateMembers(NodeRole role, const std::string& source,
                                                   const std::vector<std::string>& addresses);
  // What a check of a background round has: the interval (at least 50 ms).
  absl::Duration CheckTimeout() const {
    return absl::Milliseconds(std::max<int64_t>(options_.health_interval_ms, 50));
  }
  // One health round whose checks each have `timeout`.
  void CheckHealthWithin(absl::Duration timeout);
  void Probe(const std::vector<std::shared_ptr<Node>>& nodes, absl::Duration timeout);
  // A check of `node`, which is up, timed out: true once checks have failed for
  // node_down_after_ms and its streams made no progress in that time either.
  bool SlowLongEnoughToBeDown(Node& node);
  void HealthLoop();
  void DnsLoop();

  struct Member {
    std::shared_ptr<Node> node;
    std::string source;  // "static" or the DNS name it came from
    std::unique_ptr<KvEventsWatcher> watcher;
  };

  const NodePoolOptions options_;
  Clock* const clock_;
  // The channel credentials every node's channel uses (TLS per options_.node_tls), made once.
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  grpc::ChannelArguments channel_args_;
  const std::shared_ptr<DnsResolver> resolver_;
  NodePoolCounters counters_;

  mutable absl::Mutex mu_;
  // By role, then address.
  std::map<std::string, Member> members_[2] ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::thread health_thread_;
  std::thread dns_thread_;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_NODE_POOL_H_
