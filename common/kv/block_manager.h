// Paged KV block accounting: which pool blocks hold which sequence's positions, shared prefixes,
// and which freed blocks still hold reusable content.
//
// A sequence's KV lives in fixed-size blocks (KvLayout::block_size tokens each) listed in its
// BlockTable. Blocks are reference counted: sequences with a common prompt prefix share the blocks
// of that prefix. Prefix caching works on *full, computed* blocks only: each such block is named by
// a chained hash, XXH3-64 of its token ids seeded with the hash of the block before it, so the same
// tokens after a different prefix get a different name. A block whose last reference goes away
// returns to the free list but keeps its name and content until it is handed out again; free
// blocks are handed out least recently freed first (LRU), so recently used prefixes survive
// longest. Freed tables return their blocks last-to-first, so a prefix's tail is evicted before its
// head.
//
// Deterministic (no randomness, no iteration over hash containers) and single-threaded: the engine
// thread owns it.
#ifndef TANDEM_COMMON_KV_BLOCK_MANAGER_H_
#define TANDEM_COMMON_KV_BLOCK_MANAGER_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/kv/block_name_index.h"
#include "common/kv/free_block_queue.h"
#include "common/types/dtype.h"
#include "common/util/lazy_zero_array.h"

namespace tandem {

// What a failed Allocate found of its tokens' cached prefix, kept in the table so that the retry
// (a queue head waiting for blocks retries every step) re-checks it instead of naming and looking
// up every block again: names stay valid (they depend on the tokens alone), hits stay valid while
// their block keeps the naming it had. Identifies its tokens by address and length: the caller
// must not change the tokens in place between attempts (appending reallocates or lengthens them).
struct PrefixLookupMemo {
  const TokenId* tokens = nullptr;
  size_t num_tokens = 0;
  std::vector<uint64_t> names;    // of blocks [0, names.size()): the hits, then the first miss
  std::vector<int32_t> blocks;    // the hits, blocks.size() <= names.size()
  std::vector<uint32_t> namings;  // BlockManager's naming count of each hit when it was found

  bool Describes(std::span<const TokenId> t) const {
    return tokens == t.data() && num_tokens == t.size();
  }
  void Clear();
};

// One sequence's view of the pool; the caller owns it and passes it to BlockManager calls.
struct BlockTable {
  // blocks[i] holds positions [i * block_size, (i + 1) * block_size).
  std::vector<int32_t> blocks;
  // hashes[i] is the chained hash of blocks[i]; only full blocks whose KV is computed have one,
  // so hashes.size() <= blocks.size().
  std::vector<uint64_t> hashes;
  // Positions [0, num_tokens) have a reserved slot.
  int32_t num_tokens = 0;
  // Allocate's memo of its last failure on this table (cleared when it succeeds, and by Free).
  PrefixLookupMemo lookup_memo;

  bool empty() const { return blocks.empty(); }
};

class BlockManager {
 public:
  // `num_blocks` >= 1 and `block_size` >= 1 (programmer invariants).
  BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching = true);
  BlockManager(const BlockManager&) = delete;
  BlockManager& operator=(const BlockManager&) = delete;

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  bool prefix_caching_enabled() const { return enable_prefix_caching_; }
  // Blocks with no reference (including ones that still hold cached content).
  int32_t num_free_blocks() const { return free_.size(); }
  int32_t num_used_blocks() const { return num_blocks_ - free_.size(); }
  // Blocks currently findable by hash (in use or free).
  int32_t num_cached_blocks() const { return names_.size(); }
  int32_t ref_count(int32_t block) const { return blocks_[block].ref_count; }
  // Blocks needed to hold `num_tokens` positions.
  int32_t BlocksForTokens(int64_t num_tokens) const;

  // Prefix-cache counters, in tokens: queries = prompt tokens passed to Allocate, hits = the part
  // of them served from cache.
  int64_t prefix_cache_queries() const { return queries_; }
  int64_t prefix_cache_hits() const { return hits_; }

  // Tokens of `tokens` whose KV is already cached: a whole number of blocks, and never all of
  // `tokens` (the last token is always computed so its logits exist).
  int32_t CachedPrefixTokens(std::span<const TokenId> tokens) const;
  // The same with the blocks' names already computed: `names[i]` is block i's (HashFullBlocks of
  // `tokens`), and may cover fewer blocks than `tokens` has, where the lookup stops. For a caller
  // that asks many pools about one prompt (tandem-sim pricing every node) and names it once.
  int32_t CachedPrefixTokens(std::span<const TokenId> tokens,
                             std::span<const uint64_t> names) const;

  // Whether Allocate(tokens) would succeed now.
  bool CanAllocate(std::span<const TokenId> tokens) const;
  // Reserves slots for all of `tokens` in the empty `table`, reusing cached prefix blocks. Returns
  // the number of leading tokens whose KV is already there (see CachedPrefixTokens), or nullopt
  // with nothing changed in the pool when it is too full (the table keeps what the lookup found,
  // for the retry: PrefixLookupMemo).
  std::optional<int32_t> Allocate(std::span<const TokenId> tokens, BlockTable* table);

  // Whether `table` can grow by `num_new_tokens` slots now.
  bool CanAppend(const BlockTable& table, int32_t num_new_tokens) const;
  // Grows `table` by `num_new_tokens` slots; false with nothing changed when the pool is too full.
  bool Append(BlockTable* table, int32_t num_new_tokens);

  // Records that KV of positions [0, num_computed) of `table` is written, where `tokens` are the
  // sequence's token ids (at least num_computed of them): every newly full block gets its hash and
  // becomes findable by later Allocate calls. Only computed blocks are shared, so a reader never
  // sees a block that a writer has not finished.
  void CacheComputedBlocks(std::span<const TokenId> tokens, int32_t num_computed,
                           BlockTable* table);

  // Drops `table`'s references (last block first) and clears it.
  void Free(BlockTable* table);

  // The names (block_hash.h) of every block findable in the prefix cache, sorted, and a counter
  // that changes whenever that set changes.
  std::vector<uint64_t> CachedHashes() const;
  uint64_t cache_version() const { return cache_version_; }

 private:
  struct BlockInfo {
    int32_t ref_count = 0;
    // Times the block was named or lost its name: odd while it is named (findable by `hash`).
    uint32_t naming = 0;
    bool named() const { return (naming & 1) != 0; }
    uint64_t hash = 0;
    uint64_t parent_hash = 0;  // checked on lookup, with the tokens, against hash collisions
  };

  // What names_ confirms a name against: the full name of a block in it.
  auto NameOf() const {
    return [this](int32_t block) { return blocks_[block].hash; };
  }
  uint64_t HashBlock(uint64_t parent_hash, std::span<const TokenId> block_tokens) const;
  // The cached block holding exactly these tokens after this parent, or -1.
  int32_t FindCached(uint64_t hash, uint64_t parent_hash,
                     std::span<const TokenId> block_tokens) const;
  // Cached blocks that serve a prefix of `tokens` (at most CachedPrefixTokens worth), in order,
  // starting from `memo` when it describes `tokens`. With `miss_name`: the name of the block after
  // the hits, when the lookup stopped at a miss (else it is left alone).
  void LookupPrefix(std::span<const TokenId> tokens, const PrefixLookupMemo* memo,
                    std::vector<int32_t>* hit_blocks, std::vector<uint64_t>* hit_hashes,
                    std::optional<uint64_t>* miss_name = nullptr) const;
  // Free blocks needed to allocate `tokens` given its prefix hits.
  int32_t FreeBlocksNeeded(std::span<const TokenId> tokens,
                           std::span<const int32_t> hit_blocks) const;

  // Takes the `count` (<= free_.size()) least recently freed blocks into `out`, each with one
  // reference, evicting their cached content.
  void TakeFreeBlocks(int32_t count, std::vector<int32_t>* out);
  // Starts fetching what naming `block` `hash` touches: the map slot, its record, its tokens.
  void PrefetchRegistration(uint64_t hash, int32_t block) const;

  const int32_t num_blocks_;
  const int32_t block_size_;
  const bool enable_prefix_caching_;
  // Zero pages from the kernel, faulted in as used (lazy_zero_array.h).
  LazyZeroArray<BlockInfo> blocks_;      // num_blocks_
  LazyZeroArray<TokenId> block_tokens_;  // num_blocks_ * block_size_: content of hashed blocks
  FreeBlockQueue free_;                  // blocks with no reference, least recently freed first
  BlockNameIndex names_;                 // hash -> block, for the named blocks (prefix caching on)
  uint64_t cache_version_ = 0;
  int64_t queries_ = 0;
  int64_t hits_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_KV_BLOCK_MANAGER_H_
