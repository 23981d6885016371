#include "bench/chaos/fault_injector.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace tandem::chaos {
namespace {

std::string Seconds(absl::Duration d) {
  return absl::StrFormat("%.2f s", absl::ToDoubleSeconds(d));
}

// The node has exited (or is made to within `timeout`, SIGKILL after it); then it is started
// again on its addresses. Appends what happened to `record`.
void RestartAfterExit(ChaosCluster& cluster, int i, absl::Duration timeout,
                      const InjectorOptions& options, FaultRecord* record) {
  ChildProcess& process = *cluster.node(i).process;
  const absl::Time signalled = absl::Now();
  if (!process.WaitFor(timeout)) {
    absl::StrAppend(&record->detail, "still running after ", Seconds(timeout), ", killed; ");
    process.Stop(absl::ZeroDuration());
  }
  absl::StrAppend(&record->detail, process.DescribeExit(), " after ",
                  Seconds(absl::Now() - signalled), "; ");
  const absl::Time restart = absl::Now();
  absl::Status started = cluster.Restart(i, options.restart_timeout);
  if (started.ok()) {
    absl::StrAppend(&record->detail, "restarted, ready in ", Seconds(absl::Now() - restart));
  } else {
    record->ok = false;
    absl::StrAppend(&record->detail, "restart failed: ", started.message());
  }
}

}  // namespace

FaultRecord InjectFault(ChaosCluster& cluster, const PlannedFault& fault, absl::Time load_start,
                        const InjectorOptions& options, const InterruptibleSleep& sleep) {
  FaultRecord record;
  record.planned = fault;
  const int i = fault.node;
  ChaosCluster::Node& node = cluster.node(i);
  record.node = node.plan.name;
  record.started_s = absl::ToDoubleSeconds(absl::Now() - load_start);
  const absl::Duration hold = absl::Seconds(fault.hold_s);
  switch (fault.kind) {
    case FaultKind::kKill:
      node.process->Signal(SIGKILL);
      RestartAfterExit(cluster, i, options.exit_timeout, options, &record);
      break;
    case FaultKind::kTerm:
      node.process->Signal(SIGTERM);
      RestartAfterExit(cluster, i, options.drain_timeout, options, &record);
      break;
    case FaultKind::kStop: {
      node.process->Signal(SIGSTOP);
      const bool slept = sleep(hold);
      node.process->Signal(SIGCONT);
      record.ok = node.process->Running();
      record.detail = absl::StrCat(
          "SIGCONT after ", Seconds(absl::Now() - load_start - absl::Seconds(record.started_s)),
          slept ? "" : " (interrupted)", record.ok ? "" : "; it is not running");
      break;
    }
    case FaultKind::kNetCut: {
      if (node.net == nullptr) {
        record.ok = false;
        record.detail = "no network namespace for this node (network cuts unavailable)";
        break;
      }
      absl::Status cut = node.net->Cut();
      const bool slept = sleep(hold);
      absl::Status healed = node.net->Heal();
      record.ok = cut.ok() && healed.ok();
      record.detail = absl::StrCat(
          "cut for ", Seconds(absl::Now() - load_start - absl::Seconds(record.started_s)),
          slept ? "" : " (interrupted)", cut.ok() ? "" : absl::StrCat("; cut: ", cut.message()),
          healed.ok() ? "" : absl::StrCat("; heal: ", healed.message()));
      break;
    }
  }
  record.ended_s = absl::ToDoubleSeconds(absl::Now() - load_start);
  return record;
}

}  // namespace tandem::chaos
