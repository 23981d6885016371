#include "common/kv/block_manager.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "common/kv/block_hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using T = std::vector<TokenId>;

std::vector<TokenId> Iota(int n, TokenId start = 0) {
  std::vector<TokenId> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// Allocates and marks every position computed, as after a finished prefill.
BlockTable AllocateComputed(BlockManager& bm, const std::vector<TokenId>& tokens,
                            int32_t* cached = nullptr) {
  BlockTable table;
  auto got = bm.Allocate(tokens, &table);
  EXPECT_TRUE(got.has_value());
  if (cached != nullptr) *cached = got.value_or(-1);
  bm.CacheComputedBlocks(tokens, static_cast<int32_t>(tokens.size()), &table);
  return table;
}

TEST(BlockManagerTest, AllocateAndFreeCountsBlocks) {
  BlockManager bm(/*num_blocks=*/8, /*block_size=*/4);
  EXPECT_EQ(bm.num_free_blocks(), 8);
  BlockTable table;
  auto cached = bm.Allocate(Iota(9), &table);
  ASSERT_TRUE(cached.has_value());
  EXPECT_EQ(*cached, 0);
  EXPECT_EQ(table.num_tokens, 9);
  EXPECT_THAT(table.blocks, ElementsAre(0, 1, 2));
  EXPECT_EQ(bm.num_free_blocks(), 5);
  EXPECT_EQ(bm.num_used_blocks(), 3);
  for (int32_t b : table.blocks) EXPECT_EQ(bm.ref_count(b), 1);
  bm.Free(&table);
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.num_tokens, 0);
  EXPECT_EQ(bm.num_free_blocks(), 8);
  EXPECT_EQ(bm.ref_count(0), 0);
}

TEST(BlockManagerTest, BlocksForTokens) {
  BlockManager bm(4, 16);
  EXPECT_EQ(bm.BlocksForTokens(0), 0);
  EXPECT_EQ(bm.BlocksForTokens(1), 1);
  EXPECT_EQ(bm.BlocksForTokens(16), 1);
  EXPECT_EQ(bm.BlocksForTokens(17), 2);
}

TEST(BlockManagerTest, CanAllocateFalseWhenFull) {
  BlockManager bm(4, 4);
  BlockTable a;
  ASSERT_TRUE(bm.Allocate(Iota(12), &a).has_value());
  EXPECT_TRUE(bm.CanAllocate(Iota(4, 100)));
  EXPECT_FALSE(bm.CanAllocate(Iota(5, 100)));
  BlockTable b;
  EXPECT_FALSE(bm.Allocate(Iota(5, 100), &b).has_value());
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(bm.num_free_blocks(), 1);
}

TEST(BlockManagerTest, PrefixSharedAcrossSequences) {
  BlockManager bm(16, 4);
  std::vector<TokenId> prompt = Iota(10);
  BlockTable a = AllocateComputed(bm, prompt);
  ASSERT_EQ(a.hashes.size(), 2u);  // positions 0..7 form two full blocks
  EXPECT_EQ(bm.num_cached_blocks(), 2);

  std::vector<TokenId> other = prompt;
  other.push_back(77);  // same 10-token prefix, 11 tokens
  int32_t cached = -1;
  BlockTable b = AllocateComputed(bm, other, &cached);
  EXPECT_EQ(cached, 8);
  EXPECT_EQ(b.blocks[0], a.blocks[0]);
  EXPECT_EQ(b.blocks[1], a.blocks[1]);
  EXPECT_NE(b.blocks[2], a.blocks[2]);
  EXPECT_EQ(bm.ref_count(a.blocks[0]), 2);
  EXPECT_EQ(bm.ref_count(a.blocks[2]), 1);
  EXPECT_EQ(bm.num_used_blocks(), 4);
  EXPECT_EQ(bm.prefix_cache_queries(), 21);
  EXPECT_EQ(bm.prefix_cache_hits(), 8);

  bm.Free(&a);
  EXPECT_EQ(bm.ref_count(b.blocks[0]), 1);
  bm.Free(&b);
  EXPECT_EQ(bm.num_free_blocks(), 16);
}

TEST(BlockManagerTest, SameBlockAfterDifferentPrefixIsNotReused) {
  BlockManager bm(16, 4);
  // Second block content {4,5,6,7} in both, but the first blocks differ.
  std::vector<TokenId> a_tokens = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<TokenId> b_tokens = {9, 9, 9, 9, 4, 5, 6, 7, 8};
  BlockTable a = AllocateComputed(bm, a_tokens);
  int32_t cached = -1;
  BlockTable b = AllocateComputed(bm, b_tokens, &cached);
  EXPECT_EQ(cached, 0);
  EXPECT_NE(a.blocks[1], b.blocks[1]);
  EXPECT_NE(a.hashes[1], b.hashes[1]);
}

TEST(BlockManagerTest, NeverReportsAllTokensCached) {
  BlockManager bm(16, 4);
  std::vector<TokenId> prompt = Iota(8);  // exactly two blocks
  BlockTable a = AllocateComputed(bm, prompt);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  EXPECT_EQ(bm.CachedPrefixTokens(prompt), 4);  // the last block is recomputed
  int32_t cached = -1;
  BlockTable b = AllocateComputed(bm, prompt, &cached);
  EXPECT_EQ(cached, 4);
  EXPECT_EQ(b.blocks[0], a.blocks[0]);
  EXPECT_NE(b.blocks[1], a.blocks[1]);
  // The recomputed duplicate has the same name but does not replace the cached original.
  EXPECT_EQ(b.hashes[1], a.hashes[1]);
  EXPECT_EQ(bm.num_cached_blocks(), 2);

  // A one-token prompt can never hit.
  EXPECT_EQ(bm.CachedPrefixTokens(T{0}), 0);
  bm.Free(&a);
  bm.Free(&b);
  EXPECT_EQ(bm.num_free_blocks(), 16);
}

TEST(BlockManagerTest, OnlyComputedFullBlocksAreCached) {
  BlockManager bm(16, 4);
  std::vector<TokenId> prompt = Iota(13);
  BlockTable a;
  ASSERT_TRUE(bm.Allocate(prompt, &a).has_value());
  EXPECT_EQ(bm.num_cached_blocks(), 0);
  bm.CacheComputedBlocks(prompt, 6, &a);  // first chunk: one full block computed
  EXPECT_EQ(bm.num_cached_blocks(), 1);
  EXPECT_EQ(bm.CachedPrefixTokens(prompt), 4);
  bm.CacheComputedBlocks(prompt, 13, &a);
  EXPECT_EQ(bm.num_cached_blocks(), 3);
  EXPECT_EQ(bm.CachedPrefixTokens(prompt), 12);
}

TEST(BlockManagerTest, AppendGrowsAndHashesDecodedBlocks) {
  BlockManager bm(4, 4);
  std::vector<TokenId> tokens = Iota(3);
  BlockTable t;
  ASSERT_TRUE(bm.Allocate(tokens, &t).has_value());
  EXPECT_EQ(t.blocks.size(), 1u);
  bm.CacheComputedBlocks(tokens, 3, &t);
  // Decode: a new token each step; the slot must exist before the forward pass writes it.
  for (int step = 0; step < 6; ++step) {
    tokens.push_back(100 + step);
    ASSERT_TRUE(bm.CanAppend(t, 1));
    ASSERT_TRUE(bm.Append(&t, 1));
    EXPECT_EQ(t.num_tokens, static_cast<int32_t>(tokens.size()));
    bm.CacheComputedBlocks(tokens, static_cast<int32_t>(tokens.size()), &t);
  }
  EXPECT_EQ(t.num_tokens, 9);
  EXPECT_EQ(t.blocks.size(), 3u);
  EXPECT_EQ(t.hashes.size(), 2u);
  EXPECT_EQ(bm.num_free_blocks(), 1);
  EXPECT_TRUE(bm.CanAppend(t, 7));   // fills the third block and one more
  EXPECT_FALSE(bm.CanAppend(t, 8));  // would need two more blocks
  EXPECT_FALSE(bm.Append(&t, 8));
  EXPECT_EQ(t.num_tokens, 9);
  // The decoded blocks are findable by a sequence that continues the conversation.
  std::vector<TokenId> follow_up = tokens;
  follow_up.push_back(5);
  EXPECT_EQ(bm.CachedPrefixTokens(follow_up), 8);
}

TEST(BlockManagerTest, FreedBlocksAreRevivedUntilReused) {
  BlockManager bm(6, 2);
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
  BlockTable a = AllocateComputed(bm, prompt);
  EXPECT_THAT(a.blocks, ElementsAre(0, 1, 2));
  bm.Free(&a);
  EXPECT_EQ(bm.num_free_blocks(), 6);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  // Revival: the same prompt gets its two full blocks back.
  int32_t cached = -1;
  BlockTable b = AllocateComputed(bm, prompt, &cached);
  EXPECT_EQ(cached, 4);
  EXPECT_EQ(b.blocks[0], 0);
  EXPECT_EQ(b.blocks[1], 1);
  EXPECT_EQ(bm.num_free_blocks(), 3);
  bm.Free(&b);
}

TEST(BlockManagerTest, EvictionIsLeastRecentlyFreedFirstAndTailFirst) {
  BlockManager bm(4, 2);
  // A uses blocks 0,1 (both full and cached); B uses 2,3.
  BlockTable a = AllocateComputed(bm, {1, 2, 3, 4});
  BlockTable b = AllocateComputed(bm, {5, 6, 7, 8});
  EXPECT_THAT(a.blocks, ElementsAre(0, 1));
  EXPECT_THAT(b.blocks, ElementsAre(2, 3));
  bm.Free(&a);  // free list: 1, 0 (tail first)
  bm.Free(&b);  // free list: 1, 0, 3, 2
  EXPECT_EQ(bm.num_cached_blocks(), 4);

  // A fresh 1-block sequence takes block 1 (A's tail): A's head survives, its tail is gone.
  BlockTable c;
  ASSERT_TRUE(bm.Allocate(T{50}, &c).has_value());
  EXPECT_THAT(c.blocks, ElementsAre(1));
  EXPECT_EQ(bm.num_cached_blocks(), 3);
  EXPECT_EQ(bm.CachedPrefixTokens(T{1, 2, 3, 4, 9}), 2);
  EXPECT_EQ(bm.CachedPrefixTokens(T{5, 6, 7, 8, 9}), 4);

  // Next fresh block is 0 (A's head), then 3, then 2.
  BlockTable d;
  ASSERT_TRUE(bm.Allocate(T{51}, &d).has_value());
  EXPECT_THAT(d.blocks, ElementsAre(0));
  EXPECT_EQ(bm.CachedPrefixTokens(T{1, 2, 3, 4, 9}), 0);
  EXPECT_EQ(bm.CachedPrefixTokens(T{5, 6, 7, 8, 9}), 4);
}

TEST(BlockManagerTest, RevivalMovesBlockOutOfEvictionOrder) {
  BlockManager bm(4, 2);
  BlockTable a = AllocateComputed(bm, {1, 2, 3});  // blocks 0 (cached), 1
  bm.Free(&a);                                     // free list: 2, 3, 1, 0
  // Reviving block 0 for a new sequence takes it off the free list; the fresh block comes from the
  // front (2), not from block 0.
  int32_t cached = -1;
  BlockTable b = AllocateComputed(bm, {1, 2, 9}, &cached);
  EXPECT_EQ(cached, 2);
  EXPECT_THAT(b.blocks, ElementsAre(0, 2));
  EXPECT_EQ(bm.num_free_blocks(), 2);
}

TEST(BlockManagerTest, CanAllocateCountsSharedHitsAsFree) {
  BlockManager bm(3, 2);
  BlockTable a = AllocateComputed(bm, {1, 2, 3, 4, 5});  // all three blocks in use
  EXPECT_EQ(bm.num_free_blocks(), 0);
  // {1,2,3,4,6} shares two in-use blocks but needs one more: not possible.
  EXPECT_FALSE(bm.CanAllocate(T{1, 2, 3, 4, 6}));
  // {1,2,3} shares one block and needs one more: not possible either.
  EXPECT_FALSE(bm.CanAllocate(T{1, 2, 3}));
  bm.Free(&a);
  // All free now; hits on free blocks still consume them.
  EXPECT_TRUE(bm.CanAllocate(T{1, 2, 3, 4, 6}));
  EXPECT_FALSE(bm.CanAllocate(T{1, 2, 3, 4, 5, 6, 7}));
}

TEST(BlockManagerTest, PrefixCachingDisabled) {
  BlockManager bm(8, 2, /*enable_prefix_caching=*/false);
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
  BlockTable a = AllocateComputed(bm, prompt);
  EXPECT_EQ(bm.num_cached_blocks(), 0);
  int32_t cached = -1;
  BlockTable b = AllocateComputed(bm, prompt, &cached);
  EXPECT_EQ(cached, 0);
  EXPECT_EQ(bm.num_used_blocks(), 6);
}

// A failed Allocate leaves its lookup in the table (PrefixLookupMemo); retrying on that table must
// decide exactly as a fresh lookup would, however the cache changed in between. Two managers get
// the same calls; one retries waiting sequences on their own tables, the other on fresh ones.
TEST(BlockManagerTest, RetryOnTheSameTableDecidesAsAFreshLookup) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    BlockManager with_memo(/*num_blocks=*/12, /*block_size=*/2);
    BlockManager fresh(/*num_blocks=*/12, /*block_size=*/2);
    struct Seq {
      std::vector<TokenId> tokens;
      BlockTable memo_table, fresh_table;
      bool admitted = false;
    };
    std::vector<std::unique_ptr<Seq>> seqs;
    std::mt19937_64 rng(seed);
    for (int step = 0; step < 3000; ++step) {
      const int op = static_cast<int>(rng() % 4);
      if (op == 0 || seqs.empty()) {
        // A new waiting sequence: a few shared leading blocks, then its own tokens.
        auto seq = std::make_unique<Seq>();
        const int shared = static_cast<int>(rng() % 4);
        for (int t = 0; t < 2 * shared; ++t) seq->tokens.push_back(static_cast<TokenId>(t % 3));
        const int own = 1 + static_cast<int>(rng() % 8);
        for (int t = 0; t < own; ++t) seq->tokens.push_back(static_cast<TokenId>(rng() % 3));
        seqs.push_back(std::move(seq));
        continue;
      }
      Seq& seq = *seqs[rng() % seqs.size()];
      if (!seq.admitted) {  // (re)try admission
        BlockTable fresh_table;
        const auto got_memo = with_memo.Allocate(seq.tokens, &seq.memo_table);
        const auto got_fresh = fresh.Allocate(seq.tokens, &fresh_table);
        ASSERT_EQ(got_memo, got_fresh) << "seed " << seed << " step " << step;
        if (!got_memo.has_value()) continue;
        ASSERT_EQ(seq.memo_table.blocks, fresh_table.blocks);
        seq.fresh_table = std::move(fresh_table);
        seq.admitted = true;
        const auto n = static_cast<int32_t>(seq.tokens.size());
        with_memo.CacheComputedBlocks(seq.tokens, n, &seq.memo_table);
        fresh.CacheComputedBlocks(seq.tokens, n, &seq.fresh_table);
      } else if (op == 1) {  // grows by one token
        const bool a = with_memo.Append(&seq.memo_table, 1);
        ASSERT_EQ(a, fresh.Append(&seq.fresh_table, 1));
        if (!a) continue;
        seq.tokens.push_back(static_cast<TokenId>(rng() % 3));
        const auto n = static_cast<int32_t>(seq.tokens.size());
        with_memo.CacheComputedBlocks(seq.tokens, n, &seq.memo_table);
        fresh.CacheComputedBlocks(seq.tokens, n, &seq.fresh_table);
      } else {  // ends (or is preempted: it waits again with the same tokens)
        with_memo.Free(&seq.memo_table);
        fresh.Free(&seq.fresh_table);
        seq.admitted = false;
      }
      ASSERT_EQ(with_memo.num_free_blocks(), fresh.num_free_blocks());
      ASSERT_EQ(with_memo.CachedHashes(), fresh.CachedHashes());
    }
  }
}

TEST(BlockManagerTest, CachedPrefixFromNamesMatchesTheTokens) {
  // Random churn on a small pool; every few steps, queries against what it caches now. The names
  // given whole give the same answer as the tokens; cut to k blocks, at most k blocks'.
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    BlockManager bm(/*num_blocks=*/16, /*block_size=*/2);
    std::mt19937_64 rng(seed);
    std::vector<BlockTable> live;
    auto random_tokens = [&] {
      std::vector<TokenId> tokens;
      const int shared = static_cast<int>(rng() % 5);
      for (int t = 0; t < 2 * shared; ++t) tokens.push_back(static_cast<TokenId>(t % 3));
      const int own = 1 + static_cast<int>(rng() % 8);
      for (int t = 0; t < own; ++t) tokens.push_back(static_cast<TokenId>(rng() % 3));
      return tokens;
    };
    int compared_hits = 0;
    for (int step = 0; step < 2000; ++step) {
      if (rng() % 3 != 0 || live.empty()) {
        const std::vector<TokenId> tokens = random_tokens();
        BlockTable table;
        if (bm.Allocate(tokens, &table).has_value()) {
          bm.CacheComputedBlocks(tokens, static_cast<int32_t>(tokens.size()), &table);
          live.push_back(std::move(table));
        }
      } else {
        const size_t victim = rng() % live.size();
        bm.Free(&live[victim]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
      }
      const std::vector<TokenId> query = random_tokens();
      const std::vector<uint64_t> names = HashFullBlocks(query, bm.block_size());
      const int32_t expected = bm.CachedPrefixTokens(query);
      ASSERT_EQ(bm.CachedPrefixTokens(query, names), expected) << "seed " << seed << " " << step;
      for (size_t k = 0; k <= names.size(); ++k) {
        const auto cut = std::span<const uint64_t>(names).first(k);
        ASSERT_EQ(bm.CachedPrefixTokens(query, cut),
                  std::min<int32_t>(expected, static_cast<int32_t>(k) * bm.block_size()));
      }
      if (expected > 0) ++compared_hits;
    }
    EXPECT_GT(compared_hits, 100) << "seed " << seed;  // the queries did hit the cache
  }
}

}  // namespace
}  // namespace tandem
