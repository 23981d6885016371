#include "common/serving/node_requests.h"

#include "gtest/gtest.h"

namespace tandem {
namespace {

// Issue 14 row 6: two clients sent the same request id and cancelling one stopped the other,
// because the id map overwrote the first entry.
TEST(RouterRequestIdsTest, ASecondRequestWithALiveIdIsRefusedAndDoesNotTakeItOver) {
  RouterRequestIds ids;
  ASSERT_TRUE(ids.Claim("r1").ok());
  ASSERT_TRUE(ids.Bind("r1", RequestId{7}));
  const absl::Status second = ids.Claim("r1");
  EXPECT_TRUE(absl::IsAlreadyExists(second)) << second;
  // The first request still owns the id: a Cancel reaches it, not the refused one.
  RouterRequestIds::CancelTarget target = ids.ForCancel("r1");
  EXPECT_TRUE(target.found);
  ASSERT_TRUE(target.id.has_value());
  EXPECT_EQ(*target.id, RequestId{7});
  // Once the first request ends, the id is free again.
  ids.Release("r1");
  EXPECT_FALSE(ids.ForCancel("r1").found);
  EXPECT_TRUE(ids.Claim("r1").ok());
}

TEST(RouterRequestIdsTest, ACancelBeforeTheEngineIdIsKnownIsReportedByBind) {
  RouterRequestIds ids;
  ASSERT_TRUE(ids.Claim("r2").ok());
  RouterRequestIds::CancelTarget target = ids.ForCancel("r2");
  EXPECT_TRUE(target.found);
  EXPECT_FALSE(target.id.has_value());
  EXPECT_FALSE(ids.Bind("r2", RequestId{3}));  // the caller must cancel
  ASSERT_TRUE(ids.ForCancel("r2").id.has_value());
}

TEST(RouterRequestIdsTest, UnknownAndEmptyIds) {
  RouterRequestIds ids;
  EXPECT_FALSE(ids.ForCancel("nobody").found);
  // Empty ids are not tracked: any number of them may run.
  EXPECT_TRUE(ids.Claim("").ok());
  EXPECT_TRUE(ids.Claim("").ok());
  EXPECT_TRUE(ids.Bind("", RequestId{1}));
  EXPECT_FALSE(ids.ForCancel("").found);
}

}  // namespace
}  // namespace tandem
