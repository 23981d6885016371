// What a step costs on this node, learnt from the steps it ran: the placement cost model's
// price list (router/placement_cost.h). A step's duration is modelled as
//
//   t = per_step + per_token · new_tokens + per_context_token · context_tokens
//
// where new_tokens are the tokens the step computes (prompt chunks and one per decoding
// sequence) and context_tokens the KV each chunk attends to, summed over the chunks (a chunk
// of n tokens after c computed ones reads c + n). Decode is memory-bound (per_step: the weights;
// per_context_token: the KV), prefill compute-bound (per_token), so three terms cover both.
//
// StepCostFit fits the three by least squares over the recent steps, each older step weighing
// `decay` times less than the next (so the price follows a node whose load changes), and keeps
// every coefficient non-negative (the best fit over the subsets of terms whose unconstrained
// coefficients are all ≥ 0: three terms, seven subsets). Not thread-safe.
#ifndef TANDEM_COMMON_ENGINE_STEP_COST_H_
#define TANDEM_COMMON_ENGINE_STEP_COST_H_

#include <array>
#include <cstdint>

namespace tandem {

struct StepCost {
  double per_step_us = 0;
  double per_token_us = 0;
  double per_context_token_us = 0;
  // Steps the estimate rests on (weighted; 0: nothing known).
  double samples = 0;

  bool known() const { return samples > 0; }
  double StepUs(double new_tokens, double context_tokens) const {
    return per_step_us + per_token_us * new_tokens + per_context_token_us * context_tokens;
  }
};

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
