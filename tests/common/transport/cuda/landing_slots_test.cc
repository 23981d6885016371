#include "common/transport/cuda/landing_slots.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace tandem {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);
const absl::Time kLater = kT0 + absl::Seconds(30);

size_t Count(const std::vector<LandingSlots::GrantBatch>& batches, uint64_t transfer) {
  for (const auto& b : batches) {
    if (b.transfer == transfer) return b.grants.size();
  }
  return 0;
}

TEST(LandingSlotsTest, GrantsUpToTheDemandAndThePerTransferCap) {
  LandingSlots slots(8, 3);
  slots.AddDemand(1, "w1", 10, 5, kLater);
  std::vector<LandingSlots::GrantBatch> b = slots.Grant();
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].writer_id, 1u);
  EXPECT_EQ(b[0].reply_address, "w1");
  EXPECT_EQ(b[0].grants.size(), 3u);  // capped
  EXPECT_EQ(slots.free_slots(), 5);
  EXPECT_TRUE(slots.Grant().empty());  // nothing more until a slot of it frees
  // Grant numbers are distinct.
  std::set<uint64_t> grants;
  for (const SlotGrant& g : b[0].grants) grants.insert(g.grant);
  EXPECT_EQ(grants.size(), 3u);
}

TEST(LandingSlotsTest, SharesSlotsRoundRobin) {
  LandingSlots slots(4, 4);
  slots.AddDemand(1, "w1", 10, 10, kLater);
  slots.AddDemand(2, "w2", 20, 10, kLater);
  std::vector<LandingSlots::GrantBatch> b = slots.Grant();
  EXPECT_EQ(Count(b, 10), 2u);
  EXPECT_EQ(Count(b, 20), 2u);
  EXPECT_EQ(slots.free_slots(), 0);
}

TEST(LandingSlotsTest, FillsOnlyUnderItsGrantAndFreesAfterRelease) {
  LandingSlots slots(2, 2);
  slots.AddDemand(1, "w1", 10, 3, kLater);
  std::vector<LandingSlots::GrantBatch> b = slots.Grant();
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(b[0].grants.size(), 2u);
  const SlotGrant g = b[0].grants[0];
  EXPECT_FALSE(slots.BeginFill(1, 10, {g.slot, g.grant + 100}).ok());  // wrong grant
  EXPECT_FALSE(slots.BeginFill(2, 10, g).ok());                        // wrong writer
  EXPECT_FALSE(slots.BeginFill(1, 11, g).ok());                        // wrong transfer
  EXPECT_FALSE(slots.BeginFill(1, 10, {99, g.grant}).ok());            // no such slot
  ASSERT_TRUE(slots.BeginFill(1, 10, g).ok());
  EXPECT_FALSE(slots.BeginFill(1, 10, g).ok());  // already filling
  EXPECT_FALSE(slots.Return(1, g));              // filling slots are not returned
  slots.Release(g.slot);
  b = slots.Grant();  // the third chunk gets the freed slot under a new grant
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(b[0].grants.size(), 1u);
  EXPECT_EQ(b[0].grants[0].slot, g.slot);
  EXPECT_NE(b[0].grants[0].grant, g.grant);
  EXPECT_FALSE(slots.BeginFill(1, 10, g).ok()) << "an old grant must not fill the reused slot";
}

TEST(LandingSlotsTest, ReturnedSlotsGoToTheNextTransfer) {
  LandingSlots slots(1, 1);
  slots.AddDemand(1, "w1", 10, 1, kLater);
  slots.AddDemand(2, "w2", 20, 1, kLater);
  std::vector<LandingSlots::GrantBatch> b = slots.Grant();
  ASSERT_EQ(b.size(), 1u);
  const SlotGrant g = b[0].grants[0];
  const uint64_t first = b[0].transfer;
  EXPECT_FALSE(slots.Return(first == 10 ? 2 : 1, g));  // not the holder
  EXPECT_TRUE(slots.Return(first == 10 ? 1 : 2, g));
  b = slots.Grant();
  ASSERT_EQ(b.size(), 1u);
  EXPECT_NE(b[0].transfer, first);
  // The first transfer had one chunk, returned: it is gone.
  EXPECT_EQ(slots.transfers(), 1);
}

TEST(LandingSlotsTest, AReturnEndsTheTransfersDemand) {
  LandingSlots slots(2, 1);
  slots.AddDemand(1, "w1", 10, 5, kLater);
  std::vector<LandingSlots::GrantBatch> b = slots.Grant();
  ASSERT_EQ(b.size(), 1u);
  ASSERT_TRUE(slots.Return(1, b[0].grants[0]));
  EXPECT_TRUE(slots.Grant().empty()) << "an ended transfer got another grant";
  EXPECT_EQ(slots.transfers(), 0);
  EXPECT_EQ(slots.free_slots(), 2);
}

TEST(LandingSlotsTest, ExpiryTakesBackUnfilledSlotsOnly) {
  LandingSlots slots(3, 3);
  slots.AddDemand(1, "w1", 10, 5, kT0 + absl::Seconds(1));
  std::vector<LandingSlots::GrantBatch> b = slots.Grant();
  ASSERT_EQ(b[0].grants.size(), 3u);
  ASSERT_TRUE(slots.BeginFill(1, 10, b[0].grants[0]).ok());
  EXPECT_EQ(slots.Expire(kT0), 0);
  EXPECT_EQ(slots.Expire(kT0 + absl::Seconds(2)), 2);  // the filling one stays
  EXPECT_EQ(slots.free_slots(), 2);
  EXPECT_TRUE(slots.Grant().empty()) << "expired demand must not get slots";
  EXPECT_FALSE(slots.BeginFill(1, 10, b[0].grants[1]).ok());
  slots.Release(b[0].grants[0].slot);
  EXPECT_EQ(slots.free_slots(), 3);
  EXPECT_EQ(slots.transfers(), 0);
}

TEST(LandingSlotsTest, DemandAddsUpPerTransfer) {
  LandingSlots slots(8, 8);
  slots.AddDemand(1, "w1", 10, 2, kLater);
  slots.AddDemand(1, "w1", 10, 3, kLater);
  EXPECT_EQ(slots.transfers(), 1);
  std::vector<LandingSlots::GrantBatch> b = slots.Grant();
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].grants.size(), 5u);
}

}  // namespace
}  // namespace tandem
