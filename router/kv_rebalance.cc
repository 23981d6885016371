#include "router/kv_rebalance.h"

#include <algorithm>

namespace tandem {
namespace {

int64_t BlocksFor(int64_t tokens, int32_t block_size) {
  const int64_t bs = std::max<int32_t>(block_size, 1);
  return (tokens + bs - 1) / bs;
}

bool Full(const RebalanceNode& n, const RebalanceOptions& o) {
  if (n.num_kv_blocks <= 0) return false;
  const bool low = static_cast<double>(n.num_free_kv_blocks) <
                   o.full_free_fraction * static_cast<double>(n.num_kv_blocks);
  return low && n.num_running + n.num_waiting > 1;
}

}  // namespace

std::vector<RebalanceMove> PlanKvRebalance(std::span<const RebalanceNode> nodes,
                                           std::span<const RebalanceStream> streams,
                                           const RebalanceOptions& options) {
  std::vector<RebalanceMove> moves;
  // Free blocks of each node after this round's moves into it.
  std::vector<int64_t> free(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) free[i] = nodes[i].num_free_kv_blocks;
  for (const RebalanceNode& from : nodes) {
    if (!Full(from, options)) continue;
    // The stream on it holding the most KV.
    const RebalanceStream* pick = nullptr;
    for (const RebalanceStream& s : streams) {
      if (s.node != from.address || !s.movable || s.moves >= options.max_moves_per_stream) {
        continue;
      }
      if (pick == nullptr || s.kv_tokens > pick->kv_tokens) pick = &s;
    }
    if (pick == nullptr) continue;
    // The destination with the most free blocks that stays roomy after taking it.
    int best = -1;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const RebalanceNode& to = nodes[i];
      if (to.address == from.address || to.num_kv_blocks <= 0 || Full(to, options)) continue;
      const double total = static_cast<double>(to.num_kv_blocks);
      const int64_t after = free[i] - BlocksFor(pick->kv_tokens + 1, to.block_size);
      if (static_cast<double>(free[i]) <= options.roomy_free_fraction * total) continue;
      if (static_cast<double>(after) < options.roomy_free_fraction / 2 * total) continue;
      if (best < 0 || free[i] > free[best]) best = static_cast<int>(i);
    }
    if (best < 0) continue;
    free[best] -= BlocksFor(pick->kv_tokens + 1, nodes[best].block_size);
    moves.push_back({pick->key, from.address, nodes[best].address});
  }
  return moves;
}

}  // namespace tandem
