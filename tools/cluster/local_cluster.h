// A running local cluster: prefill and decode nodes, then a router pointed at them, each a
// child process with its own log file and ready file. Starts them in order, reports which one
// failed (with its log tail), notices a child that dies, and stops them router-first.
#ifndef TANDEM_TOOLS_CLUSTER_LOCAL_CLUSTER_H_
#define TANDEM_TOOLS_CLUSTER_LOCAL_CLUSTER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tools/cluster/child_process.h"
#include "tools/cluster/cluster_options.h"
#include "tools/cluster/cluster_plan.h"
#include "tools/cluster/ready_file.h"

namespace tandem {

class LocalCluster {
 public:
  struct Member {
    ProcessPlan plan;
    std::unique_ptr<ChildProcess> process;
    ReadyInfo ready;  // set once the member is ready
  };

  // `dirs` must exist. Nothing starts until Start().
  LocalCluster(ClusterOptions options, ClusterDirs dirs);
  // Kills whatever still runs.
  ~LocalCluster();

  // Starts the nodes, waits for their ready files, then starts the router and waits for it.
  // The whole startup is bounded by options.startup_timeout_s. On failure the message names the
  // member, how it failed and the tail of its log; members already started keep running until
  // Stop() or destruction. `should_stop` is polled while waiting (interrupt: Cancelled).
  absl::Status Start(const std::function<bool()>& should_stop = {});

  const std::vector<Member>& members() const { return members_; }
  // The router's gRPC address (empty before it is ready).
  std::string router_address() const;
  // The CA file clients verify the router with ("" without --tls).
  const std::string& tls_ca() const { return dirs_.tls.ca_cert; }
  // Another endpoint from the router's ready file ("http", "metrics"); empty when it has none.
  std::string router_endpoint(const std::string& key) const;

  // The first member found to have exited since the last call, described with its log tail;
  // nullopt while every member runs.
  std::optional<std::string> CheckExited();

  // The router first, then all nodes: SIGTERM, up to `grace` to exit, then SIGKILL. Returns one
  // line per member that had to be killed.
  std::vector<std::string> Stop(absl::Duration grace);

  // Human-readable endpoints: router addresses, then each member's role, pid, addresses (gRPC,
  // and /metrics and HTTP when its ready file names them) and log.
  std::string DescribeEndpoints() const;
  // The same as JSON: {"grpc": router, "http": router (when it serves HTTP), "pid": launcher pid,
  // "log_dir", "processes": [{"name", "role", "pid", "grpc", "log", "metrics", ...}]}.
  std::string EndpointsJson() const;

 private:
  absl::Status StartMember(const ProcessPlan& plan);
  absl::Status WaitReady(Member& member, absl::Time deadline,
                         const std::function<bool()>& should_stop);
  std::string Describe(const Member& member) const;

  ClusterOptions options_;
  ClusterDirs dirs_;
  std::vector<Member> members_;
  std::vector<bool> reported_;  // exits already returned by CheckExited
};

}  // namespace tandem

#endif  // TANDEM_TOOLS_CLUSTER_LOCAL_CLUSTER_H_
