#include "router/auto_mode.h"

#include <algorithm>

namespace tandem {

int64_t PrefillHeldBlocks(const NodeCandidate& node, int64_t prompt_tokens,
                          int32_t default_block_size) {
  const int64_t block_size = node.block_size > 0 ? node.block_size : default_block_size;
  const int64_t cached = std::clamp<int64_t>(node.cached_prefix_tokens, 0, prompt_tokens);
  return (prompt_tokens + block_size - 1) / block_size - cached / block_size;
}

bool HasRoomToPrefill(const NodeCandidate& node, int64_t prompt_tokens,
                      int32_t default_block_size) {
  return node.free_kv_blocks >= PrefillHeldBlocks(node, prompt_tokens, default_block_size);
}

}  // namespace tandem
