#include "router/kv_admission.h"

#include "gtest/gtest.h"

namespace tandem {
namespace {

v1::NodeLoad Load(int32_t total, int32_t free, int32_t block_size = 16) {
  v1::NodeLoad load;
  load.set_num_kv_blocks(total);
  load.set_num_free_kv_blocks(free);
  load.set_block_size(block_size);
  return load;
}

TEST(KvAdmissionTest, FitsWhenAnyNodeHasTheBlocks) {
  // 1,500 tokens need 94 blocks of 16.
  EXPECT_EQ(DecodeKvRoom({Load(8192, 67), Load(8192, 94)}, 1500), KvRoom::kFits);
  EXPECT_EQ(DecodeKvRoom({Load(8192, 67), Load(8192, 93)}, 1500), KvRoom::kFull);
  EXPECT_EQ(DecodeKvRoom({Load(8192, 67)}, 1072), KvRoom::kFits);  // exactly 67 blocks
}

TEST(KvAdmissionTest, APromptLargerThanEveryPoolIsLeftToTheNodesToRefuse) {
  EXPECT_EQ(DecodeKvRoom({Load(64, 0), Load(64, 64)}, 64 * 16 + 1), KvRoom::kNeverFits);
  // Larger than one pool but not the other: wait for the other.
  EXPECT_EQ(DecodeKvRoom({Load(64, 0), Load(128, 0)}, 64 * 16 + 1), KvRoom::kFull);
}

TEST(KvAdmissionTest, NodesWithoutAReportDoNotHoldRequestsBack) {
  EXPECT_EQ(DecodeKvRoom({}, 100), KvRoom::kFits);
  EXPECT_EQ(DecodeKvRoom({Load(8192, 0), v1::NodeLoad()}, 100), KvRoom::kFits);
}

TEST(KvAdmissionTest, ExhaustedBelowOnePercentFree) {
  EXPECT_TRUE(KvExhausted(Load(8192, 67)));  // the red team's 8,125 of 8,192 held
  EXPECT_FALSE(KvExhausted(Load(8192, 81)));
  EXPECT_TRUE(KvExhausted(Load(50, 0)));
  EXPECT_FALSE(KvExhausted(Load(50, 1)));
  EXPECT_FALSE(KvExhausted(v1::NodeLoad()));
}

}  // namespace
}  // namespace tandem
