// Where a request runs: the decode node D, and the prefill node P or prefill on D itself.
// Pure decision logic over snapshots of the nodes that are up; no RPCs, no clocks.
//
// Policies (which node of a role):
//   round_robin   each role in turn over the nodes that are up
//   least_loaded  D: most free KV blocks, then fewest queued tokens, then fewest sequences;
//                 P: fewest queued prompt tokens, then fewest sequences, then most free blocks
//   prefix_aware  P: the longest cached prefix of the prompt (from the prefill nodes' KvEvents),
//                 ties by load as least_loaded; D as least_loaded
// Modes:
//   disaggregated D reserves, P prefills, except (conditional disaggregation) when the prompt's
//                 uncached part on the chosen P is shorter than local_prefill_threshold tokens,
//                 or when no prefill node is up: then D prefills locally
//   colocated     D prefills and decodes (DecodeNode.Generate); prefill nodes are not used
#ifndef TANDEM_ROUTER_PLACEMENT_H_
#define TANDEM_ROUTER_PLACEMENT_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tandem {

enum class PlacementPolicy { kRoundRobin, kLeastLoaded, kPrefixAware };
enum class ServingMode { kDisaggregated, kColocated };

std::optional<PlacementPolicy> ParsePlacementPolicy(std::string_view name);
std::string_view PlacementPolicyName(PlacementPolicy policy);
std::optional<ServingMode> ParseServingMode(std::string_view name);
std::string_view ServingModeName(ServingMode mode);

struct PlacementOptions {
  PlacementPolicy policy = PlacementPolicy::kPrefixAware;
  ServingMode mode = ServingMode::kDisaggregated;
  // Disaggregated mode: prompts whose uncached part is shorter than this prefill on D.
  // 0: never (unless no prefill node is up).
  int64_t local_prefill_threshold = 0;
};

// One node that is up, as placement sees it.
struct NodeCandidate {
  int index = 0;  // the caller's index of the node
  std::string address;
  int64_t free_kv_blocks = 0;
  int64_t queued_tokens = 0;
  int64_t num_sequences = 0;  // running + waiting (+ awaiting KV)
  // Prefill nodes: leading prompt tokens this node's prefix cache holds.
  int64_t cached_prefix_tokens = 0;
};

enum class PlacementKind { kDisaggregated, kLocalPrefill, kColocated };
std::string_view PlacementKindName(PlacementKind kind);

// Why a placement was chosen.
enum class PlacementReason {
  kDisaggregated,  // a prefill node takes the prompt
  kColocated,      // the router runs in colocated mode
  kShortPrompt,    // under the local-prefill threshold: the decode node prefills
  kNoPrefillNode,  // no prefill node is up: the decode node prefills
  kMigration,      // a migrated request: the decode node recomputes prompt + the tokens so far
                   // (set by the request's flow, never by the Placer)
};
// "disaggregated", "colocated", "short_prompt", "no_prefill_node", "migration" (logs, metrics).
std::string_view PlacementReasonName(PlacementReason reason);

struct Placement {
  PlacementKind kind = PlacementKind::kDisaggregated;
  int decode = -1;   // NodeCandidate::index
  int prefill = -1;  // NodeCandidate::index; -1 unless kDisaggregated
  // The chosen prefill node's cached prefix (also when the decision went local).
  int64_t cached_prefix_tokens = 0;
  PlacementReason reason = PlacementReason::kDisaggregated;
};

class Placer {
 public:
  explicit Placer(PlacementOptions options) : options_(options) {}

  // `prefill` may be empty; `decode` must not be (Unavailable otherwise). Thread-safe.
  absl::StatusOr<Placement> Choose(std::span<const NodeCandidate> prefill,
                                   std::span<const NodeCandidate> decode,
                                   int64_t prompt_tokens) const;

  const PlacementOptions& options() const { return options_; }

 private:
  const NodeCandidate& PickDecode(std::span<const NodeCandidate> decode) const;
  const NodeCandidate& PickPrefill(std::span<const NodeCandidate> prefill) const;

  const PlacementOptions options_;
  mutable std::atomic<uint64_t> next_decode_{0};
  mutable std::atomic<uint64_t> next_prefill_{0};
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_PLACEMENT_H_
