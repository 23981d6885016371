// One node's generation loop: requests in, tokens out, one engine thread driving a Backend.
//
// Thread model (llama.cpp server's queue pattern): the thread-safe calls (Submit, Cancel, Reserve,
// CompleteImport, AbortImport, ReleaseExportedBlocks) validate and post one command each to the
// inbox (engine_commands.h), nothing more. One engine thread (Start()/Stop(), or the caller of
// RunUntilIdle()) applies the commands in arrival order and runs steps (engine.cc, Step):
//   build the batch (Scheduler -> ForwardBatch) -> run the backend -> consume the samples
//   (Sampler -> EmitToken: append, deliver, check stop).
// Stop conditions, checked after each token in vLLM's order: max_tokens or the context limit
// (min(max_position_embeddings, KV pool capacity) tokens) -> "length"; then the model's EOS ids
// (config.eos_token_ids, unless ignore_eos) or stop_token_ids -> "stop".
//
// A request's states. Only the engine thread moves a request; tokens go out only through
// EmitToken, and a request ends only in EndRequest (engine_lifecycle.cc), which counts it, sends
// its final event and frees, quarantines or holds its blocks.
//
//   state        | lives in                    | moved on by                           | blocks
//   -------------+-----------------------------+---------------------------------------+---------
//   posted       | inbox_ (Submit, Reserve)    | DrainInbox: to waiting or reserving;  | none
//                |                             | a resumed request its resumed tokens  |
//                |                             | already stop: ended                   |
//   waiting      | scheduler_, waiting queue   | Schedule: to running                  | none
//   running      | scheduler_, running         | Schedule: preempted, to waiting;      | its own
//                |                             | Step: stop, length, prefill done,     |
//                |                             | backend error: ended                  |
//   reserving    | pending_reservations_       | AdmitReservations: to awaiting KV     | none
//   awaiting KV  | awaiting_kv_                | Import: to prefilled (or ended by its | its own
//                |                             | first token); AbortImport, a bad      |
//                |                             | first token, lease expiry: ended      |
//   prefilled    | scheduler_, prefilled queue | Schedule: to running                  | its own
//   paused       | paused_                     | ResumePaused: to prefilled; Cancel,   | its own
//                |                             | Stop: ended                           |
//   ended        | -                           | -                                     | below
// A running or prefilled request with a pause asked for (PauseForMigration) moves to paused at the
// engine thread's next turn once its KV is computed up to its last token (it has one output token
// at least): between steps, never in one.
// Cancel and Stop end a request in any state but posted and ended. The blocks of an ended request
// go to quarantine_ when it ended awaiting KV while a writer may still write them (Cancel, lease
// expiry), until an Import or AbortImport for it or the lease deadline plus kv_write_grace; to
// export_held_ when it was prefill-only (or paused with an export reading its blocks), until
// ReleaseExportedBlocks; else back to the pool.
#ifndef TANDEM_COMMON_ENGINE_ENGINE_H_
#define TANDEM_COMMON_ENGINE_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backend/backend.h"
#include "common/engine/draft_model.h"
#include "common/engine/engine_commands.h"
#include "common/engine/placement_receipts.h"
#include "common/engine/request.h"
#include "common/engine/scheduler.h"
#include "common/engine/sequence.h"
#include "common/engine/speculative.h"
#include "common/engine/step_cost.h"
#include "common/kv/block_manager.h"
#include "common/sampling/sampler.h"
#include "common/util/clock.h"

namespace tandem {

// What one engine step did, for metrics (EngineOptions::on_step).
struct EngineStepStats {
  // Chunks computing prompt tokens (recomputation after a preemption included) and chunks decoding
  // one token; with their token counts. A decode node's first step of an imported request is a
  // decode.
  int32_t num_prefill_seqs = 0;
  int32_t num_decode_seqs = 0;
  int32_t num_prefill_tokens = 0;
  int32_t num_decode_tokens = 0;
  int32_t num_preempted = 0;  // sequences preempted while building this step
  // The KV the step's chunks attend to: for each chunk, the tokens of its sequence computed
  // before it plus its own, summed (step_cost.h's context_tokens).
  int64_t num_context_tokens = 0;
  // From scheduling to the last token handed out, on the engine's clock.
  int64_t duration_nanos = 0;
  bool ok = true;  // false when the backend failed the step

  int32_t num_seqs() const { return num_prefill_seqs + num_decode_seqs; }
  int32_t num_tokens() const { return num_prefill_tokens + num_decode_tokens; }
};

struct EngineOptions {
  SchedulerOptions scheduler;
  bool enable_prefix_caching = true;
  // Decode node: how long blocks of a reservation that ended without a completion (cancel, lease
  // expiry) stay out of use after the lease deadline, for writes still on the wire, unless the
  // writer says earlier that it stopped (AbortImport). Writers never start a write after the
  // lease deadline.
  absl::Duration kv_write_grace = absl::Seconds(2);
  // Speculative decoding (speculative.h); off by default.
  SpeculativeOptions speculative;
  // The proposer of --speculative sim, built beside the sim backend (common/serving); must be
  // unset for the other methods, which the engine builds itself.
  DraftProposer draft_proposer;
  // The draft model of --speculative draft (draft_model.h), built by whoever built the backend;
  // required for draft and unset otherwise. Used on the engine thread only.
  std::shared_ptr<DraftModel> draft_model;
  // Called on the engine thread after every step that ran the backend (one per
  // EngineStats::num_steps, failed steps included), after the step's events and stats are out,
  // with no engine lock held. Must be quick and must not block; may call Stats().
  std::function<void(const EngineStepStats&)> on_step;
};

// A snapshot for metrics and tests; counters are totals since construction.
struct EngineStats {
  int32_t num_waiting = 0;  // includes preempted sequences
  int32_t num_running = 0;
  int32_t num_kv_blocks = 0;
  int32_t num_free_kv_blocks = 0;
  int64_t prefix_cache_queries = 0;  // tokens
  int64_t prefix_cache_hits = 0;     // tokens
  int64_t num_preemptions = 0;
  int64_t num_steps = 0;
  int64_t num_batched_tokens = 0;  // tokens sent to the backend
  int64_t num_generated_tokens = 0;
  int64_t num_finished_requests = 0;  // any reason, aborts included
  // Speculative decoding (speculative.h): verifications (a sequence's step that checked drafts),
  // the drafts checked and the ones accepted, and the accepted ones by position (index i: a
  // step's (i+1)-th draft; kMaxSpeculativeTokens entries). Tokens per verification:
  // 1 + accepted / verifications.
  int64_t num_spec_verifications = 0;
  int64_t num_spec_draft_tokens = 0;
  int64_t num_spec_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_by_position;
  // Prompt tokens not computed yet, over waiting and running sequences.
  int64_t num_queued_prompt_tokens = 0;
  // Decode node: reservations waiting for free blocks, and ones holding blocks while their KV
  // arrives; blocks held back after a failed import (see kv_write_grace).
  int32_t num_pending_reservations = 0;
  int32_t num_awaiting_kv = 0;
  int32_t num_quarantined_blocks = 0;
  int64_t num_imported_requests = 0;
  int64_t num_expired_leases = 0;
  // Prefill node: blocks kept for exports that are not released yet.
  int32_t num_export_held_blocks = 0;
  // Decode node: requests paused for live KV migration (holding their blocks).
  int32_t num_paused = 0;
  // The prefix cache's content changes whenever this does (see CachedBlockHashes()).
  uint64_t kv_cache_version = 0;

  // --- What placement's cost model reads (router/placement_cost.h). ---
  // The price of a step, fitted over the steps that succeeded (step_cost.h): new_tokens the
  // tokens a step computed, context_tokens EngineStepStats::num_context_tokens, the duration
  // EngineStepStats::duration_nanos. samples 0 before the first step.
  StepCost step_cost;
  // The KV a decode step would read: the tokens (prompt + output so far) of the running and
  // waiting sequences, prefilled ones included, and on a decode node the prompts (+ resumed
  // output) of reservations waiting for blocks or for their KV. Paused requests are not counted.
  int64_t num_context_tokens = 0;
  int32_t max_num_batched_tokens = 0;  // SchedulerOptions: tokens one step computes at most
  int32_t max_num_seqs = 0;            // SchedulerOptions: sequences one step runs at most
  // Requests taken from the inbox (Submit, Reserve) per router that tagged them
  // (GenerateRequest::placement; placement_receipts.h), and how many routers are tracked at most.
  // The guarantee: these counts and every other field are one snapshot, published together after
  // the commands that counted were applied. So a request counted here is in this snapshot's load
  // (waiting, running, reserving, awaiting KV, or already finished): a router that retires the
  // placements a receipt covers never drops work the report does not show.
  std::vector<PlacementReceipt> receipts;
  int32_t max_receipts = 0;
};

class Engine {
 public:
  // `backend` and `clock` are borrowed and must outlive the engine. The KV pool's geometry
  // (blocks, block size) comes from backend->kv_layout(). InvalidArgument for bad options.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(Backend* backend,
                                                        const EngineOptions& options,
                                                        Clock* clock = Clock::Real());
  // Stops the engine thread (see Stop()).
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. Validates and queues a request; its events go to request.on_event.
  // InvalidArgument: empty prompt, a token id outside the vocabulary, a prompt longer than the
  // model's context, a prompt needing more KV blocks than the whole pool, invalid sampling params
  // (max_tokens < 1 among them), or bad resumed output (request.h). Unavailable after Stop().
  // A resumed request (request.resumed_output_token_ids) is computed like a preempted one: its
  // prompt and resumed tokens are prefilled at admission, then it samples what follows.
  absl::StatusOr<RequestId> Submit(GenerateRequest request);
  // Thread-safe. Asks to end a request: it finishes with kAborted (its blocks are released) at the
  // engine thread's next turn. Unknown or already finished ids are ignored.
  void Cancel(RequestId id);

  // --- Decode node: prompts whose KV another node computes. ---
  //
  // Thread-safe. Validates like Submit, then queues a reservation. When blocks are free (FIFO,
  // ahead of new local admissions) the engine thread allocates the prompt's blocks under a lease of
  // `lease` and calls `on_reserved` with them (reusing prefix-cache hits, which the writer must not
  // resend). The request's events go to request.on_event: the first is the imported first token
  // after CompleteImport; a lease that runs out first ends it with kError/DeadlineExceeded.
  // Cancel(id) works at every stage. `on_reserved` is called at most once, with an error if the
  // request ended before blocks were found. request.kv_exporter must be empty.
  // Live KV migration: with resumed output (validated as for Submit) the request arrives from
  // another decode node with its KV. The blocks reserved hold prompt + resumed tokens but the last
  // one (the writer sends that KV); CompleteImport's first_token must be the last resumed token
  // (else the request fails with DataLoss) and is not delivered again: the first event carries
  // the token after it.
  absl::StatusOr<RequestId> Reserve(GenerateRequest request, absl::Duration lease,
                                    ReservedCallback on_reserved);
  // Thread-safe. The writer finished request `prefill.request_id`'s prompt KV: it joins the running
  // batch with its first token (which is delivered as its first event, then checked for stop).
  // For a request that already ended, the writes are known finished: its held blocks are freed.
  // Unknown ids are ignored.
  void CompleteImport(ImportedPrefill prefill);
  // Thread-safe. The writer of request `id` stopped without completing and will write no more: the
  // request fails with kError/`reason` (if still waiting for its KV) and its blocks are freed.
  // With `writer_stopped` false (the import is refused while its writer may still write: a
  // completion of another epoch), the blocks are quarantined as for a lease expiry instead.
  void AbortImport(RequestId id, absl::Status reason, bool writer_stopped = true);

  // --- Live KV migration (decode node): a running request handed on with its KV. ---
  //
  // Thread-safe. Asks to pause request `id`: once it is running or prefilled with its KV computed
  // up to its last token and one output token at least (a request not there yet is paused when it
  // gets there), it leaves the batch holding its blocks, and its on_event gets an event with
  // `paused` set: no token, not finished, usage and rng_counter as of its last token. Unknown or
  // ended ids are ignored; so is a second pause.
  void PauseForMigration(RequestId id);
  // Thread-safe. Takes back a pause: a paused request joins the batch again and decodes on from
  // its last token as if never paused (after ReleaseExportedBlocks when an export is reading its
  // blocks); a pending pause is dropped.
  void ResumePaused(RequestId id);
  // Thread-safe. Exports paused request `id`'s KV as a prefill node's request does
  // (kv_exporter.h), on the engine thread: OnBlocksReady(id, 0, the blocks of its computed
  // tokens: prompt + output but the last token), then OnPrefillDone with its last token and its
  // rng counter. Its blocks stay allocated and unchanged until the exporter calls
  // ReleaseExportedBlocks(id), even if the request ends meanwhile. OnAborted with
  // FailedPrecondition when the request is not paused or an export of it still reads.
  void ExportPaused(RequestId id, std::shared_ptr<KvExporter> exporter);

  // --- Prefill node. ---
  //
  // Thread-safe. The KvExporter of request `id` no longer reads its blocks (see kv_exporter.h).
  void ReleaseExportedBlocks(RequestId id);
  // Thread-safe. The names of the blocks in the prefix cache (block_hash.h), sorted, as of the
  // engine's last step.
  std::vector<uint64_t> CachedBlockHashes() const;

  // Starts the engine thread. At most once; not together with RunUntilIdle().
  void Start();
  // Stops and joins the engine thread (if started), then aborts every unfinished request (final
  // event kAborted with status `why`, by default Unavailable "engine stopped") so that no waiter
  // hangs. Later Submits fail. Idempotent, but not to be called concurrently with itself or
  // RunUntilIdle().
  void Stop(absl::Status why = absl::UnavailableError("engine stopped"));
  // Without an engine thread: runs the loop on the calling thread until every submitted request
  // has finished, or what is left waits for blocks that reservations awaiting KV, quarantine,
  // held exports or paused requests hold (a later command or call gives them back). Returns the
  // first backend error (the affected requests already finished with kError); FailedPrecondition
  // when the engine thread is running. One caller at a time.
  absl::Status RunUntilIdle();

  EngineStats Stats() const;  // thread-safe
  const ModelConfig& model_config() const { return backend_->config(); }
  const KvLayout& kv_layout() const { return backend_->kv_layout(); }
  // Longest sequence (prompt + output) the engine will run: min(max_position_embeddings, KV pool
  // capacity in tokens).
  int32_t max_context_tokens() const { return max_context_tokens_; }
  const EngineOptions& options() const { return options_; }

 private:
  // Decode node: a reservation waiting for free blocks (its event callback is in callbacks_).
  struct PendingReservation {
    std::unique_ptr<Sequence> seq;
    ReservedCallback on_reserved;
    absl::Duration lease;
  };
  // Decode node: a request paused for live migration, and the exporter reading its blocks (if
  // one is).
  struct PausedRequest {
    std::unique_ptr<Sequence> seq;
    std::shared_ptr<KvExporter> exporter;  // set from ExportPaused until ReleaseExportedBlocks
    bool resume_after_release = false;     // ResumePaused came while the exporter read
  };
  // Blocks of a reservation that ended without a completion: writes may still land in them.
  struct QuarantinedBlocks {
    BlockTable table;
    int64_t release_at_nanos;
  };
  // What happens to an ending request's blocks (EndRequest).
  enum class BlockFate {
    kFree,
    kQuarantine,     // a writer may still write them: to quarantine_
    kHoldForExport,  // an exporter may still read them: to export_held_
  };
  // An ending request, taken out of wherever it lived, with what it still owes its caller.
  struct TakenRequest {
    std::unique_ptr<Sequence> seq;
    ReservedCallback on_reserved;  // set for a reservation that never got blocks
  };
  // How the step's batch runs: rows of logits, and whether they are sampled on the device.
  struct BatchPlan {
    size_t num_logits = 0;
    bool verifies_drafts = false;  // a chunk has more than one logits row
    bool sample_on_device = false;
  };
  // A verifying chunk's sampled rows, up to and including the first that disagrees with its draft
  // (or the one after the last draft): the tokens it emits (engine_speculative.cc).
  struct VerifiedDrafts {
    std::vector<SampleResult> results;
    uint64_t rng_counter = 0;  // the sequence's draws before the step's first row
  };

  Engine(Backend* backend, const EngineOptions& options, Clock* clock);

  // --- Any thread (engine.cc). ---
  absl::Status ValidateRequest(const GenerateRequest& request) const;
  // The resumed output's part of ValidateRequest (request.h).
  absl::Status ValidateResumed(const GenerateRequest& request) const;
  std::unique_ptr<Sequence> MakeSequence(GenerateRequest& request);
  // Queues a new request's command; Unavailable after Stop().
  absl::Status PostRequest(EngineCommand command);
  void Post(EngineCommand command);
  bool InboxReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- The engine thread's loop and step (engine.cc). ---
  void Loop();
  // Applies the inbox's commands in arrival order.
  void DrainInbox();
  absl::Status Step();
  BatchPlan BuildBatch();
  absl::Status RunBackend(const BatchPlan& plan);
  void ConsumeSamples(const BatchPlan& plan);

  // --- Speculative decoding (engine_speculative.cc, speculative.h). ---
  // Appends drafts to every running sequence about to decode.
  void ProposeDrafts();
  // Appends up to `room` of `drafts` to `seq` as its drafts for this step.
  void AppendDrafts(Sequence* seq, std::span<const TokenId> drafts, int32_t room);
  // Samples each verifying chunk's rows (or takes the device's tokens), cuts its rejected drafts
  // from the sequence and from the chunk (before CompleteStep), and keeps the rows to emit in
  // verified_, in chunk order.
  void VerifyDrafts(const BatchPlan& plan);
  // Emits a verified chunk's tokens: its accepted drafts, then the target's own token.
  void EmitVerified(Sequence* seq, const VerifiedDrafts& verified);
  void PublishStats();
  // The KV tokens the sequences held here would have a decode step read (EngineStats).
  int64_t CountContextTokens();

  // --- A request's life (engine_lifecycle.cc). ---
  void Apply(engine_command::Submit& command);
  void Apply(engine_command::Cancel& command);
  // Appends `token` to `seq` and delivers it; ends the request when the token stops it (a
  // prefill-only request: always, kPrefillDone). True when it ended (`seq` is gone then).
  bool EmitToken(Sequence* seq, const SampleResult& token);
  // The one way a request ends, from any state: takes it out, counts it, does `blocks` with its
  // blocks, tells its reservation callback or exporter, and delivers the final event: `last` with
  // request id, finish reason, usage and `status` filled in (`last` carries the token that ended
  // the request, if one did). Unknown or already ended ids are ignored.
  void EndRequest(RequestId id, FinishReason reason, const absl::Status& status, BlockFate blocks,
                  GenerationEvent last = {});
  // The fate of the blocks of a request ended from outside (cancel, stop, failure): an exporter
  // may read them, a writer may write them unless `writer_stopped`; else they are free.
  BlockFate UnfinishedBlockFate(RequestId id, bool writer_stopped);
  TakenRequest TakeRequest(RequestId id, FinishReason reason);
  void DisposeBlocks(RequestId id, Sequence& seq, BlockFate fate);
  // Every request not ended: reservations (FIFO), awaiting KV (by id), then the scheduler's.
  std::vector<RequestId> UnfinishedIds() const;
  FinishReason CheckStop(const Sequence& seq) const;
  void Deliver(const GenerationEvent& event);

  // --- The prefill/decode handoff (engine_kv_handoff.cc). ---
  void Apply(engine_command::Reserve& command);
  void Apply(engine_command::Import& command);
  void Apply(engine_command::AbortImport& command);
  void Apply(engine_command::Release& command);
  // Engine-thread work that needs no backend step: reservations, leases, quarantine.
  bool HasTimedWork() const;
  // Whether a queue head that no free blocks fit may wait: blocks out of the scheduler's hands
  // will come back to the pool (held by reservations awaiting KV: import or lease expiry;
  // quarantine: its deadline; exports in flight: ReleaseExportedBlocks; paused requests: resume,
  // export or cancel), and this node is not one that could close a circle of waits (README,
  // "Auto mode"): one holding reservations for prompts other nodes prefill while prompts it
  // prefills for others queue here. Such a node fails the head, and the router retries elsewhere.
  bool QueueHeadMayWaitForHeldBlocks();
  void RunHousekeeping();
  void AdmitReservations();
  void ExpireLeases();
  void ReleaseQuarantine(bool release_all);
  // Frees `id`'s quarantined blocks, if any: its writer is known to have stopped.
  bool FreeQuarantined(RequestId id);
  // Prefill node: hands newly final blocks of an exporting sequence to its exporter.
  void ExportBlocks(Sequence* seq, bool prompt_done);

  // --- Live KV migration (engine_migration.cc). ---
  void Apply(engine_command::Pause& command);
  void Apply(engine_command::Resume& command);
  void Apply(engine_command::ExportPaused& command);
  // Pauses each request with a pause asked for that can pause now (between steps); forgets the
  // asks of requests that ended.
  void PauseWhereAsked();
  // A paused request back to the batch (prefilled: it decodes its last token next).
  void ResumeNow(RequestId id);
  // Live migration's part of Release: true when `id` was paused (its exporter stopped reading).
  bool ReleasePausedExport(RequestId id);

  Backend* const backend_;
  const EngineOptions options_;
  Clock* const clock_;
  const int32_t vocab_size_;
  const int32_t max_context_tokens_;
  std::atomic<RequestId> next_id_{1};

  mutable absl::Mutex mu_;
  std::vector<EngineCommand> inbox_ ABSL_GUARDED_BY(mu_);  // arrival order
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool thread_started_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;

  mutable absl::Mutex stats_mu_;
  EngineStats stats_ ABSL_GUARDED_BY(stats_mu_);
  std::vector<uint64_t> cached_hashes_ ABSL_GUARDED_BY(stats_mu_);

  // Owned by whichever thread runs the loop (the engine thread, or RunUntilIdle's caller).
  BlockManager block_manager_;
  Scheduler scheduler_;
  Sampler sampler_;
  absl::flat_hash_map<RequestId, EventCallback> callbacks_;
  std::deque<PendingReservation> pending_reservations_;
  // Decode node: requests holding reserved blocks while their KV arrives, in reservation order.
  std::map<RequestId, std::unique_ptr<Sequence>> awaiting_kv_;
  std::map<RequestId, QuarantinedBlocks> quarantine_;
  // Prefill node: blocks of finished exporting requests, until their exporter releases them.
  absl::flat_hash_map<RequestId, BlockTable> export_held_;
  // Decode node, live migration: pauses asked for and not done yet; paused requests.
  absl::flat_hash_set<RequestId> pause_asked_;
  std::map<RequestId, PausedRequest> paused_;
  uint64_t published_cache_version_ = ~uint64_t{0};
  int64_t num_imported_requests_ = 0;
  int64_t num_expired_leases_ = 0;
  SchedulerOutput step_;
  std::vector<ForwardItem> items_;
  std::vector<float> logits_;
  SampleResult sample_;
  // Device sampling (Backend::ForwardAndSample) of the current step, when every row allows it.
  std::vector<DeviceSampling> device_rows_;
  std::vector<TokenId> device_tokens_;
  DraftProposer draft_proposer_;             // set for ngram and sim
  std::shared_ptr<DraftModel> draft_model_;  // set for draft
  std::vector<DraftAsk> draft_asks_;         // ProposeDrafts' scratch for the draft model
  std::vector<std::vector<TokenId>> draft_outputs_;
  std::vector<TokenId> drafts_;           // ProposeDrafts' scratch
  std::vector<VerifiedDrafts> verified_;  // this step's, in chunk order
  int64_t num_spec_verifications_ = 0;
  int64_t num_spec_draft_tokens_ = 0;
  int64_t num_spec_accepted_tokens_ = 0;
  std::vector<int64_t> spec_accepted_by_position_ = std::vector<int64_t>(kMaxSpeculativeTokens, 0);
  int64_t num_steps_ = 0;
  // The last Step scheduled nothing, and its queue head waits for held blocks
  // (QueueHeadMayWaitForHeldBlocks): the loop waits for a command or timed work before stepping.
  bool head_waits_for_held_blocks_ = false;
  int64_t num_batched_tokens_ = 0;
  int64_t num_generated_tokens_ = 0;
  int64_t num_finished_requests_ = 0;
  // The step's chunks' context (EngineStepStats::num_context_tokens), set by BuildBatch.
  int64_t step_context_tokens_ = 0;
  // Timed on the wall clock, where the machine's other work stretches some steps: a step counts
  // as at most 3 times its predicted duration (step_cost.h).
  StepCostFit step_cost_fit_{/*decay=*/0.995, /*outlier_factor=*/3};
  StepCost step_cost_;  // step_cost_fit_'s estimate after the last step that succeeded
  PlacementReceipts receipts_;
  uint64_t published_receipts_version_ = ~uint64_t{0};
};

}  // namespace tandem

#endif  // TANDEM_COMMON_ENGINE_ENGINE_H_
