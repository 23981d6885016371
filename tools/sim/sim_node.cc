#include "tools/sim/sim_node.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/sampling/sampling_params.h"

namespace tandem::sim {
namespace {

// The token a sequence appends: any deterministic id serves (nothing reads it but the prefix
// cache's hashes); the sim backend's rule keeps it an ordinary token.
int32_t NextToken(int32_t last, int64_t position) {
  const uint64_t x = (static_cast<uint64_t>(last) * 2654435761u) ^ static_cast<uint64_t>(position);
  return static_cast<int32_t>(1000 + x % 30000);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SimNode>> SimNode::Create(SimNodeConfig config, EventLoop* loop,
                                                         ManualClock* clock, SimNodeEvents events) {
  if (config.model == nullptr || loop == nullptr || clock == nullptr) {
    return absl::InvalidArgumentError("a sim node needs a step time model, a loop and a clock");
  }
  if (config.num_blocks < 1 || config.block_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("sim node ", config.name, ": ",
                                                   config.num_blocks, " KV blocks of ",
                                                   config.block_size, " tokens"));
  }
  if (absl::Status s = config.scheduler.Validate(); !s.ok()) return s;
  const int64_t pool_tokens = int64_t{config.num_blocks} * config.block_size;
  int64_t limit = pool_tokens;
  const int max_positions = config.model->model().max_position_embeddings;
  if (max_positions > 0) limit = std::min<int64_t>(limit, max_positions);
  if (config.max_context_tokens > 0) limit = std::min<int64_t>(limit, config.max_context_tokens);
  config.max_context_tokens = static_cast<int32_t>(std::min<int64_t>(limit, INT32_MAX));
  return std::unique_ptr<SimNode>(new SimNode(std::move(config), loop, clock, std::move(events)));
}

SimNode::SimNode(SimNodeConfig config, EventLoop* loop, ManualClock* clock, SimNodeEvents events)
    : config_(std::move(config)),
      loop_(loop),
      events_(std::move(events)),
      blocks_(config_.num_blocks, config_.block_size, config_.prefix_caching),
      scheduler_(config_.scheduler, &blocks_, clock) {}

void SimNode::Submit(uint64_t key, std::vector<int32_t> prompt, int32_t max_tokens) {
  SamplingParams params;
  params.max_tokens = max_tokens;
  const int32_t expected = static_cast<int32_t>(prompt.size()) + max_tokens;
  auto seq = std::make_unique<Sequence>(static_cast<RequestId>(key), std::move(prompt), params,
                                        /*seed=*/0, std::min(expected, config_.max_context_tokens));
  // A prompt the pool or the context can never hold is refused at once, as Engine::Submit does.
  if (seq->num_prompt_tokens >= config_.max_context_tokens ||
      blocks_.BlocksForTokens(seq->num_prompt_tokens) > blocks_.num_blocks()) {
    events_.on_finished(key, false);
    return;
  }
  scheduler_.Add(std::move(seq));
  // An idle node starts its step once everything that arrives at this instant is in, as the
  // engine drains its whole inbox before it schedules.
  if (!busy_ && !wake_pending_) {
    wake_pending_ = true;
    loop_->At(loop_->now(), [this] {
      wake_pending_ = false;
      MaybeStep();
    });
  }
}

SimNodeLoad SimNode::Load() const {
  return SimNodeLoad{.num_kv_blocks = blocks_.num_blocks(),
                     .num_free_kv_blocks = blocks_.num_free_blocks(),
                     .num_running = scheduler_.num_running(),
                     .num_waiting = scheduler_.num_waiting(),
                     .num_queued_tokens = scheduler_.NumQueuedPromptTokens(),
                     .block_size = blocks_.block_size()};
}

void SimNode::MaybeStep() {
  if (busy_) return;
  while (true) {
    if (!scheduler_.HasUnfinished()) return;
    scheduler_.Schedule(&step_);
    if (!step_.empty()) break;
    // A step that only preempted: schedule again with the freed blocks, as the engine's loop
    // does. One that did nothing: the queue head can never fit (Engine::Step fails it so).
    if (!step_.preempted.empty()) continue;
    const RequestId head = scheduler_.UnfinishedIds().front();
    scheduler_.Finish(head, FinishReason::kError);
    events_.on_finished(head, false);
  }
  items_.clear();
  for (const ScheduledChunk& chunk : step_.chunks) {
    items_.push_back(SimStepItem{.new_tokens = chunk.num_tokens,
                                 .context_before = chunk.start_pos,
                                 .wants_logits = chunk.want_logits});
  }
  const double seconds = config_.model->Time(items_).total_s();
  const int64_t nanos = std::max<int64_t>(1, std::llround(seconds * 1e9));
  busy_ = true;
  step_started_ = loop_->now();
  loop_->After(nanos, [this] { FinishStep(); });
}

void SimNode::FinishStep() {
  busy_ = false;
  ++num_steps_;
  busy_nanos_ += loop_->now() - step_started_;
  scheduler_.CompleteStep(step_);
  for (const ScheduledChunk& chunk : step_.chunks) {
    if (!chunk.want_logits) continue;
    Sequence* seq = chunk.seq;
    seq->tokens.push_back(NextToken(seq->tokens.back(), seq->num_tokens()));
    const uint64_t key = seq->id;
    events_.on_token(key, seq->num_output_tokens() - 1);
    if (seq->num_output_tokens() >= seq->params.max_tokens ||
        seq->num_tokens() >= config_.max_context_tokens) {
      scheduler_.Finish(seq->id, FinishReason::kLength);  // frees its blocks
      events_.on_finished(key, true);
    }
  }
  MaybeStep();
}

}  // namespace tandem::sim
