// One request as the scheduler sees it: its tokens, its KV blocks, how much of it is computed.
#ifndef TANDEM_COMMON_ENGINE_SEQUENCE_H_
#define TANDEM_COMMON_ENGINE_SEQUENCE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "common/engine/kv_exporter.h"
#include "common/engine/request.h"
#include "common/kv/block_manager.h"
#include "common/sampling/rng.h"
#include "common/sampling/sampling_params.h"
#include "common/types/dtype.h"

namespace tandem {

enum class SequenceStatus {
  kWaiting,     // queued, never admitted
  kRunning,     // admitted: holds KV blocks, prefilling or decoding
  kPreempted,   // was running, lost its blocks, queued again to recompute prompt + output so far
  kAwaitingKv,  // decode node: holds reserved blocks while another node writes the prompt's KV
  kPrefilled,   // decode node: prompt KV imported, first token known; waits for a seat to decode
  kPaused,      // decode node: out of the batch with its KV, for live migration (Engine)
  kFinished,
};

std::string_view SequenceStatusName(SequenceStatus status);

struct Sequence {
  // `reserve_tokens`: expected final length, so `tokens` never reallocates mid-generation.
  Sequence(RequestId id, std::vector<TokenId> prompt, const SamplingParams& params, uint64_t seed,
           int32_t reserve_tokens = 0);

  RequestId id;
  // The prompt followed by the output: a resumed request's resumed tokens (request.h), then the
  // tokens generated here. Forward items point into it.
  std::vector<TokenId> tokens;
  int32_t num_prompt_tokens;
  SamplingParams params;
  SamplingRng rng;

  SequenceStatus status = SequenceStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  BlockTable block_table;
  // Positions [0, num_computed_tokens) have their KV written (chunked prefill advances this).
  int32_t num_computed_tokens = 0;
  // Tokens found in the prefix cache at first admission; -1 before admission. (A resumed
  // request's hit may reach past its prompt; usage() counts only the prompt's part.)
  int32_t num_cached_tokens = -1;
  int32_t num_preemptions = 0;
  // Speculative decoding (speculative.h): the last num_draft_tokens of `tokens` are proposals the
  // current step verifies, not output. Nonzero only inside one engine step.
  int32_t num_draft_tokens = 0;

  // Prefill node: where the KV goes (prefill-only request), and how many leading blocks of
  // block_table were handed to it.
  std::shared_ptr<KvExporter> kv_exporter;
  int32_t num_exported_blocks = 0;
  // Decode node, kAwaitingKv: Clock::NowNanos() reading when the lease runs out.
  int64_t lease_deadline_nanos = -1;

  // Clock readings (Clock::NowNanos); -1 until they happen.
  int64_t arrival_nanos = -1;
  int64_t first_scheduled_nanos = -1;
  int64_t first_token_nanos = -1;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  // Tokens whose KV is not written yet (1 for a decoding sequence, plus its drafts).
  int32_t num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }
  std::span<const TokenId> prompt() const {
    return std::span<const TokenId>(tokens).first(num_prompt_tokens);
  }
  std::span<const TokenId> output() const {
    return std::span<const TokenId>(tokens).subspan(num_prompt_tokens);
  }
  Usage usage() const;
  // Cuts the drafts from `tokens` (speculative.h).
  void DropDrafts() {
    tokens.resize(tokens.size() - num_draft_tokens);
    num_draft_tokens = 0;
  }
};

}  // namespace tandem

#endif  // TANDEM_COMMON_ENGINE_SEQUENCE_H_
