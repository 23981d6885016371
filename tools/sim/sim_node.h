// One simulated node of tandem-sim: the project's own Scheduler and BlockManager make every
// decision (continuous batching, chunked prefill, prefix cache, preemption); the sim backend's
// StepTimeModel prices each step; the EventLoop carries virtual time. Like a real node, a step
// runs to its end before the next is scheduled, and work that arrives during a step waits for it.
//
// Each step: Schedule() → price the chunks (StepTimeModel::Time over new tokens and context) →
// at its end CompleteStep(), one token for every chunk that ended at its sequence's last token
// (events), requests that reached their output length or the context limit finish (their blocks
// freed by the Scheduler), then the next step.
//
// Roles, as the real engine's (common/engine/engine.h):
//   Submit          prefill and decode here (colocated, or local prefill on a decode node);
//   SubmitPrefill   a prefill node's request: after each step the newly final blocks are handed
//                   out (on_blocks_ready, as Engine::ExportBlocks does), the prompt's last chunk
//                   samples the first token (on_prefilled) and ends it; its blocks stay held until
//                   ReleaseExport, as for a KV writer still reading them;
//   Reserve         a decode node's reservation: blocks for the prompt (reusing this node's prefix
//                   cache), FIFO, ahead of new local admissions (on_reserved); CompleteImport when
//                   the KV has landed delivers the first token and the request decodes here.
//                   Both are engine commands: one that arrives during a step is applied when the
//                   step ends (the engine drains its inbox only between steps).
//
// Runs of decode steps in one jump (decode_run.h): when every running sequence is decoding and
// nothing waits, the node plans the steps until the batch changes (a sequence ends, the free
// blocks run out) and schedules one event at the run's end instead of one per step. The steps are
// applied to the Scheduler lazily, each through the real Schedule() and CompleteStep() and with
// its own end time: at the run's end, or as soon as anything looks at or changes the node (a load
// report or prefix query applies the steps that ended by now; a command also ends the run, the
// step in progress becoming an ordinary step, as the engine would be in the middle of it). So a
// run with jumps is the same, token for token and nanosecond for nanosecond, as one without
// (SimNodeConfig::step_jumps false; tests/tools/sim/decode_run_test.cc compares them).
#ifndef TANDEM_TOOLS_SIM_SIM_NODE_H_
#define TANDEM_TOOLS_SIM_SIM_NODE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/backend/sim/step_time_model.h"
#include "common/engine/scheduler.h"
#include "common/engine/step_cost.h"
#include "common/kv/block_manager.h"
#include "common/util/clock.h"
#include "tools/sim/event_loop.h"
#include "tools/sim/prompt_block_names.h"

namespace tandem::sim {

struct SimNodeConfig {
  std::string name;
  const StepTimeModel* model = nullptr;  // borrowed
  int32_t block_size = 16;
  int32_t num_blocks = 0;  // > 0
  SchedulerOptions scheduler;
  bool prefix_caching = true;
  // Longest sequence: min(the model's max_position_embeddings, the pool) unless smaller here.
  int32_t max_context_tokens = 0;
  // Step over runs of decode steps in one jump (above); false: one event per step.
  bool step_jumps = true;
  // Speculative decoding with drafts of known quality, as a sim cluster's --speculative sim:
  // before each step every decoding sequence gets up to this many drafts, each right with
  // probability spec_acceptance_rate (SimBackend::DraftIsRight), computed in the step with a
  // logits row each (priced so) and verified at its end as the engine does (the right ones up to
  // the first wrong one stand, and the step's own token follows). 0: off. Runs of decode steps
  // are not jumped over while it is on (each step's yield is only known at its end).
  int32_t num_speculative_tokens = 0;
  double spec_acceptance_rate = 0.7;
  // Borrowed; set: the drafts come from a draft model whose passes this prices (null: drafts are
  // free, as prompt lookup's nearly are). As the engine's DraftModel runs them: before the step,
  // one catch-up pass over each speculating sequence's context that the draft's KV lacks (all of
  // it the first time), then one pass of one token per sequence for each further draft position;
  // the draft's KV then holds the context up to the last draft it was fed, cut back to what was
  // accepted. The step takes the target's time plus these passes'.
  const StepTimeModel* draft_model = nullptr;
};

// What a node reports (GetLoad's fields the router's placement reads).
struct SimNodeLoad {
  int32_t num_kv_blocks = 0;
  int32_t num_free_kv_blocks = 0;
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int64_t num_queued_tokens = 0;
  int32_t block_size = 0;
  int32_t num_awaiting_kv = 0;  // decode role: reservations waiting for blocks or for their KV
  // KV tokens of the running sequences and of the reservations (what decode steps read, now and
  // once the reserved prompts arrive), and the node's price of a
  // step learnt from its own steps (StepCostFit, as the engine reports it).
  int64_t num_context_tokens = 0;
  StepCost step_cost;
  int32_t max_batched_tokens = 0;
  int32_t max_num_seqs = 0;
  int64_t published_at = 0;  // loop nanoseconds: it counts the requests that arrived by then
};

struct SimNodeEvents {
  // A token of request `key` left the node at `at` (nanoseconds on the loop's clock: the end of
  // its step, which a jump reports when it applies the step); `index` counts from 0.
  std::function<void(uint64_t key, int32_t index, int64_t at)> on_token;
  // Request `key` ended: all its tokens out (ok), or it can never run (the pool is too small).
  std::function<void(uint64_t key, bool ok)> on_finished;
  // Prefill role: blocks [first, first + count) of the prompt hold final KV.
  std::function<void(uint64_t key, int32_t first, int32_t count)> on_blocks_ready;
  // Prefill role: the prompt is computed and its first token sampled.
  std::function<void(uint64_t key)> on_prefilled;
  // Decode role: the reservation got its blocks; the first `cached_tokens` of the prompt were in
  // this node's prefix cache (the writer skips them).
  std::function<void(uint64_t key, int32_t cached_tokens)> on_reserved;
};

class SimNode {
 public:
  // `loop` and `clock` (the loop's) are borrowed. InvalidArgument for a bad config.
  static absl::StatusOr<std::unique_ptr<SimNode>> Create(SimNodeConfig config, EventLoop* loop,
                                                         ManualClock* clock, SimNodeEvents events);

  // A request to prefill and decode here: `max_tokens` output tokens (its whole length, as with
  // ignore_eos). `key` must be unused on this node.
  void Submit(uint64_t key, std::vector<int32_t> prompt, int32_t max_tokens);

  // Prefill role (see above). `key` must be unused on this node.
  void SubmitPrefill(uint64_t key, std::vector<int32_t> prompt);
  void ReleaseExport(uint64_t key);
  // Decode role (see above).
  void Reserve(uint64_t key, std::vector<int32_t> prompt, int32_t max_tokens);
  void CompleteImport(uint64_t key);
  // The router's Cancel: whatever the node holds of `key` (queued, running, reserved, awaiting
  // its KV, held for export) ends and its blocks are freed; applied between steps, as the
  // engine's inbox is. Unknown keys are ignored.
  void Cancel(uint64_t key);
  // The process dies: the node stops at once, emits nothing more and must not be called again
  // (the cluster keeps the object until the end: events already scheduled find it dead).
  void Kill();
  bool dead() const { return dead_; }

  // What the node reports to a load poll: its state as the engine last published it (after its
  // last step ended or its inbox was drained), not the running step's admissions.
  SimNodeLoad Load() {
    CatchUp();
    SimNodeLoad load = published_;
    load.step_cost = published_step_fit_.Estimate();
    return load;
  }
  // Leading tokens of `prompt` this node's prefix cache holds (what the router learns of a
  // node's cache from its KV events), naming the prompt's blocks in `names` only as far as this
  // node's hits need (every node of a pool asks with the same `names`).
  int32_t CachedPrefixTokens(std::span<const int32_t> prompt, PromptBlockNames* names) {
    CatchUp();
    while (true) {
      const int32_t cached = blocks_.CachedPrefixTokens(prompt, names->names());
      if (static_cast<size_t>(cached / blocks_.block_size()) < names->names().size() ||
          names->complete()) {
        return cached;
      }
      names->Extend();
    }
  }
  const std::string& name() const { return config_.name; }
  int64_t num_steps() const { return num_steps_; }
  int64_t num_preemptions() const { return scheduler_.num_preemptions(); }
  // Virtual time this node spent computing steps.
  int64_t busy_nanos() const { return busy_nanos_; }
  // Runs of decode steps stepped over, and the steps they held.
  int64_t num_decode_runs() const { return num_decode_runs_; }
  int64_t num_jumped_steps() const { return num_jumped_steps_; }
  // Speculative decoding: sequences' steps that verified drafts, the drafts, the accepted ones.
  int64_t num_spec_verifications() const { return num_spec_verifications_; }
  int64_t num_spec_draft_tokens() const { return num_spec_draft_tokens_; }
  int64_t num_spec_accepted_tokens() const { return num_spec_accepted_tokens_; }
  // Draft model: its passes, and the virtual time they took (inside busy_nanos).
  int64_t num_draft_passes() const { return num_draft_passes_; }
  int64_t draft_nanos() const { return draft_nanos_; }

 private:
  SimNode(SimNodeConfig config, EventLoop* loop, ManualClock* clock, SimNodeEvents events);
  std::unique_ptr<Sequence> MakeSequence(uint64_t key, std::vector<int32_t> prompt,
                                         int32_t max_tokens) const;
  // Whether the node can ever hold `seq`'s prompt.
  bool Fits(const Sequence& seq) const;
  void WakeSoon();
  void MaybeStep();
  void FinishStep();
  // Speculative decoding: drafts onto the decoding sequences before Schedule(); at the step's
  // end, before CompleteStep(), the rejected ones out of the sequences and the chunks, the
  // accepted counts kept in accepted_ (per chunk).
  void ProposeDrafts();
  void VerifyDrafts();
  // The draft model's passes for this step's verifications (0 without a draft model).
  int64_t DraftPassNanos();
  // Prefill role: hands newly final blocks out; the prompt done: all of them.
  void ExportBlocks(Sequence* seq, bool prompt_done);
  void AdmitReservations();
  // Decode role: the KV of `key` has landed: its first token goes out, it decodes from now on.
  void Import(uint64_t key);
  void ApplyCancel(uint64_t key);
  SimNodeLoad LiveLoad() const;
  // Publishes LiveLoad() and the step fit as they are now, as of `at` (loop nanoseconds).
  void Publish(int64_t at);
  // Feeds step_ (before CompleteStep), which took `nanos`, to the step fit.
  void NoteStepCost(int64_t nanos);
  // Starts a run of decode steps if the state allows one of at least two steps.
  bool TryStartDecodeRun();
  // Applies the run's steps that ended by now (not its last). Returns how many.
  int32_t ApplyRunSteps();
  // Before a query: the run's steps that ended by now applied, the published load theirs.
  void CatchUp();
  // Before a command: as CatchUp, then the run ends, its step in progress an ordinary step.
  void EndRunForCommand();
  // The run's last step ended.
  void FinishDecodeRun(uint64_t generation);
  // Schedule() of one step of the run: checks it is the planned batch.
  void ScheduleRunStep();

  const SimNodeConfig config_;
  EventLoop* const loop_;
  SimNodeEvents events_;
  BlockManager blocks_;
  Scheduler scheduler_;
  SchedulerOutput step_;
  std::vector<SimStepItem> items_;
  // Prefill role: requests that are prefill-only, with how many blocks they handed out; blocks
  // of ended ones still held for their export.
  absl::flat_hash_map<uint64_t, int32_t> exporting_;
  absl::flat_hash_map<uint64_t, BlockTable> export_held_;
  // Decode role: reservations waiting for blocks (FIFO), and those awaiting their KV.
  std::deque<std::unique_ptr<Sequence>> pending_reservations_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Sequence>> awaiting_kv_;
  // Tokens of the sequences in those two (a long queue's sum, kept as they come and go).
  int64_t reserved_context_tokens_ = 0;
  // Completions that arrived during the running step, applied when it ends.
  std::vector<uint64_t> imports_after_step_;
  std::vector<uint64_t> cancels_after_step_;
  SimNodeLoad published_;  // declared after blocks_ and scheduler_: built from them
  StepCostFit step_fit_;
  StepCostFit published_step_fit_;
  bool busy_ = false;
  bool dead_ = false;
  bool wake_pending_ = false;  // an idle node's MaybeStep is queued for this instant
  int64_t step_started_ = 0;
  int64_t num_steps_ = 0;
  int64_t busy_nanos_ = 0;
  // The run of decode steps in progress (busy_ is true through it): step k ends at
  // run_ends_[k]; steps [0, run_applied_) are applied; the run's own event carries
  // run_generation_ (a command that ends the run early makes it stale).
  bool in_run_ = false;
  std::vector<int64_t> run_ends_;
  int32_t run_applied_ = 0;
  int32_t run_batch_ = 0;
  uint64_t run_generation_ = 0;
  int64_t num_decode_runs_ = 0;
  int64_t num_jumped_steps_ = 0;
  std::vector<int32_t> accepted_;  // this step's, per chunk (-1: not a verification)
  int64_t num_spec_verifications_ = 0;
  int64_t num_spec_draft_tokens_ = 0;
  int64_t num_spec_accepted_tokens_ = 0;
  // Draft model: context tokens its KV holds, per speculating sequence (erased when it ends).
  absl::flat_hash_map<uint64_t, int64_t> draft_stored_;
  std::vector<SimStepItem> draft_items_;
  int64_t num_draft_passes_ = 0;
  int64_t draft_nanos_ = 0;
};

}  // namespace tandem::sim

#endif  // TANDEM_TOOLS_SIM_SIM_NODE_H_
