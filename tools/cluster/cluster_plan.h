// The processes of a local cluster and their command lines, computed from ClusterOptions
// without starting anything (so it is unit-testable).
#ifndef TANDEM_TOOLS_CLUSTER_CLUSTER_PLAN_H_
#define TANDEM_TOOLS_CLUSTER_CLUSTER_PLAN_H_

#include <string>
#include <utility>
#include <vector>

#include "tools/cluster/child_process.h"
#include "tools/cluster/cluster_options.h"
#include "tools/cluster/tls_material.h"

namespace tandem {

enum class ClusterRole { kPrefill, kDecode, kRouter };

// "prefill", "decode", "router".
const char* RoleName(ClusterRole role);
// "tandem-prefill", "tandem-decode", "tandem-router".
const char* RoleBinary(ClusterRole role);

struct ProcessPlan {
  ClusterRole role;
  std::string name;        // "prefill-0", "decode-1", "router"; also the node id
  std::string ready_file;  // where the process writes {"grpc", "metrics", ..., "pid"}
  ChildSpec spec;          // binary, args, env, log file
};

// Where the cluster's files go.
struct ClusterDirs {
  std::string bin_dir;
  std::string log_dir;
  std::string ready_dir;
  // The cluster secret the nodes share (--cluster-secret-file); "" for none.
  std::string secret_file;
  // --tls: the certificates (tls_material.h); ca_cert "" for none.
  TlsMaterial tls;
};

// "" when the options make a runnable cluster, else one message naming the flag.
std::string ValidateClusterOptions(const ClusterOptions& options);

// Prefill nodes the options ask for (resolving the mode's default).
int NumPrefillNodes(const ClusterOptions& options);

// The prefill nodes, then the decode nodes, each listening (gRPC and /metrics) on 127.0.0.1:0.
std::vector<ProcessPlan> PlanNodes(const ClusterOptions& options, const ClusterDirs& dirs);

// The router, pointed at the nodes' gRPC addresses (those that are ready); its HTTP API and
// /metrics on 127.0.0.1:0.
ProcessPlan PlanRouter(const ClusterOptions& options, const ClusterDirs& dirs,
                       const std::vector<std::string>& prefill_addresses,
                       const std::vector<std::string>& decode_addresses);

}  // namespace tandem

#endif  // TANDEM_TOOLS_CLUSTER_CLUSTER_PLAN_H_
