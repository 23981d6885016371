// A run of decode steps that tandem-sim steps over in one jump (sim_node.h). When every running
// sequence of a node is decoding and nothing waits, the Scheduler's next steps are known in
// advance until something changes the batch: each step decodes one token of every running
// sequence, in the same order, until the first of them ends (its output length or the context
// limit) or the pool runs out of blocks for the slots. PlanDecodeRun finds how many steps that is
// and prices each in O(1) from the batch's sums (StepTotals), giving exactly the durations that
// pricing each step from its chunks gives. Pure: it reads the sequences and changes nothing.
#ifndef TANDEM_TOOLS_SIM_DECODE_RUN_H_
#define TANDEM_TOOLS_SIM_DECODE_RUN_H_

#include <cstdint>
#include <span>
#include <vector>

#include "common/backend/sim/step_time_model.h"
#include "common/engine/sequence.h"
#include "common/kv/block_manager.h"

namespace tandem::sim {

// The steps a batch of decodes can take before its composition changes: each step's duration in
// nanoseconds (as SimNode rounds a step: at least 1). The last step is the one after which a
// sequence ends (or the last whose slots the free blocks hold).
struct DecodeRunPlan {
  std::vector<int64_t> step_nanos;
};

// The run the Scheduler would take next over `running` (every one of them decoding: one token to
// compute), with `blocks` holding the pool, sequences ending at their max_tokens or at
// `max_context_tokens`, at most `max_steps` steps. Empty when not even one step's slots fit (the
// Scheduler will preempt) or `running` is empty.
DecodeRunPlan PlanDecodeRun(std::span<Sequence* const> running, const BlockManager& blocks,
                            const StepTimeModel& model, int32_t max_context_tokens,
                            int32_t max_steps);

// A step's duration as a node rounds it: whole nanoseconds, at least one.
int64_t StepNanos(const StepTime& time);

}  // namespace tandem::sim

#endif  // TANDEM_TOOLS_SIM_DECODE_RUN_H_
