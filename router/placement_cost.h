// The cost model of PlacementPolicy::kCost: what one request would see on each candidate, and
// what it would do to the requests already there, predicted from the nodes' load reports (plus
// what this router sent since) and their learnt price of a step (StepCost). Pure functions.
//
// A node's work is priced as its engine runs it: steps of at most max_batched_tokens tokens,
// each costing per_step + per_token · tokens + per_context_token · KV read (step_cost.h).
//
//   prefill on node N, u uncached prompt tokens after c cached ones, W = N's queued prompt
//   tokens + u, B = N's decoding sequences (one token each per step), K = their KV:
//     steps  n = ⌈W / (chunk − B)⌉
//     time   n · (per_step + B · per_token + K · per_context_token) + W · per_token
//            + per_context_token · (this prompt's chunks' KV reads: Σ over its chunks of c + the
//              tokens computed so far)
//   decode on node D after admitting the request (prompt p, output o):
//     TPOT   per_step + (S + 1) · per_token + (K + p + o/2) · per_context_token
//            + Q · per_token / o          (D's queued prompt tokens, computed in its steps while
//                                          the request decodes, spread over its tokens)
//     where S = D's sequences (running, waiting, awaiting KV, sent since), K their KV
//   local prefill on D stalls D's running sequences by the prefill's extra step time, spread
//   over their next o tokens: others' TPOT = D's TPOT now + stall / o.
//
// An option's score is max(TTFT / slo_ttft, TPOT / slo_tpot) + kSumWeight · (their sum), the
// TPOT being the worse of the request's own and the running batch's after it: the worse ratio
// decides (below 1 + 2·kSumWeight, every prediction meets its target), the sum separates options
// whose worse ratio is the same; the smallest score leaves the most headroom. A decode node whose
// free blocks cannot hold the request (it would queue there) scores kNoRoomPenalty more: it is
// chosen only when no node has room.
#ifndef TANDEM_ROUTER_PLACEMENT_COST_H_
#define TANDEM_ROUTER_PLACEMENT_COST_H_

#include <cstdint>
#include <span>

#include "common/types/step_cost.h"
#include "router/placement.h"

namespace tandem {

// One request, as the cost model needs it.
struct CostRequest {
  int64_t prompt_tokens = 0;
  int64_t max_tokens = 0;  // output tokens; 0: unknown (kDefaultOutputTokens)
};
inline constexpr int64_t kDefaultOutputTokens = 256;
inline constexpr int64_t kDefaultChunkTokens = 2048;
inline constexpr double kSumWeight = 0.25;

struct PredictedCost {
  double ttft_us = 0;
  double tpot_us = 0;         // the request's own
  double others_tpot_us = 0;  // the decode node's running sequences', once it is placed
  bool fits = true;           // the decode node's free blocks hold the request
  double score = 0;
};

// The price a node is predicted with: its own when it reports one, else the mean of the known
// ones in `pool`; unknown (samples 0) when no node of the pool reports one.
StepCost PriceOf(const NodeCandidate& node, std::span<const NodeCandidate> pool);

// Time to compute `uncached` prompt tokens after `cached` ones on `node`, behind its queue; with
// its running sequences decoding in the same steps when `with_decode_batch` (a decode node).
// Prompt tokens cost `prompt_token_us` each (price.per_token_us but where the node's own price
// never saw a prompt: LocalPromptTokenUs).
double PrefillTimeUs(const NodeCandidate& node, const StepCost& price, double prompt_token_us,
                     int64_t cached, int64_t uncached, bool with_decode_batch);
// What one prompt token costs on decode node `node` priced `price`, with `prefill_price` the
// prefill pool's (unknown when there is none) and `prefill_chunk` the tokens of a prefill step
// there: the larger of the node's per-token price and a prefill node's cost of a token in a full
// chunk (per_token + per_step / chunk). A decode node that has only decoded learnt its price from
// steps of one token per sequence, where a token's cost hides in the weights' read (per_step) and
// per_token comes out near 0, so its own price would call a local prefill free; nodes of one
// model compute a prompt token at about the same cost, so the prefill pool's stands in for it (an
// overestimate only where the decode node's GPU computes faster than the prefill nodes'). The
// chunk's average, not per_token alone: a prefill node whose steps were all full fresh chunks
// cannot tell its per-step, per-token and per-context costs apart (its fit may put all of it in
// any one of them), but their sum over a chunk (a fresh token's context is itself) it knows.
double LocalPromptTokenUs(const StepCost& price, const StepCost& prefill_price,
                          int64_t prefill_chunk);
// The request's TPOT on decode node `node` once admitted.
// Its queued prompt tokens (local prefills) cost `prompt_token_us` each.
double DecodeTpotUs(const NodeCandidate& node, const StepCost& price, double prompt_token_us,
                    const CostRequest& request);
// The TPOT of `node`'s sequences as they are (no new request).
double CurrentTpotUs(const NodeCandidate& node, const StepCost& price);
// Whether `node`'s free blocks hold the request's prompt and output.
bool HasRoomFor(const NodeCandidate& node, const CostRequest& request);

// The score above.
double Score(const PredictedCost& cost, const PlacementOptions& options);

// What a handoff's KV transfer adds to the TTFT, at `us_per_token` on the link: the prefill node
// sends the blocks of the prompt the decode node lacks (it skips the `decode_cached` prefix), the
// last chunk's once the prefill ends, the rest (earlier chunks, and the prefix the prefill node
// had cached, `prefill_cached`) while it computes the chunks before the last, its queue left out:
//   exposed = max(0, (missing − after) · us_per_token − compute before the last chunk)
//             + after · us_per_token,       after = min(missing, the last chunk's tokens)
// A conversation's next turn sent to a decode node that does not hold the first (whose prefix
// the prefill node holds) thus pays the transfer of the whole history, not of the new part.
double ExposedTransferUs(const NodeCandidate& prefill, const StepCost& prefill_price,
                         int64_t prefill_cached, int64_t decode_cached, int64_t prompt_tokens,
                         double us_per_token);

// Disaggregated: prefill on `prefill`, decode on `decode`; the TTFT adds the handoff's hops and
// the exposed KV transfer (ExposedTransferUs; PlacementOptions::disaggregation_hop_us,
// kv_bytes_per_token, kv_link_gbps).
PredictedCost PredictDisaggregated(const NodeCandidate& prefill, const StepCost& prefill_price,
                                   const NodeCandidate& decode, const StepCost& decode_price,
                                   const CostRequest& request, const PlacementOptions& options);
// Prefill and decode on `decode` (local prefill, or colocated), reusing its cached prefix; prompt
// tokens priced at `prompt_token_us` (LocalPromptTokenUs).
PredictedCost PredictLocal(const NodeCandidate& decode, const StepCost& price,
                           double prompt_token_us, const CostRequest& request,
                           const PlacementOptions& options);

}  // namespace tandem

#endif  // TANDEM_ROUTER_PLACEMENT_COST_H_
