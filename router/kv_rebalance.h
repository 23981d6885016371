// Live KV migration to relieve a full decode node (README: Live KV migration): which streams to
// move, decided from the decode nodes' load reports and the streams this router runs on them.
// Pure decision logic over snapshots; no RPCs, no clocks. RequestRunner runs it every
// --kv-rebalance-interval-ms and asks each chosen stream's node to pause it; the move itself is the
// stream's flow's (request_flow.h).
//
// A node is full when under `full_free_fraction` of its KV blocks are free and it has more than
// one stream (a preemption is near, or it already preempted: requests wait). A destination has
// room when over `roomy_free_fraction` of its blocks are free and, after taking the stream's KV
// and what this round already sends it, still `roomy_free_fraction` / 2. Per full node, per
// round, the stream holding the most KV moves (it frees the most), to the destination with the
// most free blocks; streams already moving, or moved `max_moves_per_stream` times, stay.
#ifndef TANDEM_ROUTER_KV_REBALANCE_H_
#define TANDEM_ROUTER_KV_REBALANCE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tandem {

struct RebalanceOptions {
  double full_free_fraction = 0.05;
  double roomy_free_fraction = 0.25;
  int max_moves_per_stream = 1;
};

// One decode node that is up and not draining, from its last load report.
struct RebalanceNode {
  std::string address;
  int64_t num_kv_blocks = 0;
  int64_t num_free_kv_blocks = 0;
  int32_t block_size = 16;
  int64_t num_running = 0;
  int64_t num_waiting = 0;
};

// One stream this router runs on a decode node.
struct RebalanceStream {
  uint64_t key = 0;  // the caller's name for it
  std::string node;  // the decode node's address
  int64_t kv_tokens = 0;
  int moves = 0;        // live moves and migrations so far
  bool movable = true;  // false while it is moving, or not streaming yet
};

struct RebalanceMove {
  uint64_t key = 0;
  std::string from;
  std::string to;
};

std::vector<RebalanceMove> PlanKvRebalance(std::span<const RebalanceNode> nodes,
                                           std::span<const RebalanceStream> streams,
                                           const RebalanceOptions& options);

}  // namespace tandem

#endif  // TANDEM_ROUTER_KV_REBALANCE_H_
