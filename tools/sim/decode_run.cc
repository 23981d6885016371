#include "tools/sim/decode_run.h"

#include <algorithm>
#include <cmath>

namespace tandem::sim {

int64_t StepNanos(const StepTime& time) {
  return std::max<int64_t>(1, std::llround(time.total_s() * 1e9));
}

namespace {

// Blocks the Scheduler appends to `seq` over its next `steps` decode steps (ReserveSlots: each
// step needs a slot at num_computed_tokens).
int64_t BlocksNeeded(const Sequence& seq, const BlockManager& blocks, int64_t steps) {
  const int64_t slots =
      std::max<int64_t>(seq.block_table.num_tokens, int64_t{seq.num_computed_tokens} + steps);
  return std::max<int64_t>(
      0, blocks.BlocksForTokens(slots) - static_cast<int64_t>(seq.block_table.blocks.size()));
}

int64_t BlocksNeeded(std::span<Sequence* const> running, const BlockManager& blocks,
                     int64_t steps) {
  int64_t total = 0;
  for (const Sequence* seq : running) total += BlocksNeeded(*seq, blocks, steps);
  return total;
}

}  // namespace

DecodeRunPlan PlanDecodeRun(std::span<Sequence* const> running, const BlockManager& blocks,
                            const StepTimeModel& model, int32_t max_context_tokens,
                            int32_t max_steps) {
  DecodeRunPlan plan;
  if (running.empty() || max_steps < 1) return plan;
  // Steps until the first sequence ends: after step k a sequence holds k more output tokens
  // (SimNode ends it at max_tokens or at the context limit).
  int64_t steps = max_steps;
  int64_t context_sum = 0;  // tokens before each sequence's first step of the run
  for (const Sequence* seq : running) {
    const int64_t to_length = int64_t{seq->params.max_tokens} - seq->num_output_tokens();
    const int64_t to_context = int64_t{max_context_tokens} - seq->num_tokens();
    steps = std::min(steps, std::max<int64_t>(1, std::min(to_length, to_context)));
    context_sum += seq->num_computed_tokens;
  }
  // No step may need a block the pool lacks: the blocks needed grow with the steps, so bisect
  // for the longest run whose slots fit the free blocks (appends only take free blocks: nothing
  // is freed during the run).
  const int64_t free_blocks = blocks.num_free_blocks();
  if (BlocksNeeded(running, blocks, 1) > free_blocks) return plan;
  int64_t fits = 1, too_many = steps + 1;
  while (too_many - fits > 1) {
    const int64_t mid = fits + (too_many - fits) / 2;
    (BlocksNeeded(running, blocks, mid) <= free_blocks ? fits : too_many) = mid;
  }
  steps = fits;
  // Each step k (from 0): every sequence computes one token after its context, with logits.
  const int64_t batch = static_cast<int64_t>(running.size());
  const int64_t window = model.model().sliding_window;
  plan.step_nanos.reserve(static_cast<size_t>(steps));
  for (int64_t k = 0; k < steps; ++k) {
    StepTotals totals{.tokens = batch, .logits_rows = batch};
    if (window > 0) {
      int64_t keys = 0;
      for (const Sequence* seq : running) {
        keys += std::min<int64_t>(seq->num_computed_tokens + k + 1, window);
      }
      totals.attended_keys = static_cast<double>(keys);
    } else {
      totals.attended_keys = static_cast<double>(context_sum + batch * (k + 1));
    }
    totals.kv_tokens_read = totals.attended_keys;
    plan.step_nanos.push_back(StepNanos(model.TimeFromTotals(totals)));
  }
  return plan;
}

}  // namespace tandem::sim
