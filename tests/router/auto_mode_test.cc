// router/auto_mode.h: the blocks a prefill for another node holds on its node, and whether the
// node has them free.
#include "router/auto_mode.h"

#include "gtest/gtest.h"

namespace tandem {
namespace {

NodeCandidate AutoCandidate(int64_t free_blocks, int32_t block_size, int64_t cached_tokens = 0) {
  NodeCandidate n;
  n.free_kv_blocks = free_blocks;
  n.block_size = block_size;
  n.cached_prefix_tokens = cached_tokens;
  return n;
}

TEST(AutoModeTest, APrefillHoldsItsPromptsBlocksLessTheCachedFullOnes) {
  EXPECT_EQ(PrefillHeldBlocks(AutoCandidate(0, 16), 600, 16), 38);       // ceil(600 / 16)
  EXPECT_EQ(PrefillHeldBlocks(AutoCandidate(0, 16, 320), 600, 16), 18);  // 20 blocks cached
  EXPECT_EQ(PrefillHeldBlocks(AutoCandidate(0, 16, 330), 600, 16),
            18);  // a partial block is computed
  EXPECT_EQ(PrefillHeldBlocks(AutoCandidate(0, 16, 9999), 600, 16),
            1);                                                    // at most the prompt is cached
  EXPECT_EQ(PrefillHeldBlocks(AutoCandidate(0, 0), 600, 32), 19);  // the default block size
  EXPECT_EQ(PrefillHeldBlocks(AutoCandidate(0, 16), 1, 16), 1);
}

TEST(AutoModeTest, ANodeHasRoomWhenItsFreeBlocksHoldThePrefill) {
  EXPECT_TRUE(HasRoomToPrefill(AutoCandidate(38, 16), 600, 16));
  EXPECT_FALSE(HasRoomToPrefill(AutoCandidate(37, 16), 600, 16));
  EXPECT_TRUE(HasRoomToPrefill(AutoCandidate(18, 16, 320), 600, 16));
  // Free blocks less what was placed since the report can be negative.
  EXPECT_FALSE(HasRoomToPrefill(AutoCandidate(-5, 16), 1, 16));
}

}  // namespace
}  // namespace tandem
