// The engine's public calls, its loop and its step (engine.h). The thread-safe calls only post
// commands to the inbox; the engine thread drains it and runs Step: build the batch, run the
// backend, consume the samples. Touches the scheduler, the backend and the stats; requests' tokens
// and ends go through engine_lifecycle.cc.
#include "common/engine/engine.h"

#include <algorithm>
#include <span>
#include <utility>
#include <variant>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "common/sampling/rng.h"
#include "common/util/status_macros.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

int32_t MaxContextTokens(const ModelConfig& config, const KvLayout& layout) {
  const int64_t pool_tokens = int64_t{layout.num_blocks} * layout.block_size;
  int64_t limit = pool_tokens;
  if (config.max_position_embeddings > 0) {
    limit = std::min<int64_t>(limit, config.max_position_embeddings);
  }
  return static_cast<int32_t>(std::min<int64_t>(limit, INT32_MAX));
}

// Splits a scheduled step into prefill and decode work (before it runs: the chunks' sequences are
// alive). A decode computes the KV of a sequence's last token, which is an output token; the
// scheduler's own "decodes" (one token left) also include a prompt's last chunk of one token.
EngineStepStats DescribeStep(const SchedulerOutput& step) {
  EngineStepStats stats;
  stats.num_preempted = static_cast<int32_t>(step.preempted.size());
  for (const ScheduledChunk& chunk : step.chunks) {
    const Sequence& seq = *chunk.seq;
    const bool decode = chunk.num_tokens == 1 && chunk.start_pos >= seq.num_prompt_tokens &&
                        chunk.start_pos + 1 == seq.num_tokens();
    if (decode) {
      ++stats.num_decode_seqs;
      stats.num_decode_tokens += chunk.num_tokens;
    } else {
      ++stats.num_prefill_seqs;
      stats.num_prefill_tokens += chunk.num_tokens;
    }
  }
  return stats;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(Backend* backend,
                                                       const EngineOptions& options, Clock* clock) {
  if (backend == nullptr || clock == nullptr) {
    return absl::InvalidArgumentError("engine needs a backend and a clock");
  }
  RETURN_IF_ERROR(options.scheduler.Validate());
  RETURN_IF_ERROR(options.speculative.Validate());
  if (options.speculative.method == SpeculativeMethod::kSim && options.draft_proposer == nullptr) {
    return absl::InvalidArgumentError("--speculative sim needs the sim backend (--backend sim)");
  }
  if ((options.speculative.method == SpeculativeMethod::kDraft) !=
      (options.draft_model != nullptr)) {
    return absl::InvalidArgumentError(
        options.draft_model == nullptr
            ? "--speculative draft needs a draft model (--draft-model DIR)"
            : "a draft model was given without --speculative draft");
  }
  if (options.speculative.method != SpeculativeMethod::kSim && options.draft_proposer != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a draft proposer was given for --speculative ",
        std::string(SpeculativeMethodName(options.speculative.method)), ", which builds its own"));
  }
  const KvLayout& layout = backend->kv_layout();
  if (layout.num_blocks < 1 || layout.block_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("backend '", std::string(backend->name()),
                                                   "' has an empty KV pool (", layout.num_blocks,
                                                   " blocks of ", layout.block_size, " tokens)"));
  }
  if (backend->config().vocab_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("backend '", std::string(backend->name()),
                                                   "' reports vocab_size ",
                                                   backend->config().vocab_size));
  }
  return std::unique_ptr<Engine>(new Engine(backend, options, clock));
}

Engine::Engine(Backend* backend, const EngineOptions& options, Clock* clock)
    : backend_(backend),
      options_(options),
      clock_(clock),
      vocab_size_(backend->config().vocab_size),
      max_context_tokens_(MaxContextTokens(backend->config(), backend->kv_layout())),
      block_manager_(backend->kv_layout().num_blocks, backend->kv_layout().block_size,
                     options.enable_prefix_caching),
      scheduler_(options.scheduler, &block_manager_, clock) {
  if (options.speculative.method == SpeculativeMethod::kNgram) {
    draft_proposer_ = [min = options.speculative.ngram_min, max = options.speculative.ngram_max](
                          std::span<const TokenId> context, int32_t max_drafts,
                          std::vector<TokenId>* drafts) {
      *drafts = ProposeByNgram(context, min, max, max_drafts);
    };
  } else if (options.speculative.method == SpeculativeMethod::kSim) {
    draft_proposer_ = options.draft_proposer;
  } else if (options.speculative.method == SpeculativeMethod::kDraft) {
    draft_model_ = options.draft_model;
  }
  PublishStats();
}

Engine::~Engine() { Stop(); }

absl::Status Engine::ValidateRequest(const GenerateRequest& request) const {
  const std::vector<TokenId>& prompt = request.prompt;
  if (prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token ", prompt[i], " at index ", i,
                                                     " is outside the vocabulary [0, ", vocab_size_,
                                                     ")"));
    }
  }
  const int max_positions = backend_->config().max_position_embeddings;
  if (max_positions > 0 && prompt.size() > static_cast<size_t>(max_positions)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt has ", prompt.size(), " tokens but the model's context length is ", max_positions));
  }
  const int64_t blocks = block_manager_.BlocksForTokens(static_cast<int64_t>(prompt.size()));
  if (blocks > block_manager_.num_blocks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt has ", prompt.size(), " tokens and needs ", blocks, " KV blocks of ",
                     block_manager_.block_size(), " tokens, but the whole pool has ",
                     block_manager_.num_blocks()));
  }
  RETURN_IF_ERROR(request.params.Validate(vocab_size_));
  return ValidateResumed(request);
}

absl::Status Engine::ValidateResumed(const GenerateRequest& request) const {
  const std::vector<TokenId>& resumed = request.resumed_output_token_ids;
  if (resumed.empty()) {
    if (request.resumed_rng_counter == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("resumed_rng_counter is ",
                                                   request.resumed_rng_counter,
                                                   " but resumed_output_token_ids is empty"));
  }
  const SamplingParams& params = request.params;
  const std::vector<int>& eos = backend_->config().eos_token_ids;
  for (size_t i = 0; i < resumed.size(); ++i) {
    const TokenId t = resumed[i];
    if (t < 0 || t >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat("resumed_output_token_ids[", i, "] = ", t,
                                                     " is outside the vocabulary [0, ", vocab_size_,
                                                     ")"));
    }
    const bool stops = (!params.ignore_eos && absl::c_linear_search(eos, t)) ||
                       absl::c_linear_search(params.stop_token_ids, t);
    if (stops && i + 1 < resumed.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "resumed_output_token_ids[", i, "] = ", t, " is a stop token but not the last of the ",
          resumed.size(), " resumed tokens: the run would have ended there"));
    }
  }
  if (resumed.size() > static_cast<size_t>(params.max_tokens)) {
    return absl::InvalidArgumentError(absl::StrCat("resumed_output_token_ids has ", resumed.size(),
                                                   " tokens, more than max_tokens (",
                                                   params.max_tokens, ") which counts them"));
  }
  const int64_t total = static_cast<int64_t>(request.prompt.size() + resumed.size());
  const int max_positions = backend_->config().max_position_embeddings;
  if (max_positions > 0 && total > max_positions) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt (", request.prompt.size(), " tokens) and resumed_output_token_ids (",
                     resumed.size(), ") have ", total, " tokens but the model's context length is ",
                     max_positions));
  }
  const int64_t blocks = block_manager_.BlocksForTokens(total);
  if (blocks > block_manager_.num_blocks()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", request.prompt.size(), " tokens) and resumed_output_token_ids (",
        resumed.size(), ") need ", blocks, " KV blocks of ", block_manager_.block_size(),
        " tokens, but the whole pool has ", block_manager_.num_blocks()));
  }
  return absl::OkStatus();
}

std::unique_ptr<Sequence> Engine::MakeSequence(GenerateRequest& request) {
  const RequestId id = next_id_.fetch_add(1, std::memory_order_relaxed);
  const SamplingParams& params = request.params;
  const uint64_t seed = params.seed.has_value() ? *params.seed : RandomSeed();
  // max_tokens counts resumed output too.
  const int64_t expected_length = static_cast<int64_t>(request.prompt.size()) + params.max_tokens;
  auto seq = std::make_unique<Sequence>(
      id, std::move(request.prompt), params, seed,
      static_cast<int32_t>(std::min<int64_t>(expected_length, max_context_tokens_)));
  // A resumed request: its output so far follows the prompt, as after a preemption.
  seq->tokens.insert(seq->tokens.end(), request.resumed_output_token_ids.begin(),
                     request.resumed_output_token_ids.end());
  seq->rng.set_counter(request.resumed_rng_counter);
  seq->kv_exporter = std::move(request.kv_exporter);
  return seq;
}

absl::StatusOr<RequestId> Engine::Submit(GenerateRequest request) {
  if (request.kv_exporter != nullptr &&
      (!request.resumed_output_token_ids.empty() || request.resumed_rng_counter != 0)) {
    return absl::InvalidArgumentError(
        "a prefill-only request cannot resume output (resumed_output_token_ids)");
  }
  RETURN_IF_ERROR(ValidateRequest(request));
  std::unique_ptr<Sequence> seq = MakeSequence(request);
  const RequestId id = seq->id;
  RETURN_IF_ERROR(PostRequest(
      engine_command::Submit{std::move(seq), std::move(request.on_event), request.placement}));
  return id;
}

absl::StatusOr<RequestId> Engine::Reserve(GenerateRequest request, absl::Duration lease,
                                          ReservedCallback on_reserved) {
  if (request.kv_exporter != nullptr) {
    return absl::InvalidArgumentError("a reserved request cannot also export its KV");
  }
  if (lease <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease must be positive, got ", absl::FormatDuration(lease)));
  }
  RETURN_IF_ERROR(ValidateRequest(request));
  std::unique_ptr<Sequence> seq = MakeSequence(request);
  const RequestId id = seq->id;
  // A request moving in with its KV (live migration) must still have tokens to generate.
  if (seq->num_output_tokens() > 0 && CheckStop(*seq) != FinishReason::kNone) {
    return absl::InvalidArgumentError(
        absl::StrCat("resumed_output_token_ids (", seq->num_output_tokens(),
                     " tokens) already end the request: there is nothing left to move"));
  }
  RETURN_IF_ERROR(
      PostRequest(engine_command::Reserve{std::move(seq), std::move(request.on_event),
                                          std::move(on_reserved), lease, request.placement}));
  return id;
}

void Engine::Cancel(RequestId id) { Post(engine_command::Cancel{id}); }

void Engine::CompleteImport(ImportedPrefill prefill) {
  Post(engine_command::Import{std::move(prefill)});
}

void Engine::AbortImport(RequestId id, absl::Status reason, bool writer_stopped) {
  Post(engine_command::AbortImport{id, std::move(reason), writer_stopped});
}

void Engine::ReleaseExportedBlocks(RequestId id) { Post(engine_command::Release{id}); }

void Engine::PauseForMigration(RequestId id) { Post(engine_command::Pause{id}); }

void Engine::ResumePaused(RequestId id) { Post(engine_command::Resume{id}); }

void Engine::ExportPaused(RequestId id, std::shared_ptr<KvExporter> exporter) {
  Post(engine_command::ExportPaused{id, std::move(exporter)});
}

absl::Status Engine::PostRequest(EngineCommand command) {
  absl::MutexLock lock(&mu_);
  if (stop_requested_) return absl::UnavailableError("engine is stopped");
  inbox_.push_back(std::move(command));
  return absl::OkStatus();
}

void Engine::Post(EngineCommand command) {
  absl::MutexLock lock(&mu_);
  inbox_.push_back(std::move(command));
}

bool Engine::InboxReady() const { return stop_requested_ || !inbox_.empty(); }

std::vector<uint64_t> Engine::CachedBlockHashes() const {
  absl::MutexLock lock(&stats_mu_);
  return cached_hashes_;
}

void Engine::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_started_ || stop_requested_) {
    spdlog::error("engine: Start() called twice or after Stop(); ignored");
    return;
  }
  thread_started_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void Engine::Stop(absl::Status why) {
  {
    absl::MutexLock lock(&mu_);
    stop_requested_ = true;
  }
  if (thread_.joinable()) thread_.join();
  // Nothing runs the loop any more: end whatever is left so that every waiter wakes up. No writer
  // writes into a stopped node's blocks.
  DrainInbox();
  for (RequestId id : UnfinishedIds()) {
    EndRequest(id, FinishReason::kAborted, why, UnfinishedBlockFate(id, /*writer_stopped=*/true));
  }
  ReleaseQuarantine(/*release_all=*/true);
  PublishStats();
}

void Engine::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (!scheduler_.HasUnfinished() || head_waits_for_held_blocks_) {
        const absl::Condition ready(this, &Engine::InboxReady);
        if (HasTimedWork()) {
          // Leases, quarantine and waiting reservations need a look now and then.
          mu_.AwaitWithTimeout(ready, absl::Milliseconds(10));
        } else {
          mu_.Await(ready);
        }
      }
      if (stop_requested_) return;
    }
    DrainInbox();
    RunHousekeeping();
    PauseWhereAsked();
    if (scheduler_.HasUnfinished()) {
      absl::Status status = Step();
      if (!status.ok()) spdlog::error("engine: step failed: {}", status.ToString());
    }
  }
}

absl::Status Engine::RunUntilIdle() {
  {
    absl::MutexLock lock(&mu_);
    if (thread_started_) {
      return absl::FailedPreconditionError("RunUntilIdle() while the engine thread runs");
    }
  }
  absl::Status first_error;
  while (true) {
    DrainInbox();
    RunHousekeeping();
    PauseWhereAsked();
    if (!scheduler_.HasUnfinished()) break;
    absl::Status status = Step();
    if (!status.ok() && first_error.ok()) first_error = status;
    // Idle too: what is left waits for blocks that another thread's command, or time (a lease
    // running out, which a later call's housekeeping sees), gives back.
    if (head_waits_for_held_blocks_) {
      absl::MutexLock lock(&mu_);
      if (!InboxReady()) break;
    }
  }
  return first_error;
}

void Engine::DrainInbox() {
  std::vector<EngineCommand> commands;
  {
    absl::MutexLock lock(&mu_);
    commands.swap(inbox_);
  }
  for (EngineCommand& command : commands) {
    std::visit([this](auto& c) { Apply(c); }, command);
  }
  if (!commands.empty()) PublishStats();
}

// schedule -> build the batch -> run the backend -> consume the samples.
absl::Status Engine::Step() {
  const int64_t started = clock_->NowNanos();
  if (options_.speculative.enabled()) ProposeDrafts();
  scheduler_.Schedule(&step_);
  head_waits_for_held_blocks_ = false;
  if (step_.empty()) {
    absl::Status status;
    if (step_.preempted.empty() && QueueHeadMayWaitForHeldBlocks()) {
      // Nothing can run, but blocks out of the scheduler's hands come back (a reservation's KV
      // arrives or its lease runs out, an export is released...): the queue head waits for them.
      head_waits_for_held_blocks_ = true;
    } else if (step_.preempted.empty()) {
      // Nothing can run and nothing was freed, and either nothing will be (Submit's checks
      // should make that unreachable) or waiting could close a circle of waits
      // (QueueHeadMayWaitForHeldBlocks): fail the head rather than spin or wait.
      const RequestId head = scheduler_.UnfinishedIds().front();
      status = absl::ResourceExhaustedError(absl::StrCat(
          "request ", head, " cannot be scheduled: ",
          awaiting_kv_.empty() ? "the KV pool is too small"
                               : "the free KV blocks are reserved for prompts other nodes "
                                 "prefill, while prompts queued here prefill for others"));
      EndRequest(head, FinishReason::kError, status,
                 UnfinishedBlockFate(head, /*writer_stopped=*/false));
    }
    PublishStats();
    return status;
  }
  const BatchPlan plan = BuildBatch();
  EngineStepStats step_stats;
  if (options_.on_step) step_stats = DescribeStep(step_);
  step_stats.num_context_tokens = step_context_tokens_;
  const int64_t new_tokens = step_.num_batched_tokens;
  ++num_steps_;
  num_batched_tokens_ += new_tokens;

  const absl::Status status = RunBackend(plan);
  if (status.ok()) {
    ConsumeSamples(plan);
    step_stats.duration_nanos = clock_->NowNanos() - started;
    step_cost_fit_.Add(new_tokens, step_stats.num_context_tokens,
                       static_cast<double>(step_stats.duration_nanos) / 1000.0);
    step_cost_ = step_cost_fit_.Estimate();
  } else {
    spdlog::warn("engine: backend '{}' failed a step of {} sequences: {}", backend_->name(),
                 step_.chunks.size(), status.ToString());
    for (const ScheduledChunk& chunk : step_.chunks) {
      const RequestId id = chunk.seq->id;  // alive until its own EndRequest
      EndRequest(id, FinishReason::kError, status,
                 UnfinishedBlockFate(id, /*writer_stopped=*/false));
    }
  }
  PublishStats();
  step_stats.ok = status.ok();
  if (!status.ok()) step_stats.duration_nanos = clock_->NowNanos() - started;
  if (options_.on_step) options_.on_step(step_stats);
  return status;
}

Engine::BatchPlan Engine::BuildBatch() {
  BatchPlan plan;
  items_.clear();
  step_context_tokens_ = 0;
  for (const ScheduledChunk& chunk : step_.chunks) {
    const Sequence& seq = *chunk.seq;
    step_context_tokens_ += int64_t{chunk.start_pos} + chunk.num_tokens;
    ForwardItem item;
    item.tokens = std::span<const TokenId>(seq.tokens).subspan(chunk.start_pos, chunk.num_tokens);
    item.start_pos = chunk.start_pos;
    item.block_table = seq.block_table.blocks;
    item.want_logits = chunk.want_logits;
    item.num_logits = chunk.num_logits;
    items_.push_back(item);
    plan.num_logits += static_cast<size_t>(LogitsRows(item));
    if (LogitsRows(item) > 1) plan.verifies_drafts = true;
  }
  const size_t logits_size = plan.num_logits * static_cast<size_t>(vocab_size_);
  if (logits_.size() < logits_size) logits_.resize(logits_size);

  // Sample on the device when the backend can and no row needs what only the host sampler does
  // (penalties, min-p, logprobs): then no logits cross to the host. A verifying chunk's rows are
  // draws counter, counter + 1, ...: the ones a step per token would take (engine_speculative.cc
  // keeps those up to the first rejected draft).
  plan.sample_on_device = backend_->CanSampleOnDevice() && plan.num_logits > 0;
  device_rows_.clear();
  for (const ScheduledChunk& chunk : step_.chunks) {
    if (!plan.sample_on_device) break;
    if (!chunk.want_logits) continue;
    const SamplingParams& p = chunk.seq->params;
    if (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f ||
        p.min_p > 0.0f || p.logprobs >= 0) {
      plan.sample_on_device = false;
      break;
    }
    for (int32_t i = 0; i < chunk.num_logits; ++i) {
      device_rows_.push_back({p.temperature, p.top_k, p.top_p, chunk.seq->rng.seed(),
                              chunk.seq->rng.counter() + static_cast<uint64_t>(i)});
    }
  }
  return plan;
}

absl::Status Engine::RunBackend(const BatchPlan& plan) {
  if (plan.sample_on_device) {
    device_tokens_.resize(plan.num_logits);
    return backend_->ForwardAndSample(ForwardBatch{items_}, device_rows_, device_tokens_);
  }
  const size_t logits_size = plan.num_logits * static_cast<size_t>(vocab_size_);
  return backend_->Forward(ForwardBatch{items_},
                           LogitsOutput{std::span<float>(logits_.data(), logits_size)});
}

void Engine::ConsumeSamples(const BatchPlan& plan) {
  // Drafts first: the scheduler then records only the positions whose tokens stand.
  if (plan.verifies_drafts) VerifyDrafts(plan);
  scheduler_.CompleteStep(step_);
  for (const ScheduledChunk& chunk : step_.chunks) {
    if (chunk.seq->kv_exporter != nullptr && !chunk.want_logits) {
      ExportBlocks(chunk.seq, /*prompt_done=*/false);
    }
  }
  const size_t vocab = static_cast<size_t>(vocab_size_);
  size_t row = 0;
  size_t verified = 0;
  for (const ScheduledChunk& chunk : step_.chunks) {
    if (!chunk.want_logits) continue;
    Sequence* seq = chunk.seq;
    if (chunk.num_logits > 1) {
      row += static_cast<size_t>(chunk.num_logits);
      EmitVerified(seq, verified_[verified++]);  // may end the request
      continue;
    }
    if (plan.sample_on_device) {
      sample_.token = device_tokens_[row];
      if (!seq->params.greedy()) seq->rng.set_counter(seq->rng.counter() + 1);  // one draw
    } else {
      std::span<const float> logits(logits_.data() + row * vocab, vocab);
      sampler_.Sample(logits, seq->params, seq->prompt(), seq->output(), &seq->rng, &sample_);
    }
    ++row;
    EmitToken(seq, sample_);  // may end the request: `seq` is gone then
  }
}

int64_t Engine::CountContextTokens() {
  int64_t total = 0;
  for (const RequestId id : scheduler_.UnfinishedIds()) {
    if (const Sequence* seq = scheduler_.Find(id); seq != nullptr) total += seq->num_tokens();
  }
  for (const PendingReservation& r : pending_reservations_) total += r.seq->num_tokens();
  for (const auto& [id, seq] : awaiting_kv_) total += seq->num_tokens();
  return total;
}

void Engine::PublishStats() {
  const int64_t context_tokens = CountContextTokens();
  absl::MutexLock lock(&stats_mu_);
  stats_.num_waiting = scheduler_.num_waiting();
  stats_.num_running = scheduler_.num_running();
  stats_.num_kv_blocks = block_manager_.num_blocks();
  stats_.num_free_kv_blocks = block_manager_.num_free_blocks();
  stats_.prefix_cache_queries = block_manager_.prefix_cache_queries();
  stats_.prefix_cache_hits = block_manager_.prefix_cache_hits();
  stats_.num_preemptions = scheduler_.num_preemptions();
  stats_.num_steps = num_steps_;
  stats_.num_batched_tokens = num_batched_tokens_;
  stats_.num_generated_tokens = num_generated_tokens_;
  stats_.num_finished_requests = num_finished_requests_;
  stats_.num_spec_verifications = num_spec_verifications_;
  stats_.num_spec_draft_tokens = num_spec_draft_tokens_;
  stats_.num_spec_accepted_tokens = num_spec_accepted_tokens_;
  stats_.spec_accepted_by_position = spec_accepted_by_position_;
  stats_.num_queued_prompt_tokens = scheduler_.NumQueuedPromptTokens();
  stats_.num_pending_reservations = static_cast<int32_t>(pending_reservations_.size());
  stats_.num_awaiting_kv = static_cast<int32_t>(awaiting_kv_.size());
  int32_t quarantined = 0;
  for (const auto& [id, q] : quarantine_)
    quarantined += static_cast<int32_t>(q.table.blocks.size());
  stats_.num_quarantined_blocks = quarantined;
  stats_.num_imported_requests = num_imported_requests_;
  stats_.num_expired_leases = num_expired_leases_;
  int32_t held = 0;
  for (const auto& [id, table] : export_held_) held += static_cast<int32_t>(table.blocks.size());
  stats_.num_export_held_blocks = held;
  stats_.num_paused = static_cast<int32_t>(paused_.size());
  stats_.kv_cache_version = block_manager_.cache_version();
  stats_.step_cost = step_cost_;
  stats_.num_context_tokens = context_tokens;
  stats_.max_num_batched_tokens = options_.scheduler.max_num_batched_tokens;
  stats_.max_num_seqs = options_.scheduler.max_num_seqs;
  stats_.max_receipts = receipts_.capacity();
  if (published_receipts_version_ != receipts_.version()) {
    published_receipts_version_ = receipts_.version();
    stats_.receipts = receipts_.Snapshot();
  }
  if (published_cache_version_ != block_manager_.cache_version()) {
    published_cache_version_ = block_manager_.cache_version();
    cached_hashes_ = block_manager_.CachedHashes();
  }
}

EngineStats Engine::Stats() const {
  absl::MutexLock lock(&stats_mu_);
  return stats_;
}

}  // namespace tandem
