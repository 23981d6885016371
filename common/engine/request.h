// What callers hand the engine and what they get back, one event per generated token.
#ifndef TANDEM_COMMON_ENGINE_REQUEST_H_
#define TANDEM_COMMON_ENGINE_REQUEST_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/sampling/sampler.h"
#include "common/sampling/sampling_params.h"
#include "common/types/dtype.h"
#include "common/types/placement_tag.h"

namespace tandem {

using RequestId = uint64_t;

enum class FinishReason {
  kNone,     // still running
  kStop,     // an EOS token (unless ignore_eos) or one of stop_token_ids was generated
  kLength,   // max_tokens reached, or the context (model or KV pool) is full
  kAborted,  // cancelled, or the engine stopped
  kError,    // the backend failed, or a KV transfer failed; GenerationEvent::status says why
  // Prefill node only: the prompt is computed and the first token sampled; the request goes on
  // at a decode node.
  kPrefillDone,
};

// OpenAI / vLLM spelling: "stop", "length", "abort", "error" ("" for kNone); "prefill_done".
std::string_view FinishReasonName(FinishReason reason);

struct Usage {
  int32_t prompt_tokens = 0;
  // Output tokens, a resumed request's resumed_output_token_ids included: the same count an
  // uninterrupted run reports, so a migrated request's final usage is the whole completion's.
  int32_t completion_tokens = 0;
  // Prompt tokens served from the prefix cache at the request's first admission (never more than
  // prompt_tokens, even when a resumed request's cache hit reaches into its resumed tokens).
  int32_t cached_tokens = 0;
  bool operator==(const Usage&) const = default;
};

struct GenerationEvent {
  RequestId request_id = 0;
  // The newly generated token, or -1 on a final event that carries no token (abort, error).
  // Stop tokens (EOS, stop_token_ids) are delivered like any other token.
  TokenId token = -1;
  // Raw logprob of `token` (see sampler.h) when the request asked for logprobs (>= 0), else 0.
  float logprob = 0.0f;
  // The request's `logprobs` most likely tokens at this step, most likely first.
  std::vector<TokenLogprob> top_logprobs;
  // True on the request's last event; finish_reason and usage are final then.
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  Usage usage;  // counts so far
  // Why, when finish_reason is kError (or kAborted by an engine stop); OK otherwise.
  absl::Status status;
  // On the event with the request's first token: time from arrival to its first scheduled step
  // (a reserved request: from the reservation's arrival until its blocks were allocated).
  int64_t queue_nanos = -1;
  // Random draws the request's sampler has taken after this event's token (on a final event with
  // no token: when it ended); always 0 for greedy requests. A migrated request resumes from the
  // value on the event of the last token the client got (GenerateRequest::resumed_rng_counter).
  uint64_t rng_counter = 0;
  // Live KV migration: the request paused (Engine::PauseForMigration): no token, not finished.
  bool paused = false;

  bool has_token() const { return token >= 0; }
};

// Receives a request's events in order, on the engine thread: must be quick and must not block
// (hand the event to another thread, e.g. through RequestStream). May call Engine::Submit/Cancel.
using EventCallback = std::function<void(const GenerationEvent&)>;

class KvExporter;

struct GenerateRequest {
  std::vector<TokenId> prompt;
  SamplingParams params;
  EventCallback on_event;  // may be empty (fire and forget)
  // Prefill node: when set, the request is prefill-only. The engine computes the prompt, hands its
  // KV blocks to the exporter as they become final (kv_exporter.h), samples the first token and
  // ends the request with FinishReason::kPrefillDone (the final event carries the token).
  std::shared_ptr<KvExporter> kv_exporter;

  // Request migration: output tokens this request already generated elsewhere (the client has
  // them), and the sampler's draws after the last of them (GenerationEvent::rng_counter of its
  // event). The sequence starts as prompt + these; their KV is computed like a preempted
  // sequence's (the prefix cache still serves the prompt). They count as output everywhere:
  // penalties, max_tokens, stop conditions, Usage::completion_tokens. They are never delivered
  // again: the first event carries the token after them, so with the same params (and seed) the
  // events continue exactly where an uninterrupted run's would. Without a seed the continuation
  // is sampled afresh.
  //
  // Submit, and Reserve for a request moving in with its KV (engine.h); prefill-only requests
  // refuse them. InvalidArgument, naming the
  // field: an id outside the vocabulary; more of them than max_tokens; prompt + them longer than
  // the context or the KV pool; a stop token (EOS unless ignore_eos, stop_token_ids) anywhere but
  // last; a non-zero counter with no tokens.
  // When they already end the request (max_tokens of them, prompt + them filling the context, or
  // the last one a stop token: what ended the run that produced them), the request is accepted
  // and finishes at once with kLength or kStop and no token (a final event with token -1, usage
  // counting them), computing nothing: the router forwards that final event as it would have
  // forwarded the original one.
  std::vector<TokenId> resumed_output_token_ids;
  uint64_t resumed_rng_counter = 0;

  // Who placed it (common/types/placement_tag.h). Submit and Reserve: counted among the receipts
  // of its router once the engine thread takes it from the inbox (EngineStats::receipts).
  PlacementTag placement;
};

// Decode node: the blocks Engine::Reserve set aside for a prompt whose KV is computed elsewhere.
struct KvReservation {
  RequestId request_id = 0;
  // The prompt's blocks in order: block_ids[i] holds positions [i * block_size, (i+1) *
  // block_size).
  std::vector<int32_t> block_ids;
  // Leading prompt tokens whose KV this node already had (prefix cache): a whole number of blocks
  // that the writer must not resend.
  int32_t num_cached_tokens = 0;
  // The lease: Clock::NowNanos() reading after which the reservation fails.
  int64_t lease_deadline_nanos = 0;
};

// Decode node: the writer's completion of a reserved request (from tandem.v1.KvCompletion).
struct ImportedPrefill {
  RequestId request_id = 0;
  TokenId first_token = -1;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;
  // The sampler's random draws for the first token: the decode node continues after them.
  uint64_t rng_counter = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_ENGINE_REQUEST_H_
