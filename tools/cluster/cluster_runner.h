// tandem-cluster's whole run: directories, start, endpoints, then serve until a signal or a
// child's death — or, with --prompt, one streamed completion — and the ordered stop.
#ifndef TANDEM_TOOLS_CLUSTER_CLUSTER_RUNNER_H_
#define TANDEM_TOOLS_CLUSTER_CLUSTER_RUNNER_H_

#include <string>

#include "absl/status/status.h"
#include "tools/cluster/cluster_options.h"
#include "tools/cluster/signal_watcher.h"

namespace tandem {

// Runs the cluster described by `options` (already validated). Returns the process exit code:
// 0 after a stop on SIGINT/SIGTERM or a successful --prompt; 1 when a member fails to start or
// dies, or the prompt fails; 2 for a bad model/bin/log directory. Messages go to stderr;
// endpoints go to stdout (stderr with --prompt, whose completion is the only stdout output).
int RunCluster(const ClusterOptions& options, SignalWatcher& signals);

// Writes a fresh cluster secret (32 random bytes from the kernel, hex) to `path`, a new file only
// the owner reads (also used by tandem-chaos).
absl::Status WriteClusterSecret(const std::string& path);

}  // namespace tandem

#endif  // TANDEM_TOOLS_CLUSTER_CLUSTER_RUNNER_H_
