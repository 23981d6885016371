#include "bench/chaos/fault_plan.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_split.h"

namespace tandem::chaos {
namespace {

// splitmix64: a small, portable generator (std's distributions differ between libraries).
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n).
  int Below(int n) { return static_cast<int>(Next() % static_cast<uint64_t>(n)); }
  // Uniform in [0, 1).
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

}  // namespace

const char* FaultKindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kKill:
      return "kill";
    case FaultKind::kStop:
      return "stop";
    case FaultKind::kTerm:
      return "term";
    case FaultKind::kNetCut:
      return "netcut";
  }
  return "?";
}

std::optional<FaultKind> ParseFaultKind(std::string_view name) {
  for (FaultKind kind :
       {FaultKind::kKill, FaultKind::kStop, FaultKind::kTerm, FaultKind::kNetCut}) {
    if (name == FaultKindName(kind)) return kind;
  }
  return std::nullopt;
}

std::optional<std::vector<FaultKind>> ParseFaultKinds(std::string_view list) {
  std::vector<FaultKind> kinds;
  for (absl::string_view part :
       absl::StrSplit(absl::string_view(list.data(), list.size()), ',', absl::SkipWhitespace())) {
    std::optional<FaultKind> kind = ParseFaultKind(std::string_view(part.data(), part.size()));
    if (!kind.has_value()) return std::nullopt;
    if (std::find(kinds.begin(), kinds.end(), *kind) == kinds.end()) kinds.push_back(*kind);
  }
  if (kinds.empty()) return std::nullopt;
  return kinds;
}

bool FaultHolds(FaultKind kind) { return kind == FaultKind::kStop || kind == FaultKind::kNetCut; }

std::vector<PlannedFault> PlanFaults(const FaultPlanOptions& options) {
  std::vector<PlannedFault> plan;
  if (options.num_nodes < 1 || options.kinds.empty() || !(options.interval_s > 0)) return plan;
  SplitMix random(options.seed);
  const double min_hold = std::max(0.0, options.min_hold_s);
  const double max_hold = std::max(min_hold, options.max_hold_s);
  for (int i = 0;; ++i) {
    const double at = options.interval_s * (i + 1);
    if (!(at < options.duration_s)) break;
    PlannedFault fault;
    fault.index = i;
    fault.at_s = at;
    fault.kind = options.kinds[random.Below(static_cast<int>(options.kinds.size()))];
    fault.node = random.Below(options.num_nodes);
    // Drawn for every fault, so a kind's hold does not shift the later faults' draws.
    const double hold = min_hold + (max_hold - min_hold) * random.Unit();
    fault.hold_s = FaultHolds(fault.kind) ? std::round(hold * 1000) / 1000 : 0;
    plan.push_back(fault);
  }
  return plan;
}

}  // namespace tandem::chaos
