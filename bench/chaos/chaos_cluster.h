// The cluster tandem-chaos runs and breaks: prefill and decode nodes, then a router pointed at
// them, planned by tandem-cluster's own code (tools/cluster: PlanNodes, PlanRouter, ChildProcess,
// ready files). What it adds: nodes keep their addresses across restarts (the router's
// configured list stays valid), so a node killed or drained is started again on the same gRPC,
// metrics and KV address; and, with isolation, each node runs in a network namespace of its own
// (node_network.h) so its traffic can be cut. Each start of a node logs to its own file
// (<name>.<start>.log). Only processes this object started are ever signalled, by pid.
#ifndef TANDEM_BENCH_CHAOS_CHAOS_CLUSTER_H_
#define TANDEM_BENCH_CHAOS_CHAOS_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/chaos/node_network.h"
#include "tandem/v1/node.pb.h"
#include "tools/cluster/child_process.h"
#include "tools/cluster/cluster_options.h"
#include "tools/cluster/cluster_plan.h"
#include "tools/cluster/ready_file.h"

namespace tandem::chaos {

// A process the cluster runs, for sampling its RSS and threads.
struct ClusterProcess {
  std::string name;  // "router", "prefill-0", ...
  pid_t pid = 0;
};

class ChaosCluster {
 public:
  struct Node {
    ProcessPlan plan;  // after the first start: the addresses it got, kept for restarts
    std::unique_ptr<ChildProcess> process;
    ReadyInfo ready;
    std::unique_ptr<NodeNetwork> net;  // null without isolation
    int starts = 0;
  };

  // `isolate`: each node in a network namespace of its own (the caller has entered a private
  // network, EnterPrivateNetwork). Nothing starts until Start().
  ChaosCluster(ClusterOptions options, ClusterDirs dirs, bool isolate);
  ~ChaosCluster();  // kills whatever still runs
  ChaosCluster(const ChaosCluster&) = delete;
  ChaosCluster& operator=(const ChaosCluster&) = delete;

  // Starts every node, waits for each, then the router; bounded by `timeout`. The error names the
  // process and carries its log's tail.
  absl::Status Start(absl::Duration timeout);

  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  Node& node(int i) { return nodes_[i]; }
  const Node& node(int i) const { return nodes_[i]; }
  bool is_decode(int i) const { return nodes_[i].plan.role == ClusterRole::kDecode; }

  // Starts node `i` again with the same command line once its process has exited (SIGKILLs it
  // first if it still runs) and waits up to `timeout` for it to be ready.
  absl::Status Restart(int i, absl::Duration timeout);

  std::string router_grpc() const { return router_ready_.grpc; }
  // The router's /metrics address ("" when its ready file names none).
  std::string router_metrics() const;
  // Whether the router still runs (it is never faulted; if it dies the run is void).
  bool RouterRunning() { return router_ != nullptr && router_->Running(); }

  // GetLoad of node `i` (its KV blocks and requests).
  absl::StatusOr<v1::NodeLoad> Load(int i, absl::Duration timeout) const;

  // The router and the nodes, with their current pids (thread-safe).
  std::vector<ClusterProcess> Processes() const;

  // SIGCONT to every node (none stays stopped), then the router and the nodes get SIGTERM and
  // `grace` to exit before SIGKILL.
  void Stop(absl::Duration grace);

  // Each process's log file and every log of earlier starts, for the report.
  std::vector<std::string> LogFiles() const;

 private:
  absl::Status StartNode(int i, absl::Time deadline);
  void PublishPids();

  const ClusterOptions options_;
  const ClusterDirs dirs_;
  const bool isolate_;
  std::vector<Node> nodes_;
  std::unique_ptr<ChildProcess> router_;
  ReadyInfo router_ready_;
  std::vector<std::string> logs_;
  mutable absl::Mutex mu_;
  std::vector<ClusterProcess> processes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::chaos

#endif  // TANDEM_BENCH_CHAOS_CHAOS_CLUSTER_H_
