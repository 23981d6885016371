// Performs one planned fault on a ChaosCluster, to its end: a killed or drained node is running
// and ready again (same addresses), a stopped one continued, a cut one healed. Runs on the thread
// that started the cluster (a node restarted here dies with this thread: PR_SET_PDEATHSIG).
#ifndef TANDEM_BENCH_CHAOS_FAULT_INJECTOR_H_
#define TANDEM_BENCH_CHAOS_FAULT_INJECTOR_H_

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "bench/chaos/chaos_cluster.h"
#include "bench/chaos/fault_plan.h"

namespace tandem::chaos {

struct FaultRecord {
  PlannedFault planned;
  std::string node;      // "decode-1"
  double started_s = 0;  // seconds from the start of the load
  double ended_s = 0;    // the node is back (ready, continued, healed)
  bool ok = true;        // false: a step failed (the node may be gone for the rest of the run)
  std::string detail;    // what happened: "exited (killed by signal 9) in 0.01 s; ready in 2.10 s"
};

struct InjectorOptions {
  absl::Duration exit_timeout = absl::Seconds(10);      // a SIGKILLed node's exit
  absl::Duration drain_timeout = absl::Seconds(40);     // a SIGTERMed node's drain and exit
  absl::Duration restart_timeout = absl::Seconds(120);  // a restarted node's ready file
};

// Waits `d` unless the run is interrupted; false when it was (the fault is then ended at once:
// continued, healed or restarted all the same).
using InterruptibleSleep = std::function<bool(absl::Duration d)>;

FaultRecord InjectFault(ChaosCluster& cluster, const PlannedFault& fault, absl::Time load_start,
                        const InjectorOptions& options, const InterruptibleSleep& sleep);

}  // namespace tandem::chaos

#endif  // TANDEM_BENCH_CHAOS_FAULT_INJECTOR_H_
