// A ConfigEvaluator with known answers: each configuration has a rate at which its TTFT
// percentile reaches the limit and one at which its TPOT percentile does, and latencies grow in
// proportion to the rate, so the SLO holds exactly up to the lower of the two. Records every
// probe, so tests check what the search ran, not only what it returned.
#ifndef TANDEM_TESTS_TOOLS_PLAN_FAKE_EVALUATOR_H_
#define TANDEM_TESTS_TOOLS_PLAN_FAKE_EVALUATOR_H_

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tools/plan/plan_search.h"

namespace tandem::plan {

struct FakeCapacity {
  double ttft_rate = 1;  // the SLO's TTFT limit is reached at this rate
  double tpot_rate = 1;  // and the TPOT limit at this one
};

struct FakeProbe {
  PlanConfig config;
  double rate = 0;
  double share = 1;
};

class FakeEvaluator : public ConfigEvaluator {
 public:
  FakeEvaluator(SloTarget slo, std::function<FakeCapacity(const PlanConfig&)> capacity)
      : slo_(slo), capacity_(std::move(capacity)) {}

  // TP sizes the model "does not fit".
  std::set<int> unfit_tp;
  // A screen (share < 1) sees latencies times this (1: the same as the full run).
  double screen_latency_factor = 1;
  // Returned for configurations it matches instead of running them.
  std::function<absl::Status(const PlanConfig&)> refuse = [](const PlanConfig&) {
    return absl::OkStatus();
  };

  absl::Status CheckTensorParallel(int tp) override {
    if (unfit_tp.count(tp) > 0) {
      return absl::FailedPreconditionError(absl::StrCat("TP ", tp, ": the weights do not fit"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<ProbeStats> Probe(const PlanConfig& config, double rate, double share) override {
    probes.push_back({config, rate, share});
    if (absl::Status refused = refuse(config); !refused.ok()) return refused;
    const FakeCapacity cap = capacity_(config);
    const double factor = share < 1 ? screen_latency_factor : 1;
    ProbeStats p{.rate = rate, .share = share, .requests = 100};
    p.ttft_s = slo_.ttft_s * rate / cap.ttft_rate * factor;
    p.tpot_s = slo_.tpot_s * rate / cap.tpot_rate * factor;
    p.attainment = JudgeProbe(p, slo_) == SloBreach::kNone ? 1.0 : 0.5;
    return p;
  }

  std::vector<FakeProbe> probes;

 private:
  SloTarget slo_;
  std::function<FakeCapacity(const PlanConfig&)> capacity_;
};

}  // namespace tandem::plan

#endif  // TANDEM_TESTS_TOOLS_PLAN_FAKE_EVALUATOR_H_
