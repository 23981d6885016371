#include "router/placement.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "router/placement_cost.h"

namespace tandem {
namespace {

// Smaller is better. A colocated node prefills every prompt it is given, so its queue of prompt
// tokens comes first, as a prefill node's; a decode node in a disaggregated (or auto) cluster
// mostly holds reservations, so its free blocks come first. Either way the free blocks are less
// those the node's queued prompts will take: a waiting prompt holds none, so by free blocks alone
// (both modes' key until 2026-11-28) the colocated node with the longer queue looked the less
// loaded, kept being chosen, and which node ran away hung on a poll's timing (tandem-sim, random
// 1024->128 on 2 colocated nodes at 80 req/s: TTFT p90 335-672 ms over load-poll periods of
// 44-56 ms; now 331-338 ms, and at 55 req/s 108-146 -> 67-77 ms, round_robin's 67 ms on these
// equal requests; tools/sim/README.md, "Validation").
auto DecodeLoadKey(const NodeCandidate& n, bool colocated) {
  const int64_t free_after_queue = n.free_kv_blocks - n.waiting_blocks;
  return colocated ? std::make_tuple(n.queued_tokens, -free_after_queue, n.num_sequences,
                                     std::string_view(n.address))
                   : std::make_tuple(-free_after_queue, n.queued_tokens, n.num_sequences,
                                     std::string_view(n.address));
}

auto PrefillLoadKey(const NodeCandidate& n) {
  return std::make_tuple(n.queued_tokens, n.num_sequences, -n.free_kv_blocks,
                         std::string_view(n.address));
}

// Options within this share of the best one's own part of its score are equal to it.
constexpr double kNearEqual = 0.005;

// Prefill on a decode node is considered only while the node's predicted TPOT, the prefill's
// stall included, stays under this share of the target: the model sees one request's stall,
// not the run of them a busy prefill pool would send a decode node, nor the tail of TPOT.
constexpr double kLocalTpotHeadroom = 0.8;

// A price that ranks nodes by load before any node reports one: a microsecond per queued
// token and per sequence, nothing per step or per KV token.
constexpr StepCost kNominalPrice{.per_step_us = 0, .per_token_us = 1, .samples = 1};

// See ChooseByCost: whether a local prefill may compete with the disaggregated option `split`
// for a prompt of `prompt_tokens` of which the decode node holds `held`.
bool LocalPrefillPays(const PredictedCost& split, double ttft_limit_us, double tpot_limit_us,
                      int64_t held, int64_t prompt_tokens) {
  const bool ttft_binds = split.ttft_us / ttft_limit_us >=
                          std::max(split.tpot_us, split.others_tpot_us) / tpot_limit_us;
  return ttft_binds || 2 * held >= prompt_tokens;
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

int64_t WaitingBlocks(int64_t queued_tokens, int32_t block_size) {
  const int64_t block = block_size > 0 ? block_size : 16;
  return (std::max<int64_t>(0, queued_tokens) + block - 1) / block;
}

std::optional<PlacementPolicy> ParsePlacementPolicy(std::string_view name) {
  if (name == "round_robin") return PlacementPolicy::kRoundRobin;
  if (name == "least_loaded") return PlacementPolicy::kLeastLoaded;
  if (name == "prefix_aware") return PlacementPolicy::kPrefixAware;
  if (name == "cost") return PlacementPolicy::kCost;
  return std::nullopt;
}

std::string_view PlacementPolicyName(PlacementPolicy policy) {
  switch (policy) {
    case PlacementPolicy::kRoundRobin:
      return "round_robin";
    case PlacementPolicy::kLeastLoaded:
      return "least_loaded";
    case PlacementPolicy::kPrefixAware:
      return "prefix_aware";
    case PlacementPolicy::kCost:
      return "cost";
  }
  return "?";
}

std::optional<ServingMode> ParseServingMode(std::string_view name) {
  if (name == "disaggregated") return ServingMode::kDisaggregated;
  if (name == "colocated") return ServingMode::kColocated;
  if (name == "auto") return ServingMode::kAuto;
  return std::nullopt;
}

std::string_view ServingModeName(ServingMode mode) {
  switch (mode) {
    case ServingMode::kDisaggregated:
      return "disaggregated";
    case ServingMode::kColocated:
      return "colocated";
    case ServingMode::kAuto:
      return "auto";
  }
  return "?";
}

std::string_view PlacementReasonName(PlacementReason reason) {
  switch (reason) {
    case PlacementReason::kDisaggregated:
      return "disaggregated";
    case PlacementReason::kColocated:
      return "colocated";
    case PlacementReason::kShortPrompt:
      return "short_prompt";
    case PlacementReason::kNoPrefillNode:
      return "no_prefill_node";
    case PlacementReason::kCheaperLocal:
      return "cheaper_local";
    case PlacementReason::kMigration:
      return "migration";
  }
  return "?";
}

std::string_view PlacementKindName(PlacementKind kind) {
  switch (kind) {
    case PlacementKind::kDisaggregated:
      return "disaggregated";
    case PlacementKind::kLocalPrefill:
      return "local_prefill";
    case PlacementKind::kColocated:
      return "colocated";
  }
  return "?";
}

const NodeCandidate& Placer::PickDecode(std::span<const NodeCandidate> decode) const {
  if (options_.policy == PlacementPolicy::kRoundRobin) {
    return decode[next_decode_.fetch_add(1, std::memory_order_relaxed) % decode.size()];
  }
  const bool colocated = options_.mode == ServingMode::kColocated;
  return *std::min_element(decode.begin(), decode.end(),
                           [colocated](const NodeCandidate& a, const NodeCandidate& b) {
                             return DecodeLoadKey(a, colocated) < DecodeLoadKey(b, colocated);
                           });
}

const NodeCandidate& Placer::PickPrefill(std::span<const NodeCandidate> prefill) const {
  switch (options_.policy) {
    case PlacementPolicy::kRoundRobin:
      return prefill[next_prefill_.fetch_add(1, std::memory_order_relaxed) % prefill.size()];
    case PlacementPolicy::kLeastLoaded:
      return *std::min_element(prefill.begin(), prefill.end(),
                               [](const NodeCandidate& a, const NodeCandidate& b) {
                                 return PrefillLoadKey(a) < PrefillLoadKey(b);
                               });
    case PlacementPolicy::kPrefixAware:
    case PlacementPolicy::kCost:
      break;
  }
  return *std::min_element(prefill.begin(), prefill.end(),
                           [](const NodeCandidate& a, const NodeCandidate& b) {
                             return std::make_tuple(-a.cached_prefix_tokens, PrefillLoadKey(a)) <
                                    std::make_tuple(-b.cached_prefix_tokens, PrefillLoadKey(b));
                           });
}

size_t Placer::RandomIndex(size_t n) const {
  const uint64_t draw = draws_.fetch_add(1, std::memory_order_relaxed);
  return static_cast<size_t>(SplitMix64(options_.seed ^ SplitMix64(draw)) % n);
}

Placement Placer::ChooseByCost(std::span<const NodeCandidate> prefill,
                               std::span<const NodeCandidate> decode, int64_t prompt_tokens,
                               int64_t max_tokens) const {
  const CostRequest request{.prompt_tokens = prompt_tokens, .max_tokens = max_tokens};
  auto price = [](const NodeCandidate& n, std::span<const NodeCandidate> pool) {
    const StepCost p = PriceOf(n, pool);
    return p.known() ? p : kNominalPrice;
  };
  // Picks one of the options whose score is within kNearEqual of the part of the best score
  // that differs between them (`spread`: all of a prefill node's TTFT; a decode node's TPOT
  // ratio, and its TTFT ratio when it prefills), among those that fit when any does; of those,
  // the ones whose node holds the longest prefix of the prompt (`held`: fewer KV blocks to
  // compute or send, fewer taken from the pool), then the one this router used least recently
  // (`last_placed`), then one at random. Least recently used, not at random: a load report does
  // not say how far a node is into the step it runs, so a node just given a prompt and one about
  // to finish price the next prompt the same, and a random pick among them queued prompts behind
  // fresh ones (64 H100s, 19 TP2 prefill + 3 TP8 decode nodes, 2k prompts at 78 req/s: TTFT p50
  // 334 ms at random, 271 ms least recently used, as round_robin, whose turns do the same).
  auto pick = [this](const std::vector<double>& scores, const std::vector<double>& spread,
                     const std::vector<bool>& fits, const std::vector<int64_t>& held,
                     std::span<const NodeCandidate> nodes) {
    const bool any_fits = std::find(fits.begin(), fits.end(), true) != fits.end();
    size_t best = scores.size();
    for (size_t i = 0; i < scores.size(); ++i) {
      if ((fits[i] || !any_fits) && (best == scores.size() || scores[i] < scores[best])) best = i;
    }
    auto rank = [&](size_t i) { return std::pair(-held[i], nodes[i].last_placed_ns); };
    std::vector<size_t> near;
    for (size_t i = 0; i < scores.size(); ++i) {
      if (!(fits[i] || !any_fits) || scores[i] > scores[best] + kNearEqual * spread[best]) continue;
      if (!near.empty() && rank(i) < rank(near[0])) near.clear();
      if (near.empty() || rank(i) == rank(near[0])) near.push_back(i);
    }
    return near.size() == 1 ? near[0] : near[RandomIndex(near.size())];
  };

  Placement placement;
  const bool colocated = options_.mode == ServingMode::kColocated;
  // The prefill node: the shortest predicted time to the prompt's last token. `second` is the
  // best of the others, for the decode node that is `first` itself (a node in both pools: there
  // the split option is the other node's prefill; its own is the local option).
  const NodeCandidate* first = nullptr;
  const NodeCandidate* second = nullptr;
  std::vector<double> prefill_ttft;
  std::vector<int64_t> prefill_held;
  if (!colocated && !prefill.empty()) {
    for (const NodeCandidate& n : prefill) {
      const int64_t cached = std::min(n.cached_prefix_tokens, prompt_tokens);
      const StepCost n_price = price(n, prefill);
      prefill_ttft.push_back(
          PrefillTimeUs(n, n_price, n_price.per_token_us, cached, prompt_tokens - cached, false));
      prefill_held.push_back(cached);
    }
    const size_t f = pick(prefill_ttft, prefill_ttft, std::vector<bool>(prefill.size(), true),
                          prefill_held, prefill);
    first = &prefill[f];
    for (size_t i = 0; i < prefill.size(); ++i) {
      if (i != f && (second == nullptr || prefill_ttft[i] < prefill_ttft[second - &prefill[0]])) {
        second = &prefill[i];
      }
    }
  }
  // The prefill pool's price, as the stand-in price of a prompt token on a decode node
  // (LocalPromptTokenUs); unknown while no prefill node reports one.
  const StepCost pool_price = first != nullptr ? PriceOf(*first, prefill) : StepCost{};
  const int64_t pool_chunk = first != nullptr ? first->max_batched_tokens : 0;
  // Each decode node, with its best option; the execution choice is the model's only when
  // both pools report prices (else the threshold rule's).
  const bool priced = PriceOf(decode.front(), decode).known() &&
                      (first == nullptr || PriceOf(*first, prefill).known());
  const bool threshold_local =
      first != nullptr && prompt_tokens - std::min(first->cached_prefix_tokens, prompt_tokens) <
                              options_.local_prefill_threshold;
  std::vector<double> scores, spread;
  std::vector<bool> local, fits;
  std::vector<const NodeCandidate*> split_on;
  std::vector<int64_t> held;
  const double ttft_limit_us = options_.slo_ttft_ms * 1000;
  const double tpot_limit_us = options_.slo_tpot_ms * 1000;
  for (const NodeCandidate& d : decode) {
    const StepCost d_price = price(d, decode);
    const NodeCandidate* p = first != nullptr && first->address == d.address ? second : first;
    std::optional<PredictedCost> at_d, split;
    if (p == nullptr || priced || threshold_local) {
      at_d = PredictLocal(d, d_price, LocalPromptTokenUs(d_price, pool_price, pool_chunk), request,
                          options_);
      // With a prefill pool to go to, only a decode node with TPOT headroom and a free batch
      // slot prefills locally (at its max_num_seqs, the prompt would wait for a sequence to
      // end, which the model does not price).
      const bool slot = d.max_num_seqs <= 0 || d.num_sequences < d.max_num_seqs;
      if (p != nullptr && priced &&
          (at_d->others_tpot_us > kLocalTpotHeadroom * tpot_limit_us || !slot)) {
        at_d.reset();
      }
    }
    if (p != nullptr && (priced || !threshold_local)) {
      split = PredictDisaggregated(*p, price(*p, prefill), d, d_price, request, options_);
    }
    // A local prefill buys TTFT with the decode batch's TPOT: its steps stall every running
    // sequence while the prompt is computed, which the model spreads over the request's tokens
    // but the SLO's percentile sees whole. So it is an option only where TTFT is what limits the
    // disaggregated one, or where the decode node holds at least half the prompt (a
    // conversation's next turn: a short prefill, and no transfer of what it holds).
    if (at_d.has_value() && split.has_value() && priced &&
        !LocalPrefillPays(*split, ttft_limit_us, tpot_limit_us,
                          std::min(d.cached_prefix_tokens, prompt_tokens), prompt_tokens)) {
      at_d.reset();
    }
    // Ties go to the disaggregated option: it keeps the decode node's steps short.
    const bool best_local = !split.has_value() || (at_d.has_value() && at_d->score < split->score);
    const PredictedCost& c = best_local ? *at_d : *split;
    scores.push_back(c.score);
    spread.push_back(std::max(c.tpot_us, c.others_tpot_us) / tpot_limit_us +
                     (best_local ? c.ttft_us / ttft_limit_us : 0));
    local.push_back(best_local);
    split_on.push_back(best_local ? nullptr : p);
    fits.push_back(HasRoomFor(d, request));
    held.push_back(std::min(d.cached_prefix_tokens, prompt_tokens));
  }
  const size_t chosen = pick(scores, spread, fits, held, decode);
  placement.decode = decode[chosen].index;
  placement.decode_cached_prefix_tokens =
      std::min(decode[chosen].cached_prefix_tokens, prompt_tokens);
  const NodeCandidate* p = split_on[chosen];
  if (p == nullptr && first != nullptr) {
    p = first->address == decode[chosen].address ? second : first;
  }
  if (p != nullptr)
    placement.cached_prefix_tokens = std::min(p->cached_prefix_tokens, prompt_tokens);
  if (colocated) {
    placement.kind = PlacementKind::kColocated;
    placement.reason = PlacementReason::kColocated;
  } else if (p == nullptr) {
    placement.kind = PlacementKind::kLocalPrefill;
    placement.reason = PlacementReason::kNoPrefillNode;
  } else if (local[chosen]) {
    placement.kind = PlacementKind::kLocalPrefill;
    placement.reason = priced ? PlacementReason::kCheaperLocal : PlacementReason::kShortPrompt;
  } else {
    placement.kind = PlacementKind::kDisaggregated;
    placement.prefill = p->index;
    placement.reason = PlacementReason::kDisaggregated;
  }
  return placement;
}

absl::StatusOr<Placement> Placer::Choose(std::span<const NodeCandidate> prefill,
                                         std::span<const NodeCandidate> decode,
                                         int64_t prompt_tokens) const {
  return Choose(prefill, decode, prompt_tokens, 0);
}

absl::StatusOr<Placement> Placer::Choose(std::span<const NodeCandidate> prefill,
                                         std::span<const NodeCandidate> decode,
                                         int64_t prompt_tokens, int64_t max_tokens) const {
  if (decode.empty()) return absl::UnavailableError("no decode node is up");
  if (options_.policy == PlacementPolicy::kCost) {
    return ChooseByCost(prefill, decode, prompt_tokens, max_tokens);
  }
  Placement placement;
  const NodeCandidate& d = PickDecode(decode);
  placement.decode = d.index;
  if (options_.mode == ServingMode::kColocated) {
    placement.kind = PlacementKind::kColocated;
    placement.reason = PlacementReason::kColocated;
    return placement;
  }
  // A node in both pools is not its own prefill node (auto mode): the others are the pool.
  std::vector<NodeCandidate> others;
  const std::string& d_address = d.address;
  if (std::any_of(prefill.begin(), prefill.end(),
                  [&](const NodeCandidate& n) { return n.address == d_address; })) {
    for (const NodeCandidate& n : prefill) {
      if (n.address != d_address) others.push_back(n);
    }
    prefill = others;
  }
  if (prefill.empty()) {
    placement.kind = PlacementKind::kLocalPrefill;
    placement.reason = PlacementReason::kNoPrefillNode;
    return placement;
  }
  const NodeCandidate& p = PickPrefill(prefill);
  placement.cached_prefix_tokens = std::min(p.cached_prefix_tokens, prompt_tokens);
  if (prompt_tokens - placement.cached_prefix_tokens < options_.local_prefill_threshold) {
    placement.kind = PlacementKind::kLocalPrefill;
    placement.reason = PlacementReason::kShortPrompt;
    return placement;
  }
  placement.kind = PlacementKind::kDisaggregated;
  placement.prefill = p.index;
  placement.reason = PlacementReason::kDisaggregated;
  return placement;
}

}  // namespace tandem
