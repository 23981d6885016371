#include "common/backend/device_forward_plan.h"

#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

std::vector<int32_t> Ints(const DeviceForwardPlan& p, size_t offset, int n) {
  const int32_t* v = p.at<int32_t>(offset);
  return std::vector<int32_t>(v, v + n);
}

TEST(DeviceForwardPlanTest, SplitsPrefillAndDecodeItemsAndKeepsTokenOrder) {
  const std::vector<TokenId> prompt = {5, 6, 7, 8, 9};  // positions 3..7 after a cached prefix
  const std::vector<TokenId> step = {42};
  const std::vector<int32_t> table_a = {4, 9};
  const std::vector<int32_t> table_b = {1, 2, 3};
  std::vector<ForwardItem> items(2);
  items[0] = {step, 17, table_b, true};  // decode: position 17 in block table_b[2] = 3
  items[1] = {prompt, 3, table_a, true};
  DeviceForwardPlan p;
  ASSERT_TRUE(BuildDeviceForwardPlan({items}, 8, nullptr, &p).ok());
  EXPECT_EQ(p.num_tokens, 6);
  EXPECT_EQ(p.num_prefill, 1);
  EXPECT_EQ(p.num_decode, 1);
  EXPECT_EQ(p.prefill_max_q_len, 5);
  EXPECT_EQ(p.decode_max_context, 18);
  EXPECT_EQ(p.prefill_table_width, 1);  // positions < 8
  EXPECT_EQ(p.decode_table_width, 3);
  EXPECT_EQ(Ints(p, p.token_ids, 6), (std::vector<int32_t>{42, 5, 6, 7, 8, 9}));
  EXPECT_EQ(Ints(p, p.positions, 6), (std::vector<int32_t>{17, 3, 4, 5, 6, 7}));
  const int64_t* slots = p.at<int64_t>(p.slot_mapping);
  EXPECT_EQ(slots[0], 3 * 8 + 1);
  for (int j = 0; j < 5; ++j) EXPECT_EQ(slots[1 + j], 4 * 8 + 3 + j) << j;
  EXPECT_EQ(Ints(p, p.logit_rows, 2), (std::vector<int32_t>{0, 5}));
  EXPECT_EQ(Ints(p, p.prefill_q_starts, 1), std::vector<int32_t>{1});
  EXPECT_EQ(Ints(p, p.prefill_q_lens, 1), std::vector<int32_t>{5});
  EXPECT_EQ(Ints(p, p.prefill_start_positions, 1), std::vector<int32_t>{3});
  EXPECT_EQ(Ints(p, p.prefill_block_tables, 1), std::vector<int32_t>{4});
  EXPECT_EQ(Ints(p, p.decode_token_rows, 1), std::vector<int32_t>{0});
  EXPECT_EQ(Ints(p, p.decode_context_lens, 1), std::vector<int32_t>{18});
  EXPECT_EQ(Ints(p, p.decode_block_tables, 3), (std::vector<int32_t>{1, 2, 3}));
  for (size_t offset : {p.token_ids, p.positions, p.slot_mapping, p.logit_rows,
                        p.prefill_block_tables, p.decode_block_tables}) {
    EXPECT_EQ(offset % 16, 0u);
  }
}

TEST(DeviceForwardPlanTest, PaddingFixesTheLayoutForAGraph) {
  const std::vector<TokenId> t1 = {1}, t2 = {2};
  const std::vector<int32_t> table1 = {7}, table2 = {8, 9};
  std::vector<ForwardItem> items = {{t1, 0, table1, true}, {t2, 20, table2, true}};
  const PlanPadding padding{4, 6};
  DeviceForwardPlan a;
  ASSERT_TRUE(BuildDeviceForwardPlan({items}, 16, &padding, &a).ok());
  EXPECT_EQ(a.num_decode, 4);
  EXPECT_EQ(a.num_tokens, 4);
  EXPECT_EQ(a.decode_table_width, 6);
  EXPECT_EQ(a.decode_max_context, 21);
  EXPECT_EQ(Ints(a, a.decode_context_lens, 4), (std::vector<int32_t>{1, 21, 0, 0}));
  EXPECT_EQ(Ints(a, a.decode_token_rows, 4), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(Ints(a, a.logit_rows, 4), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(a.at<int64_t>(a.slot_mapping)[2], -1);
  EXPECT_EQ(a.at<int64_t>(a.slot_mapping)[1], 9 * 16 + 4);
  EXPECT_EQ(Ints(a, a.decode_block_tables + 6 * sizeof(int32_t), 6),
            (std::vector<int32_t>{8, 9, 0, 0, 0, 0}));

  // Another batch of the same padded shape lands at the same offsets.
  std::vector<ForwardItem> other = {{t2, 3, table1, true}};
  DeviceForwardPlan b;
  ASSERT_TRUE(BuildDeviceForwardPlan({other}, 16, &padding, &b).ok());
  EXPECT_EQ(b.bytes.size(), a.bytes.size());
  EXPECT_EQ(b.decode_block_tables, a.decode_block_tables);
  EXPECT_EQ(b.slot_mapping, a.slot_mapping);
}

TEST(DeviceForwardPlanTest, PaddingRefusesBatchesThatDoNotFit) {
  const std::vector<TokenId> prompt = {1, 2};
  const std::vector<TokenId> one = {1};
  const std::vector<int32_t> table = {0, 1, 2};
  DeviceForwardPlan p;
  const PlanPadding padding{2, 2};
  std::vector<ForwardItem> prefill = {{prompt, 0, table, true}};
  EXPECT_EQ(BuildDeviceForwardPlan({prefill}, 16, &padding, &p).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<ForwardItem> no_logits = {{one, 0, table, false}};
  EXPECT_FALSE(IsDecodeOnly({no_logits}));
  std::vector<ForwardItem> too_wide = {{one, 40, table, true}};  // needs 3 blocks
  EXPECT_EQ(BuildDeviceForwardPlan({too_wide}, 16, &padding, &p).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<ForwardItem> too_many = {
      {one, 0, table, true}, {one, 0, table, true}, {one, 0, table, true}};
  EXPECT_EQ(BuildDeviceForwardPlan({too_many}, 16, &padding, &p).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem
