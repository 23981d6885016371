// What a step costs on a node: the price list the placement cost model reads
// (router/placement_cost.h). A step's duration is modelled as
//
//   t = per_step + per_token · new_tokens + per_context_token · context_tokens
//
// where new_tokens are the tokens the step computes (prompt chunks and one per decoding
// sequence) and context_tokens the KV each chunk attends to, summed over the chunks (a chunk
// of n tokens after c computed ones reads c + n). Decode is memory-bound (per_step: the weights;
// per_context_token: the KV), prefill compute-bound (per_token), so three terms cover both.
// A node learns it from its own steps (common/engine/step_cost.h) and reports it in NodeLoad.
#ifndef TANDEM_COMMON_TYPES_STEP_COST_H_
#define TANDEM_COMMON_TYPES_STEP_COST_H_

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

}  // namespace tandem

#endif  // TANDEM_COMMON_TYPES_STEP_COST_H_
