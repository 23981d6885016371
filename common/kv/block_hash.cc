#include "common/kv/block_hash.h"

#include "xxhash.h"

namespace tandem {

uint64_t HashBlockTokens(uint64_t parent_hash, std::span<const TokenId> block_tokens) {
  return XXH3_64bits_withSeed(block_tokens.data(), block_tokens.size_bytes(), parent_hash);
}

std::vector<uint64_t> HashFullBlocks(std::span<const TokenId> tokens, int32_t block_size) {
  std::vector<uint64_t> hashes;
  if (block_size < 1) return hashes;
  uint64_t parent = kRootBlockHash;
  for (size_t start = 0; start + block_size <= tokens.size(); start += block_size) {
    parent = HashBlockTokens(parent, tokens.subspan(start, block_size));
    hashes.push_back(parent);
  }
  return hashes;
}

}  // namespace tandem
