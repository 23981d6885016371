// Where a request runs: the decode node D, and the prefill node P or prefill on D itself.
// Pure decision logic over snapshots of the nodes that are up; no RPCs, no clocks.
//
// Policies (which node of a role):
//   round_robin   each role in turn over the nodes that are up
//   least_loaded  D colocated: fewest queued prompt tokens, then most free KV blocks less those
//                 its queued prompts will take (NodeCandidate::waiting_blocks), then fewest
//                 sequences; D otherwise: those free blocks, then queued tokens, then sequences;
//                 P: fewest queued prompt tokens, then fewest sequences, then most free blocks
//   prefix_aware  P: the longest cached prefix of the prompt (from the prefill nodes' KvEvents),
//                 ties by load as least_loaded; D as least_loaded
//   cost          the cost model (placement_cost.h): every option (disaggregated on the prefill
//                 node with the shortest predicted TTFT, or prefill on the decode node itself,
//                 considered only while that node keeps TPOT headroom) on every decode node is
//                 scored by its predicted TTFT and TPOT against the SLO targets, its effect on
//                 the decode node's running sequences included; the best wins, one at random
//                 among those within 0.5% of the part of its score that is its own. The execution
//                 choice is the model's, not local_prefill_threshold's, once the nodes report their
//                 price of a step; before that, nodes are ranked with a nominal price (queued
//                 tokens and sequences) and the threshold rule decides
// Modes:
//   disaggregated D reserves, P prefills, except (conditional disaggregation) when the prompt's
//                 uncached part on the chosen P is shorter than local_prefill_threshold tokens,
//                 or when no prefill node is up: then D prefills locally
//   colocated     D prefills and decodes (DecodeNode.Generate); prefill nodes are not used
//   auto          every node serves both roles (the caller passes the same nodes as prefill and
//                 decode candidates): as disaggregated, except that a node is never its own
//                 prefill node (a candidate in both lists with D's address is D itself: the
//                 prefill goes to another node, or is local when there is none)
#ifndef TANDEM_ROUTER_PLACEMENT_H_
#define TANDEM_ROUTER_PLACEMENT_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/types/step_cost.h"

namespace tandem {

enum class PlacementPolicy { kRoundRobin, kLeastLoaded, kPrefixAware, kCost };
enum class ServingMode { kDisaggregated, kColocated, kAuto };

std::optional<PlacementPolicy> ParsePlacementPolicy(std::string_view name);
std::string_view PlacementPolicyName(PlacementPolicy policy);
std::optional<ServingMode> ParseServingMode(std::string_view name);
std::string_view ServingModeName(ServingMode mode);
// The KV blocks `queued_tokens` waiting prompt tokens take once scheduled, in blocks of
// `block_size` tokens (16 when the node reports none).
int64_t WaitingBlocks(int64_t queued_tokens, int32_t block_size);

struct PlacementOptions {
  // The cost model: placement_study.py finds it never below the better of pure colocated and
  // pure disaggregated under any fixed policy (README: Placement: the cost policy).
  PlacementPolicy policy = PlacementPolicy::kCost;
  ServingMode mode = ServingMode::kDisaggregated;
  // Disaggregated mode: prompts whose uncached part is shorter than this prefill on D.
  // 0: never (unless no prefill node is up).
  int64_t local_prefill_threshold = 0;
  // The latency targets the cost model (PlacementPolicy::kCost) places against: time to first
  // token and time per output token, in milliseconds.
  double slo_ttft_ms = 2000;
  double slo_tpot_ms = 100;
  // What the cost model adds to a disaggregated TTFT: the extra hops of the handoff (decode node
  // → router → prefill node), and the exposed part of the KV the decode node lacks crossing the
  // link (ExposedTransferUs: the last chunk's after the prefill ends, the rest as far as it
  // outlasts the compute before it): its bytes per token (the prefill node's report,
  // NodeCandidate::kv_bytes_per_token, else this) over the link's rate. 0: not counted.
  double disaggregation_hop_us = 0;
  double kv_bytes_per_token = 0;
  double kv_link_gbps = 0;
  // Seeds the cost model's choice among near-equal candidates (so router replicas, each seeded
  // differently, do not herd onto the same node).
  uint64_t seed = 0;
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
  // The cost model's inputs (PlacementPolicy::kCost), from the node's load report; zero when
  // the node does not report them.
  StepCost step_cost;              // the node's learnt price of a step (step_cost.h)
  int64_t num_running = 0;         // sequences in the running batch
  int64_t context_tokens = 0;      // KV tokens of the running and waiting sequences (+ pending)
  int64_t max_batched_tokens = 0;  // tokens one step computes at most (the chunk budget)
  int64_t max_num_seqs = 0;        // sequences one step runs at most (0: unknown)
  int64_t num_kv_blocks = 0;       // the pool
  int32_t block_size = 0;
  int64_t kv_bytes_per_token = 0;  // KV one token occupies here (0: unknown)
  // The blocks the node's waiting prompts will take once scheduled, by its load report
  // (WaitingBlocks): free_kv_blocks still counts them as free, for a waiting prompt holds no
  // blocks yet. What this router placed since the report is in free_kv_blocks already (its
  // prompt and output blocks). least_loaded ranks decode nodes by free blocks less these.
  int64_t waiting_blocks = 0;
  // When this router last placed a request here, on any clock that orders its placements (0 or
  // less: never). The cost policy's tie-break: of equally priced nodes, the least recently used.
  int64_t last_placed_ns = 0;
};

enum class PlacementKind { kDisaggregated, kLocalPrefill, kColocated };
std::string_view PlacementKindName(PlacementKind kind);

// Why a placement was chosen.
enum class PlacementReason {
  kDisaggregated,  // a prefill node takes the prompt
  kColocated,      // the router runs in colocated mode
  kShortPrompt,    // under the local-prefill threshold: the decode node prefills
  kNoPrefillNode,  // no prefill node is up: the decode node prefills
  kCheaperLocal,   // the cost model predicts prefill on the decode node does better
  kMigration,      // a migrated request: the decode node recomputes prompt + the tokens so far
                   // (set by the request's flow, never by the Placer)
};
// "disaggregated", "colocated", "short_prompt", "no_prefill_node", "cheaper_local", "migration"
// (logs, metrics).
std::string_view PlacementReasonName(PlacementReason reason);

struct Placement {
  PlacementKind kind = PlacementKind::kDisaggregated;
  int decode = -1;   // NodeCandidate::index
  int prefill = -1;  // NodeCandidate::index; -1 unless kDisaggregated
  // The chosen prefill node's cached prefix (also when the decision went local).
  int64_t cached_prefix_tokens = 0;
  // The chosen decode node's cached prefix, as the candidate said (a local prefill computes only
  // the rest).
  int64_t decode_cached_prefix_tokens = 0;
  PlacementReason reason = PlacementReason::kDisaggregated;
};

class Placer {
 public:
  explicit Placer(PlacementOptions options) : options_(options) {}

  // `prefill` may be empty; `decode` must not be (Unavailable otherwise). Thread-safe.
  absl::StatusOr<Placement> Choose(std::span<const NodeCandidate> prefill,
                                   std::span<const NodeCandidate> decode,
                                   int64_t prompt_tokens) const;
  // As above; the cost policy also weighs the request's output length (0: unknown).
  absl::StatusOr<Placement> Choose(std::span<const NodeCandidate> prefill,
                                   std::span<const NodeCandidate> decode, int64_t prompt_tokens,
                                   int64_t max_tokens) const;

  const PlacementOptions& options() const { return options_; }

 private:
  const NodeCandidate& PickDecode(std::span<const NodeCandidate> decode) const;
  const NodeCandidate& PickPrefill(std::span<const NodeCandidate> prefill) const;
  Placement ChooseByCost(std::span<const NodeCandidate> prefill,
                         std::span<const NodeCandidate> decode, int64_t prompt_tokens,
                         int64_t max_tokens) const;
  // One of `n` options, uniformly, from the seeded sequence.
  size_t RandomIndex(size_t n) const;

  const PlacementOptions options_;
  mutable std::atomic<uint64_t> next_decode_{0};
  mutable std::atomic<uint64_t> next_prefill_{0};
  mutable std::atomic<uint64_t> draws_{0};
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_PLACEMENT_H_
