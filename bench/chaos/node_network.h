// Network cuts for tandem-chaos. The tool first moves itself into a network namespace of its own
// (EnterPrivateNetwork: unshare(CLONE_NEWNET), loopback up, forwarding on), so nothing it sets up
// is visible to, or can disturb, the rest of the machine. Each node then runs in a named network
// namespace of its own, joined to the tool's by a veth pair (10.77.<i+1>.1 on the tool's side,
// 10.77.<i+1>.2 on the node's, routed through the tool's namespace): the router and the bench run
// in the tool's namespace, and node-to-node traffic (UCX, ConnectKv) crosses it. A cut replaces
// the root qdisc of both ends of the pair with `blackhole` (every packet either way dropped
// silently, as a partition does; the kernel here has no netem and no tc classifiers); healing
// deletes it. Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2's `ip` and `tc`.
#ifndef TANDEM_BENCH_CHAOS_NODE_NETWORK_H_
#define TANDEM_BENCH_CHAOS_NODE_NETWORK_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::chaos {

// Moves the calling process into a new network namespace with loopback up and IPv4 forwarding
// on. Call in main() before any thread starts (unshare affects the calling thread only; threads
// started later inherit it). FailedPrecondition naming the reason when not permitted or when
// `ip` is missing; the process is then still in the machine's namespace.
absl::Status EnterPrivateNetwork();

// Deletes named namespaces left by earlier tandem-chaos runs whose process is gone (a run killed
// with SIGKILL cannot clean up). Best effort.
void RemoveStaleNamespaces();

class NodeNetwork {
 public:
  // Creates node `index`'s namespace and veth pair. `log_path` receives the commands' output.
  static absl::StatusOr<std::unique_ptr<NodeNetwork>> Create(int index,
                                                             const std::string& log_path);
  // Deletes the namespace (the veth pair goes with it).
  ~NodeNetwork();
  NodeNetwork(const NodeNetwork&) = delete;
  NodeNetwork& operator=(const NodeNetwork&) = delete;

  // The node's address (it listens there) and the command prefix that runs a program inside its
  // namespace (`ip netns exec NAME`; ip execs the program in place, so the pid is the program's).
  const std::string& node_ip() const { return node_ip_; }
  std::vector<std::string> ExecPrefix() const;

  // Drops every packet to and from the node / lets them through again.
  absl::Status Cut();
  absl::Status Heal();
  bool cut() const { return host_cut_ || node_cut_; }

 private:
  NodeNetwork(std::string ns, std::string host_dev, std::string node_dev, std::string node_ip,
              std::string log_path)
      : ns_(std::move(ns)),
        host_dev_(std::move(host_dev)),
        node_dev_(std::move(node_dev)),
        node_ip_(std::move(node_ip)),
        log_path_(std::move(log_path)) {}

  const std::string ns_;
  const std::string host_dev_;
  const std::string node_dev_;
  const std::string node_ip_;
  const std::string log_path_;
  bool created_ = false;
  bool host_cut_ = false;  // the blackhole is on the tool's end
  bool node_cut_ = false;  // on the node's end
};

}  // namespace tandem::chaos

#endif  // TANDEM_BENCH_CHAOS_NODE_NETWORK_H_
