#include "router/placement_cost.h"

#include <algorithm>

namespace tandem {
namespace {

int64_t ChunkOf(const NodeCandidate& node) {
  return node.max_batched_tokens > 0 ? node.max_batched_tokens : kDefaultChunkTokens;
}

int64_t OutputOf(const CostRequest& request) {
  return request.max_tokens > 0 ? request.max_tokens : kDefaultOutputTokens;
}

// The KV the chunks of one prompt read: k chunks of `budget` tokens after `cached` ones read
// Σ_i (cached + the tokens computed through chunk i) = k·cached + budget·k(k−1)/2 + uncached.
double OwnPrefillReads(int64_t cached, int64_t uncached, int64_t budget) {
  if (uncached <= 0) return 0;
  const double k = static_cast<double>((uncached + budget - 1) / budget);
  return k * static_cast<double>(cached) + static_cast<double>(budget) * k * (k - 1) / 2 +
         static_cast<double>(uncached);
}

// The batch's step after admitting `added_sequences` holding `added_context` KV tokens.
double DecodeStepUs(const NodeCandidate& node, const StepCost& price, double added_sequences,
                    double added_context) {
  return price.StepUs(static_cast<double>(node.num_sequences) + added_sequences,
                      static_cast<double>(node.context_tokens) + added_context);
}

}  // namespace

StepCost PriceOf(const NodeCandidate& node, std::span<const NodeCandidate> pool) {
  if (node.step_cost.known()) return node.step_cost;
  StepCost mean;
  int known = 0;
  for (const NodeCandidate& n : pool) {
    if (!n.step_cost.known()) continue;
    mean.per_step_us += n.step_cost.per_step_us;
    mean.per_token_us += n.step_cost.per_token_us;
    mean.per_context_token_us += n.step_cost.per_context_token_us;
    ++known;
  }
  if (known == 0) return StepCost{};
  mean.per_step_us /= known;
  mean.per_token_us /= known;
  mean.per_context_token_us /= known;
  mean.samples = known;
  return mean;
}

namespace {

// PrefillTimeUs behind `queued` prompt tokens.
double PrefillBehindUs(const NodeCandidate& node, const StepCost& price, double prompt_token_us,
                       int64_t queued, int64_t cached, int64_t uncached, bool with_decode_batch) {
  const int64_t decoding = with_decode_batch ? node.num_running : 0;
  const double decode_context = with_decode_batch ? static_cast<double>(node.context_tokens) : 0;
  const int64_t budget = std::max<int64_t>(1, ChunkOf(node) - decoding);
  queued = std::max<int64_t>(0, queued);
  const int64_t work = queued + std::max<int64_t>(0, uncached);
  if (work == 0) return 0;
  const double steps = static_cast<double>((work + budget - 1) / budget);
  // The prompts queued ahead read their own KV too: at least each token's own position, as in a
  // first chunk. Left out, a node whose fit put its chunks' cost on the context term (a prefill
  // node sees only fresh chunks, whose tokens and context are the same count, so the fit cannot
  // tell the terms apart) looked idle behind any queue, and drew every prompt near it.
  return steps * price.StepUs(static_cast<double>(decoding), decode_context) +
         static_cast<double>(work) * prompt_token_us +
         (OwnPrefillReads(cached, uncached, budget) + static_cast<double>(queued)) *
             price.per_context_token_us;
}

}  // namespace

double PrefillTimeUs(const NodeCandidate& node, const StepCost& price, double prompt_token_us,
                     int64_t cached, int64_t uncached, bool with_decode_batch) {
  return PrefillBehindUs(node, price, prompt_token_us, node.queued_tokens, cached, uncached,
                         with_decode_batch);
}

double ExposedTransferUs(const NodeCandidate& prefill, const StepCost& prefill_price,
                         int64_t prefill_cached, int64_t decode_cached, int64_t prompt_tokens,
                         double us_per_token) {
  prefill_cached = std::clamp<int64_t>(prefill_cached, 0, prompt_tokens);
  const int64_t uncached = prompt_tokens - prefill_cached;
  const int64_t missing = prompt_tokens - std::clamp<int64_t>(decode_cached, 0, prompt_tokens);
  const int64_t last_chunk = uncached > 0 ? (uncached - 1) % ChunkOf(prefill) + 1 : 0;
  const int64_t after = std::min(missing, last_chunk);
  // What the prefill node computes before its last chunk, its queue left out: the KV sent then
  // became ready during it (the cached blocks with the first chunk).
  const double overlap_us = PrefillBehindUs(prefill, prefill_price, prefill_price.per_token_us, 0,
                                            prefill_cached, uncached - last_chunk, false);
  return std::max(0.0, static_cast<double>(missing - after) * us_per_token - overlap_us) +
         static_cast<double>(after) * us_per_token;
}

double DecodeTpotUs(const NodeCandidate& node, const StepCost& price, double prompt_token_us,
                    const CostRequest& request) {
  const double output = static_cast<double>(OutputOf(request));
  return DecodeStepUs(node, price, 1, static_cast<double>(request.prompt_tokens) + output / 2) +
         static_cast<double>(std::max<int64_t>(0, node.queued_tokens)) * prompt_token_us / output;
}

double CurrentTpotUs(const NodeCandidate& node, const StepCost& price) {
  if (node.num_sequences <= 0) return 0;
  return DecodeStepUs(node, price, 0, 0);
}

double LocalPromptTokenUs(const StepCost& price, const StepCost& prefill_price,
                          int64_t prefill_chunk) {
  if (!prefill_price.known()) return price.per_token_us;
  return std::max(price.per_token_us,
                  prefill_price.per_token_us + prefill_price.per_context_token_us +
                      prefill_price.per_step_us /
                          static_cast<double>(std::max<int64_t>(
                              1, prefill_chunk > 0 ? prefill_chunk : kDefaultChunkTokens)));
}

bool HasRoomFor(const NodeCandidate& node, const CostRequest& request) {
  const int64_t block_size = node.block_size > 0 ? node.block_size : 16;
  const int64_t tokens = request.prompt_tokens + OutputOf(request);
  return node.free_kv_blocks >= (tokens + block_size - 1) / block_size;
}

double Score(const PredictedCost& cost, const PlacementOptions& options) {
  const double ttft = cost.ttft_us / (std::max(options.slo_ttft_ms, 1e-3) * 1000);
  const double tpot =
      std::max(cost.tpot_us, cost.others_tpot_us) / (std::max(options.slo_tpot_ms, 1e-3) * 1000);
  // The worse ratio decides; the sum separates options whose worse ratio is the same (e.g. the
  // TTFT of one prefill node with every decode node), so that they do not look equal.
  return std::max(ttft, tpot) + kSumWeight * (ttft + tpot);
}

PredictedCost PredictDisaggregated(const NodeCandidate& prefill, const StepCost& prefill_price,
                                   const NodeCandidate& decode, const StepCost& decode_price,
                                   const CostRequest& request, const PlacementOptions& options) {
  const int64_t cached = std::min(prefill.cached_prefix_tokens, request.prompt_tokens);
  const int64_t uncached = request.prompt_tokens - cached;
  PredictedCost cost;
  cost.ttft_us =
      PrefillTimeUs(prefill, prefill_price, prefill_price.per_token_us, cached, uncached, false) +
      options.disaggregation_hop_us;
  const double kv_bytes_per_token = prefill.kv_bytes_per_token > 0
                                        ? static_cast<double>(prefill.kv_bytes_per_token)
                                        : options.kv_bytes_per_token;
  if (kv_bytes_per_token > 0 && options.kv_link_gbps > 0) {
    cost.ttft_us += ExposedTransferUs(prefill, prefill_price, cached, decode.cached_prefix_tokens,
                                      request.prompt_tokens,
                                      kv_bytes_per_token * 8 / (options.kv_link_gbps * 1e3));
  }
  cost.fits = HasRoomFor(decode, request);
  cost.tpot_us =
      DecodeTpotUs(decode, decode_price,
                   LocalPromptTokenUs(decode_price, prefill_price, ChunkOf(prefill)), request);
  cost.others_tpot_us =
      decode.num_sequences > 0
          ? DecodeStepUs(decode, decode_price, 1, static_cast<double>(request.prompt_tokens))
          : 0;
  cost.score = Score(cost, options);
  return cost;
}

PredictedCost PredictLocal(const NodeCandidate& decode, const StepCost& price,
                           double prompt_token_us, const CostRequest& request,
                           const PlacementOptions& options) {
  const int64_t cached = std::min(decode.cached_prefix_tokens, request.prompt_tokens);
  const int64_t uncached = request.prompt_tokens - cached;
  PredictedCost cost;
  cost.ttft_us = PrefillTimeUs(decode, price, prompt_token_us, cached, uncached, true);
  cost.fits = HasRoomFor(decode, request);
  cost.tpot_us = DecodeTpotUs(decode, price, prompt_token_us, request);
  if (decode.num_sequences > 0) {
    // The prefill's own work lengthens the steps the running sequences decode in.
    const int64_t budget = std::max<int64_t>(1, ChunkOf(decode) - decode.num_running);
    // ... as do the prompts already queued there, computed in the same steps.
    const double stall =
        static_cast<double>(uncached + std::max<int64_t>(0, decode.queued_tokens)) *
            prompt_token_us +
        OwnPrefillReads(cached, uncached, budget) * price.per_context_token_us;
    cost.others_tpot_us =
        DecodeStepUs(decode, price, 1, static_cast<double>(request.prompt_tokens)) +
        stall / static_cast<double>(OutputOf(request));
  }
  cost.score = Score(cost, options);
  return cost;
}

}  // namespace tandem
