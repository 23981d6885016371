// The name of a full KV block in the prefix cache: XXH3-64 of its token ids, seeded with the name
// of the block before it (kRootBlockHash for the first), so equal tokens after different prefixes
// get different names. Shared by the block manager and by the router's prefix-aware placement.
#ifndef TANDEM_COMMON_KV_BLOCK_HASH_H_
#define TANDEM_COMMON_KV_BLOCK_HASH_H_

#include <cstdint>
#include <span>
#include <vector>

#include "common/types/dtype.h"

namespace tandem {

inline constexpr uint64_t kRootBlockHash = 0x74616e64656d6b76ULL;

uint64_t HashBlockTokens(uint64_t parent_hash, std::span<const TokenId> block_tokens);

// The chained names of the full blocks of `tokens` (a trailing partial block has none).
std::vector<uint64_t> HashFullBlocks(std::span<const TokenId> tokens, int32_t block_size);

}  // namespace tandem

#endif  // TANDEM_COMMON_KV_BLOCK_HASH_H_
