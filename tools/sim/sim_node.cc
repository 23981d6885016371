#include "tools/sim/sim_node.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/backend/sim/sim_backend.h"
#include "common/engine/speculative.h"
#include "common/sampling/sampling_params.h"
#include "tools/sim/decode_run.h"

namespace tandem::sim {
namespace {

// The token a sequence appends: any deterministic id serves (nothing reads it but the prefix
// cache's hashes); the sim backend's rule keeps it an ordinary token.
int32_t NextToken(int32_t last, int64_t position) {
  const uint64_t x = (static_cast<uint64_t>(last) * 2654435761u) ^ static_cast<uint64_t>(position);
  return static_cast<int32_t>(1000 + x % 30000);
}

// The longest run of decode steps planned at once (a run ends earlier when the batch changes).
constexpr int32_t kMaxRunSteps = 1 << 16;

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
  if (config.num_speculative_tokens < 0 || config.num_speculative_tokens > kMaxSpeculativeTokens ||
      !(config.spec_acceptance_rate >= 0 && config.spec_acceptance_rate <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sim node ", config.name, ": ", config.num_speculative_tokens, " speculative tokens (0 to ",
        kMaxSpeculativeTokens, "), acceptance rate ", config.spec_acceptance_rate, " (0 to 1)"));
  }
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
      scheduler_(config_.scheduler, &blocks_, clock),
      published_(LiveLoad()) {}

std::unique_ptr<Sequence> SimNode::MakeSequence(uint64_t key, std::vector<int32_t> prompt,
                                                int32_t max_tokens) const {
  SamplingParams params;
  params.max_tokens = max_tokens;
  const int32_t expected = static_cast<int32_t>(prompt.size()) + max_tokens;
  return std::make_unique<Sequence>(static_cast<RequestId>(key), std::move(prompt), params,
                                    /*seed=*/0, std::min(expected, config_.max_context_tokens));
}

bool SimNode::Fits(const Sequence& seq) const {
  // A prompt the pool or the context can never hold is refused at once, as Engine::Submit does.
  return seq.num_prompt_tokens < config_.max_context_tokens &&
         blocks_.BlocksForTokens(seq.num_prompt_tokens) <= blocks_.num_blocks();
}

void SimNode::WakeSoon() {
  // An idle node starts its step once everything that arrives at this instant is in, as the
  // engine drains its whole inbox as it wakes: two reservations admitted at one decode step's end
  // reach the prefill node through the router a few microseconds apart, and the real prefill
  // node took both into one step in 12 of 16 such pairs in instrumented runs (the others
  // arrived after it woke: tools/sim/README.md, "Validation").
  if (busy_ || wake_pending_) return;
  wake_pending_ = true;
  loop_->At(
      loop_->now(),
      [this] {
        wake_pending_ = false;
        if (dead_ || busy_) return;  // a step started meanwhile, after draining everything
        AdmitReservations();
        Publish(loop_->now());  // the engine publishes after draining its inbox, before Schedule
        MaybeStep();
      });
}

void SimNode::Submit(uint64_t key, std::vector<int32_t> prompt, int32_t max_tokens) {
  EndRunForCommand();
  std::unique_ptr<Sequence> seq = MakeSequence(key, std::move(prompt), max_tokens);
  if (!Fits(*seq)) {
    events_.on_finished(key, false);
    return;
  }
  scheduler_.Add(std::move(seq));
  WakeSoon();
}

void SimNode::SubmitPrefill(uint64_t key, std::vector<int32_t> prompt) {
  EndRunForCommand();
  std::unique_ptr<Sequence> seq = MakeSequence(key, std::move(prompt), 1);
  if (!Fits(*seq)) {
    events_.on_finished(key, false);
    return;
  }
  exporting_[key] = 0;
  scheduler_.Add(std::move(seq));
  WakeSoon();
}

void SimNode::ReleaseExport(uint64_t key) {
  EndRunForCommand();
  auto it = export_held_.find(key);
  if (it == export_held_.end()) return;
  blocks_.Free(&it->second);
  export_held_.erase(it);
  WakeSoon();  // freed blocks may admit a waiting prompt
}

void SimNode::Reserve(uint64_t key, std::vector<int32_t> prompt, int32_t max_tokens) {
  EndRunForCommand();
  std::unique_ptr<Sequence> seq = MakeSequence(key, std::move(prompt), max_tokens);
  if (!Fits(*seq)) {
    events_.on_finished(key, false);
    return;
  }
  reserved_context_tokens_ += seq->num_tokens();
  pending_reservations_.push_back(std::move(seq));
  // During a step it waits for the step's end (FinishStep admits it): the engine applies its
  // inbox, Reserve included, only between steps.
  if (busy_) return;
  AdmitReservations();
  Publish(loop_->now());
}

void SimNode::AdmitReservations() {
  while (!pending_reservations_.empty()) {
    Sequence* seq = pending_reservations_.front().get();
    std::optional<int32_t> cached = blocks_.Allocate(seq->tokens, &seq->block_table);
    if (!cached.has_value()) return;  // FIFO: the head waits for blocks
    std::unique_ptr<Sequence> taken = std::move(pending_reservations_.front());
    pending_reservations_.pop_front();
    taken->num_computed_tokens = *cached;
    taken->num_cached_tokens = *cached;
    taken->status = SequenceStatus::kAwaitingKv;
    const uint64_t key = taken->id;
    awaiting_kv_.emplace(key, std::move(taken));
    events_.on_reserved(key, *cached);
  }
}

void SimNode::CompleteImport(uint64_t key) {
  EndRunForCommand();
  // During a step the completion waits for the step's end, as the engine's Import command does.
  if (busy_) {
    imports_after_step_.push_back(key);
    return;
  }
  Import(key);
}

void SimNode::Import(uint64_t key) {
  auto node = awaiting_kv_.extract(key);
  if (node.empty()) return;
  std::unique_ptr<Sequence> seq = std::move(node.mapped());
  reserved_context_tokens_ -= seq->num_tokens();
  seq->num_computed_tokens = seq->num_prompt_tokens;
  blocks_.CacheComputedBlocks(seq->tokens, seq->num_computed_tokens, &seq->block_table);
  // The first token, sampled by the prefill node, goes out now (Engine's Import).
  seq->tokens.push_back(NextToken(seq->tokens.back(), seq->num_tokens()));
  events_.on_token(key, 0, loop_->now());
  if (seq->params.max_tokens <= 1) {
    blocks_.Free(&seq->block_table);
    events_.on_finished(key, true);
    AdmitReservations();
    if (scheduler_.HasUnfinished()) WakeSoon();  // a queue head may wait for those blocks
    return;
  }
  scheduler_.AddPrefilled(std::move(seq));
  WakeSoon();
}

void SimNode::Cancel(uint64_t key) {
  EndRunForCommand();
  if (busy_) {
    cancels_after_step_.push_back(key);
    return;
  }
  ApplyCancel(key);
  Publish(loop_->now());
  WakeSoon();  // freed blocks may admit what waits
}

void SimNode::ApplyCancel(uint64_t key) {
  if (scheduler_.Find(static_cast<RequestId>(key)) != nullptr) {
    scheduler_.Finish(static_cast<RequestId>(key), FinishReason::kAborted);
  }
  draft_stored_.erase(key);
  exporting_.erase(key);
  if (auto held = export_held_.find(key); held != export_held_.end()) {
    blocks_.Free(&held->second);
    export_held_.erase(held);
  }
  if (auto awaiting = awaiting_kv_.find(key); awaiting != awaiting_kv_.end()) {
    blocks_.Free(&awaiting->second->block_table);
    reserved_context_tokens_ -= awaiting->second->num_tokens();
    awaiting_kv_.erase(awaiting);
  }
  std::erase_if(pending_reservations_, [this, key](const std::unique_ptr<Sequence>& seq) {
    if (static_cast<uint64_t>(seq->id) != key) return false;
    reserved_context_tokens_ -= seq->num_tokens();
    return true;
  });
  std::erase(imports_after_step_, key);
  AdmitReservations();
}

void SimNode::Kill() {
  CatchUp();  // the steps of a run that ended before the death did happen
  dead_ = true;
  in_run_ = false;
  ++run_generation_;
}

void SimNode::ExportBlocks(Sequence* seq, bool prompt_done) {
  int32_t& exported = exporting_[seq->id];
  const int32_t total = static_cast<int32_t>(seq->block_table.blocks.size());
  int32_t ready = std::min(seq->num_computed_tokens / blocks_.block_size(), total);
  if (prompt_done) ready = std::min(blocks_.BlocksForTokens(seq->num_prompt_tokens), total);
  if (ready <= exported) return;
  const int32_t first = exported;
  exported = ready;
  events_.on_blocks_ready(seq->id, first, ready - first);
}

void SimNode::Publish(int64_t at) {
  published_ = LiveLoad();
  published_.published_at = at;
  published_step_fit_ = step_fit_;
}

void SimNode::NoteStepCost(int64_t nanos) {
  int64_t tokens = 0;
  int64_t context = 0;
  for (const ScheduledChunk& chunk : step_.chunks) {
    tokens += chunk.num_tokens;
    context += chunk.start_pos + chunk.num_tokens;
  }
  step_fit_.Add(tokens, context, static_cast<double>(nanos) / 1000);
}

SimNodeLoad SimNode::LiveLoad() const {
  int64_t context = 0;
  for (const Sequence* seq : scheduler_.running()) context += seq->num_tokens();
  // Reservations hold (or wait for) the blocks of prompts that decode here next.
  context += reserved_context_tokens_;
  return SimNodeLoad{
      .num_kv_blocks = blocks_.num_blocks(),
      .num_free_kv_blocks = blocks_.num_free_blocks(),
      .num_running = scheduler_.num_running(),
      .num_waiting = scheduler_.num_waiting(),
      .num_queued_tokens = scheduler_.NumQueuedPromptTokens(),
      .block_size = blocks_.block_size(),
      .num_awaiting_kv = static_cast<int32_t>(awaiting_kv_.size() + pending_reservations_.size()),
      .num_context_tokens = context,
      .max_batched_tokens = config_.scheduler.max_num_batched_tokens,
      .max_num_seqs = config_.scheduler.max_num_seqs};
}

void SimNode::ProposeDrafts() {
  for (Sequence* seq : scheduler_.running()) {
    if (seq->num_uncomputed_tokens() != 1 || seq->num_draft_tokens != 0 ||
        exporting_.contains(seq->id)) {
      continue;
    }
    const int32_t room = std::min({config_.num_speculative_tokens,
                                   seq->params.max_tokens - seq->num_output_tokens() - 1,
                                   config_.max_context_tokens - seq->num_tokens() - 1});
    for (int32_t i = 0; i < room; ++i) {
      const int32_t last = seq->tokens.back();
      const int64_t position = seq->num_tokens();
      const int32_t right = NextToken(last, position);
      seq->tokens.push_back(SimBackend::DraftIsRight(last, position, config_.spec_acceptance_rate)
                                ? right
                                : right + 1);
      ++seq->num_draft_tokens;
    }
  }
}

void SimNode::VerifyDrafts() {
  accepted_.assign(step_.chunks.size(), -1);
  for (size_t c = 0; c < step_.chunks.size(); ++c) {
    ScheduledChunk& chunk = step_.chunks[c];
    if (!chunk.want_logits || chunk.num_logits <= 1) continue;
    Sequence* seq = chunk.seq;
    const int32_t drafts = chunk.num_logits - 1;
    const int32_t first = seq->num_tokens() - drafts;
    int32_t accepted = 0;
    while (accepted < drafts &&
           seq->tokens[first + accepted] ==
               NextToken(seq->tokens[first + accepted - 1], first + accepted)) {
      ++accepted;
    }
    ++num_spec_verifications_;
    num_spec_draft_tokens_ += drafts;
    num_spec_accepted_tokens_ += accepted;
    seq->tokens.resize(first + accepted);
    seq->num_draft_tokens = 0;
    if (config_.draft_model != nullptr) {
      // The draft was fed the context and drafts 1 .. drafts - 1: what stands of that.
      draft_stored_[seq->id] = first + std::min(accepted, drafts - 1);
    }
    chunk.num_tokens -= drafts - accepted;
    accepted_[c] = accepted;
  }
}

int64_t SimNode::DraftPassNanos() {
  if (config_.draft_model == nullptr) return 0;
  // Pass 0 catches each speculating sequence up to its last real token (and drafts 1); pass j
  // feeds draft j (and drafts j + 1).
  int32_t most_drafts = 0;
  for (const ScheduledChunk& chunk : step_.chunks) {
    if (chunk.want_logits && chunk.num_logits > 1) {
      most_drafts = std::max(most_drafts, chunk.num_logits - 1);
    }
  }
  int64_t nanos = 0;
  for (int32_t pass = 0; pass < most_drafts; ++pass) {
    draft_items_.clear();
    for (const ScheduledChunk& chunk : step_.chunks) {
      const int32_t drafts = chunk.want_logits ? chunk.num_logits - 1 : 0;
      if (drafts <= pass) continue;
      const int64_t context = chunk.seq->num_tokens() - drafts;  // the real tokens
      if (pass == 0) {
        auto stored = draft_stored_.find(chunk.seq->id);
        const int64_t have =
            stored == draft_stored_.end() ? 0 : std::min<int64_t>(stored->second, context - 1);
        draft_items_.push_back(SimStepItem{
            .new_tokens = context - have, .context_before = have, .wants_logits = true});
      } else {
        draft_items_.push_back(SimStepItem{
            .new_tokens = 1, .context_before = context + pass - 1, .wants_logits = true});
      }
    }
    nanos += StepNanos(config_.draft_model->Time(draft_items_));
    ++num_draft_passes_;
  }
  draft_nanos_ += nanos;
  return nanos;
}

void SimNode::MaybeStep() {
  if (busy_) return;
  const bool speculates = config_.num_speculative_tokens > 0;
  if (config_.step_jumps && !speculates && TryStartDecodeRun()) return;
  if (speculates) ProposeDrafts();
  while (true) {
    if (!scheduler_.HasUnfinished()) return;
    scheduler_.Schedule(&step_);
    if (!step_.empty()) break;
    // A step that only preempted: schedule again with the freed blocks, as the engine's loop
    // does. One that did nothing waits for the blocks that reservations awaiting KV and held
    // exports give back (their completion, cancel or release wakes the node), unless this node
    // also queues prompts it prefills for others (a circle of waits could close); else, or with
    // none held, it fails the queue head. Engine::QueueHeadMayWaitForHeldBlocks.
    if (!step_.preempted.empty()) continue;
    const bool may_close_a_circle = !awaiting_kv_.empty() && !exporting_.empty();
    if (!may_close_a_circle && (!awaiting_kv_.empty() || !export_held_.empty())) return;
    const RequestId head = scheduler_.UnfinishedIds().front();
    scheduler_.Finish(head, FinishReason::kError);
    events_.on_finished(head, false);
  }
  items_.clear();
  for (const ScheduledChunk& chunk : step_.chunks) {
    items_.push_back(SimStepItem{.new_tokens = chunk.num_tokens,
                                 .context_before = chunk.start_pos,
                                 .wants_logits = chunk.want_logits,
                                 .num_logits = chunk.num_logits});
  }
  const int64_t nanos = StepNanos(config_.model->Time(items_)) + DraftPassNanos();
  busy_ = true;
  step_started_ = loop_->now();
  loop_->After(
      nanos, [this] { FinishStep(); }, EventLoop::Order::kStepEnd);
}

void SimNode::FinishStep() {
  if (dead_) return;
  busy_ = false;
  ++num_steps_;
  busy_nanos_ += loop_->now() - step_started_;
  NoteStepCost(loop_->now() - step_started_);
  VerifyDrafts();
  scheduler_.CompleteStep(step_);
  for (size_t c = 0; c < step_.chunks.size(); ++c) {
    const ScheduledChunk& chunk = step_.chunks[c];
    Sequence* seq = chunk.seq;
    if (exporting_.contains(seq->id)) {
      // Prefill-only: hand out the final blocks; the last chunk ends it, its blocks held.
      ExportBlocks(seq, chunk.want_logits);
      if (!chunk.want_logits) continue;
      const uint64_t key = seq->id;
      std::unique_ptr<Sequence> done = scheduler_.Finish(key, FinishReason::kPrefillDone,
                                                         /*keep_blocks=*/true);
      exporting_.erase(key);
      if (!done->block_table.empty()) export_held_[key] = std::move(done->block_table);
      events_.on_prefilled(key);
      continue;
    }
    if (!chunk.want_logits) continue;
    const uint64_t key = seq->id;
    // Accepted drafts (already in the sequence) go out first, then the step's own token.
    for (int32_t i = accepted_[c]; i > 0; --i) {
      events_.on_token(key, seq->num_output_tokens() - i, loop_->now());
    }
    seq->tokens.push_back(NextToken(seq->tokens.back(), seq->num_tokens()));
    events_.on_token(key, seq->num_output_tokens() - 1, loop_->now());
    if (seq->num_output_tokens() >= seq->params.max_tokens ||
        seq->num_tokens() >= config_.max_context_tokens) {
      scheduler_.Finish(seq->id, FinishReason::kLength);  // frees its blocks
      draft_stored_.erase(key);
      events_.on_finished(key, true);
    }
  }
  // The completions that arrived during the step, in arrival order (the engine drains its inbox
  // before it looks at reservations and schedules).
  std::vector<uint64_t> imports;
  imports.swap(imports_after_step_);
  for (uint64_t key : imports) Import(key);
  std::vector<uint64_t> cancels;
  cancels.swap(cancels_after_step_);
  for (uint64_t key : cancels) ApplyCancel(key);
  AdmitReservations();  // blocks freed by this step go to waiting reservations first
  // What the node reports until its next step ends: the engine publishes its stats after a step
  // and after draining its inbox, never during a step (the next step's admissions show only when
  // it ends).
  Publish(loop_->now());
  MaybeStep();
}

bool SimNode::TryStartDecodeRun() {
  // Only decodes, nothing waiting to join the batch: the Scheduler's next steps are the plan's.
  if (scheduler_.num_waiting() > 0 || !pending_reservations_.empty() ||
      !imports_after_step_.empty()) {
    return false;
  }
  const std::vector<Sequence*>& running = scheduler_.running();
  for (const Sequence* seq : running) {
    if (seq->num_uncomputed_tokens() != 1 || exporting_.contains(seq->id)) return false;
  }
  const DecodeRunPlan plan =
      PlanDecodeRun(running, blocks_, *config_.model, config_.max_context_tokens, kMaxRunSteps);
  if (plan.step_nanos.size() < 2) return false;
  run_ends_.clear();
  int64_t end = loop_->now();
  for (int64_t nanos : plan.step_nanos) run_ends_.push_back(end += nanos);
  in_run_ = true;
  busy_ = true;
  run_applied_ = 0;
  run_batch_ = static_cast<int32_t>(running.size());
  step_started_ = loop_->now();
  ++num_decode_runs_;
  const uint64_t generation = ++run_generation_;
  loop_->At(
      run_ends_.back(), [this, generation] { FinishDecodeRun(generation); },
      EventLoop::Order::kStepEnd);
  return true;
}

void SimNode::ScheduleRunStep() {
  scheduler_.Schedule(&step_);
  if (static_cast<int32_t>(step_.chunks.size()) != run_batch_ || step_.num_decodes != run_batch_ ||
      !step_.preempted.empty()) {
    std::fprintf(stderr,
                 "tandem-sim: node %s: a planned decode step of %d sequences was scheduled as %zu "
                 "chunks (%d decodes, %zu preempted)\n",
                 config_.name.c_str(), run_batch_, step_.chunks.size(), step_.num_decodes,
                 step_.preempted.size());
    std::abort();
  }
}

int32_t SimNode::ApplyRunSteps() {
  int32_t applied = 0;
  const int64_t now = loop_->now();
  // The last step is applied by FinishDecodeRun or EndRunForCommand, never here.
  while (run_applied_ + 1 < static_cast<int32_t>(run_ends_.size()) &&
         run_ends_[run_applied_] <= now) {
    const int64_t end = run_ends_[run_applied_];
    ScheduleRunStep();
    NoteStepCost(end - step_started_);
    scheduler_.CompleteStep(step_);
    for (const ScheduledChunk& chunk : step_.chunks) {
      Sequence* seq = chunk.seq;
      seq->tokens.push_back(NextToken(seq->tokens.back(), seq->num_tokens()));
      events_.on_token(seq->id, seq->num_output_tokens() - 1, end);
    }
    ++num_steps_;
    ++num_jumped_steps_;
    busy_nanos_ += end - step_started_;
    step_started_ = end;
    ++run_applied_;
    ++applied;
  }
  return applied;
}

void SimNode::CatchUp() {
  if (!in_run_) return;
  // What the node published after the last of these steps (FinishStep publishes after each).
  // ... at the end of the last of them, as a step-by-step run would have.
  if (ApplyRunSteps() > 0) Publish(run_ends_[run_applied_ - 1]);
}

void SimNode::EndRunForCommand() {
  if (!in_run_) return;
  CatchUp();
  // The step in progress was scheduled when it began; it ends as an ordinary step, and the
  // command waits for it as it would for any step.
  in_run_ = false;
  ++run_generation_;
  ScheduleRunStep();
  loop_->At(
      run_ends_[run_applied_], [this] { FinishStep(); }, EventLoop::Order::kStepEnd);
}

void SimNode::FinishDecodeRun(uint64_t generation) {
  if (!in_run_ || generation != run_generation_) return;  // ended early by a command
  ApplyRunSteps();
  in_run_ = false;
  ++num_jumped_steps_;
  ScheduleRunStep();
  FinishStep();
}

}  // namespace tandem::sim
