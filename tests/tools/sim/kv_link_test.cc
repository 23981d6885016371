// KvLink: a transfer alone takes bytes / bandwidth + latency; concurrent transfers share the
// bandwidth equally (processor sharing), so one that starts later slows the first down.
#include "tools/sim/kv_link.h"

#include <vector>

#include "gtest/gtest.h"

namespace tandem::sim {
namespace {

// 1 byte per ns, 100 ns latency.
class KvLinkTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  EventLoop loop_{&clock_};
  KvLink link_{&loop_, 1e9, 100};
};

TEST_F(KvLinkTest, ATransferAloneTakesItsBytesOverTheBandwidthPlusTheLatency) {
  int64_t done_at = -1;
  link_.Start(1000, [&] { done_at = loop_.now(); });
  loop_.Run();
  EXPECT_EQ(done_at, 1000 + 100);
  EXPECT_EQ(link_.bytes_moved(), 1000);
}

TEST_F(KvLinkTest, TransfersInFlightShareTheBandwidthEqually) {
  std::vector<int64_t> done(3, -1);
  link_.Start(1000, [&] { done[0] = loop_.now(); });
  link_.Start(1000, [&] { done[1] = loop_.now(); });
  // Until 500 the two share (1/2 byte per ns each): 750 bytes left each. The third (250 bytes)
  // starts then and three share (1/3 each): it is done at 1250, when the first two have 500 left;
  // those two then share again, 1000 ns more: done at 2250.
  loop_.At(500, [&] { link_.Start(250, [&] { done[2] = loop_.now(); }); });
  loop_.Run();
  EXPECT_EQ(done[2], 1250 + 100);
  EXPECT_EQ(done[0], 2250 + 100);
  EXPECT_EQ(done[1], 2250 + 100);
}

TEST_F(KvLinkTest, AnEmptyTransferTakesTheLatencyOnly) {
  int64_t done_at = -1;
  link_.Start(0, [&] { done_at = loop_.now(); });
  loop_.Run();
  EXPECT_EQ(done_at, 100);
}

}  // namespace
}  // namespace tandem::sim
