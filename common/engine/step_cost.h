// What a step costs on this node (StepCost, common/types/step_cost.h), learnt from the steps it
// ran. StepCostFit fits its three terms by least squares over the recent steps, each older step
// weighing `decay` times less than the next (so the price follows a node whose load changes), and
// keeps every coefficient non-negative (the best fit over the subsets of terms whose unconstrained
// coefficients are all ≥ 0: three terms, seven subsets). Not thread-safe.
//
// A step timed on the wall clock also measures the machine: a process descheduled for 20 ms in
// the middle of a 2 ms step would, in a plain least-squares fit, raise the price of every step by
// a tenth of a millisecond for the next few hundred steps, and a router would steer work away
// from a node that is not slower. With `outlier_factor` > 0, once the fit has seen kWarmupSteps
// steps, a step that took more than outlier_factor times its predicted duration counts as
// outlier_factor times the prediction (Huber's idea, one-sided: a busy machine only ever makes a
// step longer). A node that really got slower still moves the price, by up to that factor per
// step, so the fit follows it within tens of steps instead of one.
#ifndef TANDEM_COMMON_ENGINE_STEP_COST_H_
#define TANDEM_COMMON_ENGINE_STEP_COST_H_

#include <array>
#include <cstdint>

#include "common/types/step_cost.h"

namespace tandem {

class StepCostFit {
 public:
  // `decay` in (0, 1]: the weight of a step relative to the next one's.
  // The weighted number of steps after which `outlier_factor` applies.
  static constexpr double kWarmupSteps = 8;

  // `decay` in (0, 1]: the weight of a step relative to the next one's. `outlier_factor`: 0 fits
  // every step as timed (virtual time, where nothing else runs); otherwise > 1.
  explicit StepCostFit(double decay = 0.995, double outlier_factor = 0);

  void Add(int64_t new_tokens, int64_t context_tokens, double duration_us);
  // The fit over the steps so far; samples 0 before the first step.
  StepCost Estimate() const;
  void Clear();

 private:
  double decay_;
  double outlier_factor_;
  // Weighted sums: of x xᵀ (x = [1, new_tokens, context_tokens]), of x·t and of t².
  std::array<std::array<double, 3>, 3> xx_{};
  std::array<double, 3> xt_{};
  double tt_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_ENGINE_STEP_COST_H_
