// What a step costs on this node (StepCost, common/types/step_cost.h), learnt from the steps it
// ran. StepCostFit fits its three terms by least squares over the recent steps, each older step
// weighing `decay` times less than the next (so the price follows a node whose load changes), and
// keeps every coefficient non-negative (the best fit over the subsets of terms whose unconstrained
// coefficients are all ≥ 0: three terms, seven subsets). Not thread-safe.
#ifndef TANDEM_COMMON_ENGINE_STEP_COST_H_
#define TANDEM_COMMON_ENGINE_STEP_COST_H_

#include <array>
#include <cstdint>

#include "common/types/step_cost.h"

namespace tandem {

class StepCostFit {
 public:
  // `decay` in (0, 1]: the weight of a step relative to the next one's.
  explicit StepCostFit(double decay = 0.995);

  void Add(int64_t new_tokens, int64_t context_tokens, double duration_us);
  // The fit over the steps so far; samples 0 before the first step.
  StepCost Estimate() const;
  void Clear();

 private:
  double decay_;
  // Weighted sums: of x xᵀ (x = [1, new_tokens, context_tokens]), of x·t and of t².
  std::array<std::array<double, 3>, 3> xx_{};
  std::array<double, 3> xt_{};
  double tt_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_ENGINE_STEP_COST_H_
