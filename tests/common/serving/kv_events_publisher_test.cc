// KvEventsPublisher::Delta, the message each WatchKvEvents stream (prefill and decode nodes) sends:
// the whole cache on a reset, else what was stored and removed since the view the router holds.
// The streams themselves are tested through the services (tests/decode_node,
// tests/prefill_node).
#include "common/serving/kv_events_publisher.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(KvEventsPublisherTest, AResetCarriesTheWholeCache) {
  const std::vector<uint64_t> known = {1, 2};
  const std::vector<uint64_t> now = {2, 5, 9};
  const v1::KvEvents events = KvEventsPublisher::Delta(known, now, /*reset=*/true, 77, 16);
  EXPECT_TRUE(events.reset());
  EXPECT_EQ(events.incarnation(), 77u);
  EXPECT_EQ(events.block_size(), 16);
  EXPECT_THAT(events.stored(), ElementsAre(2, 5, 9));
  EXPECT_THAT(events.removed(), IsEmpty());
}

TEST(KvEventsPublisherTest, ADeltaTakesTheKnownViewToTheCurrentOne) {
  const std::vector<uint64_t> known = {1, 2, 7, 9};
  const std::vector<uint64_t> now = {2, 3, 9, 12};
  const v1::KvEvents events = KvEventsPublisher::Delta(known, now, /*reset=*/false, 77, 16);
  EXPECT_FALSE(events.reset());
  EXPECT_THAT(events.stored(), ElementsAre(3, 12));
  EXPECT_THAT(events.removed(), ElementsAre(1, 7));
  // Nothing changed: an empty delta (the stream sends none).
  const v1::KvEvents none = KvEventsPublisher::Delta(now, now, /*reset=*/false, 77, 16);
  EXPECT_THAT(none.stored(), IsEmpty());
  EXPECT_THAT(none.removed(), IsEmpty());
}

}  // namespace
}  // namespace tandem
