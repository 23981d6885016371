#include "common/kv/block_manager.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "common/kv/block_hash.h"

namespace tandem {
namespace {

constexpr uint64_t kRootHash = kRootBlockHash;

// How far ahead the per-block loops fetch the memory of the blocks they will touch.
constexpr int32_t kPrefetchDistance = 8;

}  // namespace

void PrefixLookupMemo::Clear() { *this = PrefixLookupMemo(); }  // its memory too

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      enable_prefix_caching_(enable_prefix_caching),
      blocks_(static_cast<size_t>(num_blocks)),
      block_tokens_(enable_prefix_caching ? static_cast<size_t>(num_blocks) * block_size : 0),
      free_(num_blocks),
      names_(enable_prefix_caching ? num_blocks : 1) {
  assert(num_blocks >= 1 && block_size >= 1);
  for (int32_t b = 0; b < num_blocks_; ++b) free_.PushBack(b);
}

int32_t BlockManager::BlocksForTokens(int64_t num_tokens) const {
  return static_cast<int32_t>((num_tokens + block_size_ - 1) / block_size_);
}

uint64_t BlockManager::HashBlock(uint64_t parent_hash,
                                 std::span<const TokenId> block_tokens) const {
  return HashBlockTokens(parent_hash, block_tokens);
}

int32_t BlockManager::FindCached(uint64_t hash, uint64_t parent_hash,
                                 std::span<const TokenId> block_tokens) const {
  const int32_t block = names_.Find(hash, NameOf());
  if (block < 0) return -1;
  const BlockInfo& info = blocks_[block];
  const TokenId* stored = &block_tokens_[static_cast<size_t>(block) * block_size_];
  if (info.parent_hash != parent_hash ||
      std::memcmp(stored, block_tokens.data(), block_tokens.size_bytes()) != 0) {
    return -1;  // a hash collision: treat as a miss
  }
  return block;
}

int32_t BlockManager::CachedPrefixTokens(std::span<const TokenId> tokens) const {
  std::vector<int32_t> hit_blocks;
  std::vector<uint64_t> hit_hashes;
  LookupPrefix(tokens, /*memo=*/nullptr, &hit_blocks, &hit_hashes);
  return static_cast<int32_t>(hit_blocks.size()) * block_size_;
}

int32_t BlockManager::CachedPrefixTokens(std::span<const TokenId> tokens,
                                         std::span<const uint64_t> names) const {
  if (!enable_prefix_caching_ || tokens.empty()) return 0;
  const size_t max_blocks = std::min((tokens.size() - 1) / block_size_, names.size());
  for (size_t i = 0; i < std::min<size_t>(max_blocks, kPrefetchDistance); ++i) {
    names_.Prefetch(names[i]);
  }
  uint64_t parent = kRootHash;
  size_t hits = 0;
  for (; hits < max_blocks; ++hits) {
    if (hits + kPrefetchDistance < max_blocks) names_.Prefetch(names[hits + kPrefetchDistance]);
    const auto block_tokens = tokens.subspan(hits * block_size_, block_size_);
    if (FindCached(names[hits], parent, block_tokens) < 0) break;
    parent = names[hits];
  }
  return static_cast<int32_t>(hits) * block_size_;
}

void BlockManager::LookupPrefix(std::span<const TokenId> tokens, const PrefixLookupMemo* memo,
                                std::vector<int32_t>* hit_blocks, std::vector<uint64_t>* hit_hashes,
                                std::optional<uint64_t>* miss_name) const {
  hit_blocks->clear();
  hit_hashes->clear();
  if (!enable_prefix_caching_ || tokens.empty()) return;
  // At most (n - 1) tokens may be cached, so only blocks ending at or before n - 1 count.
  const size_t max_blocks = (tokens.size() - 1) / block_size_;
  auto block_tokens = [&](size_t i) { return tokens.subspan(i * block_size_, block_size_); };
  uint64_t parent = kRootHash;
  size_t i = 0;
  auto hit = [&](int32_t block, uint64_t hash) {
    hit_blocks->push_back(block);
    hit_hashes->push_back(hash);
    parent = hash;
    ++i;
  };
  if (memo != nullptr && memo->Describes(tokens)) {
    // The memo's hits whose block still has the naming it had: the same lookup would find them
    // (names are unique, and a block's content and parent change only with a new naming).
    while (i < memo->blocks.size() && blocks_[memo->blocks[i]].naming == memo->namings[i]) {
      hit(memo->blocks[i], memo->names[i]);
    }
    // Then the names it knows, looked up again.
    while (i < memo->names.size()) {
      const int32_t block = FindCached(memo->names[i], parent, block_tokens(i));
      if (block < 0) {
        if (miss_name != nullptr) *miss_name = memo->names[i];
        return;
      }
      hit(block, memo->names[i]);
    }
  }
  // A window of blocks at a time: name them (the chain needs only the tokens) and fetch their
  // index slots, then look them up in order until the first miss.
  uint64_t names[kPrefetchDistance];
  while (i < max_blocks) {
    const size_t start = i;
    const size_t end = std::min<size_t>(max_blocks, start + kPrefetchDistance);
    uint64_t name = parent;
    for (size_t j = start; j < end; ++j) {
      name = HashBlock(name, block_tokens(j));
      names[j - start] = name;
      names_.Prefetch(name);
    }
    while (i < end) {
      const uint64_t hash = names[i - start];
      const int32_t block = FindCached(hash, parent, block_tokens(i));
      if (block < 0) {
        if (miss_name != nullptr) *miss_name = hash;
        return;
      }
      hit(block, hash);
    }
  }
}

int32_t BlockManager::FreeBlocksNeeded(std::span<const TokenId> tokens,
                                       std::span<const int32_t> hit_blocks) const {
  // Hits on blocks in use cost nothing; hits on free blocks take that block off the free list;
  // misses take any free block.
  int32_t shared = 0;
  for (int32_t block : hit_blocks) {
    if (blocks_[block].ref_count > 0) ++shared;
  }
  return BlocksForTokens(static_cast<int64_t>(tokens.size())) - shared;
}

bool BlockManager::CanAllocate(std::span<const TokenId> tokens) const {
  std::vector<int32_t> hit_blocks;
  std::vector<uint64_t> hit_hashes;
  LookupPrefix(tokens, /*memo=*/nullptr, &hit_blocks, &hit_hashes);
  return FreeBlocksNeeded(tokens, hit_blocks) <= free_.size();
}

std::optional<int32_t> BlockManager::Allocate(std::span<const TokenId> tokens, BlockTable* table) {
  assert(table->empty() && table->num_tokens == 0);
  std::vector<int32_t> hit_blocks;
  std::vector<uint64_t> hit_hashes;
  std::optional<uint64_t> miss_name;
  PrefixLookupMemo& memo = table->lookup_memo;
  LookupPrefix(tokens, &memo, &hit_blocks, &hit_hashes, &miss_name);
  if (FreeBlocksNeeded(tokens, hit_blocks) > free_.size()) {
    // Remember the lookup for the retry.
    memo.tokens = tokens.data();
    memo.num_tokens = tokens.size();
    memo.names = hit_hashes;
    if (miss_name.has_value()) memo.names.push_back(*miss_name);
    memo.blocks = hit_blocks;
    memo.namings.clear();
    for (int32_t block : hit_blocks) memo.namings.push_back(blocks_[block].naming);
    return std::nullopt;
  }
  memo.Clear();

  const int32_t total_blocks = BlocksForTokens(static_cast<int64_t>(tokens.size()));
  table->blocks.reserve(total_blocks);
  // Revive or share the hits first, so that taking fresh blocks cannot evict them.
  for (int32_t block : hit_blocks) {
    BlockInfo& info = blocks_[block];
    if (info.ref_count == 0) free_.Remove(block);
    ++info.ref_count;
    table->blocks.push_back(block);
  }
  table->hashes = hit_hashes;
  TakeFreeBlocks(total_blocks - static_cast<int32_t>(table->blocks.size()), &table->blocks);
  table->num_tokens = static_cast<int32_t>(tokens.size());

  const int32_t cached_tokens = static_cast<int32_t>(hit_blocks.size()) * block_size_;
  queries_ += static_cast<int64_t>(tokens.size());
  hits_ += cached_tokens;
  return cached_tokens;
}

bool BlockManager::CanAppend(const BlockTable& table, int32_t num_new_tokens) const {
  const int32_t needed = BlocksForTokens(int64_t{table.num_tokens} + num_new_tokens) -
                         static_cast<int32_t>(table.blocks.size());
  return needed <= free_.size();
}

bool BlockManager::Append(BlockTable* table, int32_t num_new_tokens) {
  if (!CanAppend(*table, num_new_tokens)) return false;
  const int32_t total_blocks = BlocksForTokens(int64_t{table->num_tokens} + num_new_tokens);
  TakeFreeBlocks(total_blocks - static_cast<int32_t>(table->blocks.size()), &table->blocks);
  table->num_tokens += num_new_tokens;
  return true;
}

void BlockManager::CacheComputedBlocks(std::span<const TokenId> tokens, int32_t num_computed,
                                       BlockTable* table) {
  if (!enable_prefix_caching_) return;
  assert(num_computed <= table->num_tokens && static_cast<size_t>(num_computed) <= tokens.size());
  const size_t full_blocks = static_cast<size_t>(num_computed) / block_size_;
  const size_t first = table->hashes.size();
  if (first >= full_blocks) return;
  // Name the newly full blocks first (a chain over the tokens alone), so that the registrations
  // below can fetch the map slots and block records they touch ahead of use: with a pool's
  // worth of names these are cache misses, and a prefill chunk completes many blocks at once.
  for (size_t i = first; i < full_blocks; ++i) {
    const uint64_t parent = i == 0 ? kRootHash : table->hashes[i - 1];
    table->hashes.push_back(HashBlock(parent, tokens.subspan(i * block_size_, block_size_)));
  }
  for (size_t i = first; i < std::min(full_blocks, first + kPrefetchDistance); ++i) {
    PrefetchRegistration(table->hashes[i], table->blocks[i]);
  }
  for (size_t i = first; i < full_blocks; ++i) {
    if (i + kPrefetchDistance < full_blocks) {
      PrefetchRegistration(table->hashes[i + kPrefetchDistance],
                           table->blocks[i + kPrefetchDistance]);
    }
    const uint64_t hash = table->hashes[i];
    const int32_t block = table->blocks[i];
    BlockInfo& info = blocks_[block];
    // Another block may already hold this content (computed twice, e.g. a never-all-cached
    // prompt's last block): keep the first; this one stays unnamed and is simply freed later.
    if (info.named()) continue;
    if (!names_.Insert(hash, block, NameOf())) continue;
    ++info.naming;
    info.hash = hash;
    info.parent_hash = i == 0 ? kRootHash : table->hashes[i - 1];
    auto block_tokens = tokens.subspan(i * block_size_, block_size_);
    std::copy(block_tokens.begin(), block_tokens.end(),
              block_tokens_.begin() + static_cast<size_t>(block) * block_size_);
    ++cache_version_;
  }
}

void BlockManager::Free(BlockTable* table) {
  // Last block first; the records ahead are fetched (a table's blocks lie anywhere in the pool).
  const std::vector<int32_t>& blocks = table->blocks;
  for (size_t i = blocks.size(); i-- > 0;) {
    if (i >= static_cast<size_t>(kPrefetchDistance)) {
      __builtin_prefetch(&blocks_[blocks[i - kPrefetchDistance]]);
    }
    BlockInfo& info = blocks_[blocks[i]];
    assert(info.ref_count > 0);
    if (--info.ref_count == 0) free_.PushBack(blocks[i]);
  }
  table->blocks.clear();
  table->hashes.clear();
  table->num_tokens = 0;
  table->lookup_memo.Clear();
}

void BlockManager::TakeFreeBlocks(int32_t count, std::vector<int32_t>* out) {
  // Which blocks first (the queue alone), then their evictions, fetching the records and the
  // index slots they touch ahead: both are cache misses at a pool's scale. Evicting does not
  // change which blocks come next, so the result is that of taking and evicting one by one.
  const size_t first = out->size();
  for (int32_t k = 0; k < count; ++k) out->push_back(free_.PopFront());
  const size_t end = out->size();
  for (size_t i = first; i < std::min(end, first + 2 * kPrefetchDistance); ++i) {
    __builtin_prefetch(&blocks_[(*out)[i]]);
  }
  for (size_t i = first; i < std::min(end, first + kPrefetchDistance); ++i) {
    const BlockInfo& info = blocks_[(*out)[i]];
    if (info.named()) names_.Prefetch(info.hash);
  }
  for (size_t i = first; i < end; ++i) {
    if (i + 2 * kPrefetchDistance < end) {
      __builtin_prefetch(&blocks_[(*out)[i + 2 * kPrefetchDistance]]);
    }
    if (i + kPrefetchDistance < end) {
      const BlockInfo& ahead = blocks_[(*out)[i + kPrefetchDistance]];
      if (ahead.named()) names_.Prefetch(ahead.hash);
    }
    const int32_t block = (*out)[i];
    BlockInfo& info = blocks_[block];
    if (info.named()) {
      names_.Erase(info.hash, block);
      ++cache_version_;
      ++info.naming;
    }
    info.ref_count = 1;
  }
}

void BlockManager::PrefetchRegistration(uint64_t hash, int32_t block) const {
  names_.Prefetch(hash);
  __builtin_prefetch(&blocks_[block]);
  __builtin_prefetch(&block_tokens_[static_cast<size_t>(block) * block_size_], /*rw=*/1);
}

}  // namespace tandem

namespace tandem {

std::vector<uint64_t> BlockManager::CachedHashes() const {
  std::vector<uint64_t> hashes;
  hashes.reserve(names_.size());
  for (int32_t block = 0; block < num_blocks_; ++block) {
    if (blocks_[block].named()) hashes.push_back(blocks_[block].hash);
  }
  std::sort(hashes.begin(), hashes.end());
  return hashes;
}

}  // namespace tandem
