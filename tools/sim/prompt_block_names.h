// A prompt's chained block names (block_hash.h), computed once and only as far as asked: tandem-sim
// prices every node for every request, and each node's cached prefix needs the names up to its
// first miss. Without this every node named the prompt's blocks again.
#ifndef TANDEM_TOOLS_SIM_PROMPT_BLOCK_NAMES_H_
#define TANDEM_TOOLS_SIM_PROMPT_BLOCK_NAMES_H_

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "common/kv/block_hash.h"
#include "common/types/dtype.h"

namespace tandem::sim {

class PromptBlockNames {
 public:
  // `tokens` must outlive this; `block_size` >= 1.
  PromptBlockNames(std::span<const TokenId> tokens, int32_t block_size)
      : tokens_(tokens), block_size_(block_size) {}

  // The names computed so far: blocks [0, names().size()).
  std::span<const uint64_t> names() const { return names_; }
  // Whether every full block that a cache lookup can use is named (the last token is never
  // served from cache, so a block that ends on it is not).
  bool complete() const { return names_.size() >= UsableBlocks(); }
  // Names more blocks: twice as many as so far, at least 8, at most the usable ones.
  void Extend() {
    const size_t want = std::min(UsableBlocks(), std::max<size_t>(8, 2 * names_.size()));
    uint64_t parent = names_.empty() ? kRootBlockHash : names_.back();
    for (size_t i = names_.size(); i < want; ++i) {
      parent = HashBlockTokens(parent, tokens_.subspan(i * block_size_, block_size_));
      names_.push_back(parent);
    }
  }

 private:
  size_t UsableBlocks() const { return tokens_.empty() ? 0 : (tokens_.size() - 1) / block_size_; }

  std::span<const TokenId> tokens_;
  size_t block_size_;
  std::vector<uint64_t> names_;
};

}  // namespace tandem::sim

#endif  // TANDEM_TOOLS_SIM_PROMPT_BLOCK_NAMES_H_
