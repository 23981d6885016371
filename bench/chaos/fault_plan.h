// The faults of a chaos run, planned up front from a seed (a pure function: same options, same
// plan), so a run can be repeated and a test can check the plan without a cluster. One fault every
// `interval_s`: a random node and a random kind among those enabled; kinds that hold a node down
// for a while (SIGSTOP, a network cut) hold it for a random time in [min_hold_s, max_hold_s].
// Faults never overlap: the injector performs each one to its end (restart included) before the
// next, so the plan's times are the earliest each may start.
#ifndef TANDEM_BENCH_CHAOS_FAULT_PLAN_H_
#define TANDEM_BENCH_CHAOS_FAULT_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::chaos {

enum class FaultKind {
  kKill,    // SIGKILL, then a restart on the same addresses
  kStop,    // SIGSTOP for hold_s, then SIGCONT
  kTerm,    // SIGTERM (the node drains and exits), then a restart on the same addresses
  kNetCut,  // every packet to and from the node dropped for hold_s, then restored
};

// "kill", "stop", "term", "netcut".
const char* FaultKindName(FaultKind kind);
std::optional<FaultKind> ParseFaultKind(std::string_view name);
// "kill,stop,term,netcut" → kinds (each once, in the given order); nullopt naming nothing when a
// name is unknown or the list is empty.
std::optional<std::vector<FaultKind>> ParseFaultKinds(std::string_view list);
// Whether the kind keeps the node down for hold_s (kStop, kNetCut).
bool FaultHolds(FaultKind kind);

struct FaultPlanOptions {
  uint64_t seed = 1;
  double duration_s = 120;  // faults start before this (load runs that long)
  double interval_s = 10;   // one fault every interval_s, the first at interval_s
  int num_nodes = 0;        // faults pick a node in [0, num_nodes)
  std::vector<FaultKind> kinds;
  double min_hold_s = 1;
  double max_hold_s = 5;
};

struct PlannedFault {
  int index = 0;    // 0, 1, ... in time order
  double at_s = 0;  // earliest start, seconds from the start of the load
  FaultKind kind = FaultKind::kKill;
  int node = 0;       // in [0, num_nodes)
  double hold_s = 0;  // kStop / kNetCut: how long; 0 for the others
};

// The faults at interval_s, 2 * interval_s, ... strictly before duration_s. Empty when there are
// no nodes or no kinds, or interval_s <= 0.
std::vector<PlannedFault> PlanFaults(const FaultPlanOptions& options);

}  // namespace tandem::chaos

#endif  // TANDEM_BENCH_CHAOS_FAULT_PLAN_H_
