// tandem-chaos's whole run:
//   1. the fixed prompts and their expected tokens (expected_tokens.h);
//   2. the cluster (chaos_cluster.h), each node in its own network namespace when possible;
//   3. open-loop load through tandem-bench's load runner and gRPC client (token ids recorded) on
//      a thread of its own, RSS and threads sampled on another;
//   4. on this thread, the planned faults one after another (fault_plan.h, fault_injector.h);
//      a node found dead without a fault is reported and restarted;
//   5. once every request has ended: every node's KV blocks must come back (bounded settle),
//      the router's counters are scraped, the cluster stops;
//   6. the report (chaos_report.h): a table on stdout, JSON to --out.
#ifndef TANDEM_BENCH_CHAOS_CHAOS_RUN_H_
#define TANDEM_BENCH_CHAOS_CHAOS_RUN_H_

#include <string>

#include "bench/chaos/chaos_options.h"
#include "tools/cluster/signal_watcher.h"

namespace tandem::chaos {

// `network_unavailable`: "" when main() entered a private network namespace (nodes are isolated
// and network cuts possible), else why not (netcut faults are then dropped and reported).
// Returns the exit code: 0 when the goals are met, 1 when not (or interrupted), 2 for setup
// errors (bad directories, the cluster did not start, no expected tokens).
int RunChaos(const ChaosOptions& options, const std::string& network_unavailable,
             SignalWatcher& signals);

}  // namespace tandem::chaos

#endif  // TANDEM_BENCH_CHAOS_CHAOS_RUN_H_
