#include "router/placement.h"

#include <algorithm>
#include <tuple>

namespace tandem {
namespace {

// Smaller is better.
auto DecodeLoadKey(const NodeCandidate& n) {
  return std::make_tuple(-n.free_kv_blocks, n.queued_tokens, n.num_sequences,
                         std::string_view(n.address));
}

auto PrefillLoadKey(const NodeCandidate& n) {
  return std::make_tuple(n.queued_tokens, n.num_sequences, -n.free_kv_blocks,
                         std::string_view(n.address));
}

}  // namespace

std::optional<PlacementPolicy> ParsePlacementPolicy(std::string_view name) {
  if (name == "round_robin") return PlacementPolicy::kRoundRobin;
  if (name == "least_loaded") return PlacementPolicy::kLeastLoaded;
  if (name == "prefix_aware") return PlacementPolicy::kPrefixAware;
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
  }
  return "?";
}

std::optional<ServingMode> ParseServingMode(std::string_view name) {
  if (name == "disaggregated") return ServingMode::kDisaggregated;
  if (name == "colocated") return ServingMode::kColocated;
  return std::nullopt;
}

std::string_view ServingModeName(ServingMode mode) {
  return mode == ServingMode::kColocated ? "colocated" : "disaggregated";
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
  return *std::min_element(decode.begin(), decode.end(),
                           [](const NodeCandidate& a, const NodeCandidate& b) {
                             return DecodeLoadKey(a) < DecodeLoadKey(b);
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
      break;
  }
  return *std::min_element(prefill.begin(), prefill.end(),
                           [](const NodeCandidate& a, const NodeCandidate& b) {
                             return std::make_tuple(-a.cached_prefix_tokens, PrefillLoadKey(a)) <
                                    std::make_tuple(-b.cached_prefix_tokens, PrefillLoadKey(b));
                           });
}

absl::StatusOr<Placement> Placer::Choose(std::span<const NodeCandidate> prefill,
                                         std::span<const NodeCandidate> decode,
                                         int64_t prompt_tokens) const {
  if (decode.empty()) return absl::UnavailableError("no decode node is up");
  Placement placement;
  placement.decode = PickDecode(decode).index;
  if (options_.mode == ServingMode::kColocated) {
    placement.kind = PlacementKind::kColocated;
    placement.reason = PlacementReason::kColocated;
    return placement;
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
