// tandem-sim's event loop: time order, ties in scheduling order, Run's bound, the clock.
#include "tools/sim/event_loop.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::sim {
namespace {

using ::testing::ElementsAre;

TEST(EventLoopTest, RunsEventsInTimeOrderAndTiesInTheOrderScheduled) {
  ManualClock clock;
  EventLoop loop(&clock);
  std::vector<int> order;
  std::vector<int64_t> times;
  auto note = [&](int id) {
    order.push_back(id);
    times.push_back(loop.now());
  };
  loop.At(30, [&] { note(3); });
  loop.At(10, [&] { note(1); });
  loop.At(30, [&] { note(4); });
  loop.At(20, [&] {
    note(2);
    loop.After(10, [&] { note(5); });  // due at 30, scheduled after 3 and 4
    loop.At(5, [&] { note(6); });      // already past: runs now, after what is due at 20
  });
  EXPECT_EQ(loop.Run(), 6);
  EXPECT_THAT(order, ElementsAre(1, 2, 6, 3, 4, 5));
  EXPECT_THAT(times, ElementsAre(10, 20, 20, 30, 30, 30));
  EXPECT_EQ(clock.NowNanos(), 30);
}

TEST(EventLoopTest, StepEndsRunFirstAmongEventsDueAtTheSameTime) {
  ManualClock clock;
  EventLoop loop(&clock);
  std::vector<int> order;
  loop.At(10, [&] { order.push_back(1); });
  loop.At(
      10, [&] { order.push_back(2); }, EventLoop::Order::kStepEnd);
  loop.At(5, [&] { order.push_back(0); });
  loop.At(
      10, [&] { order.push_back(3); }, EventLoop::Order::kStepEnd);
  loop.Run();
  EXPECT_THAT(order, ElementsAre(0, 2, 3, 1));
}

TEST(EventLoopTest, RunStopsBeforeEventsPastItsBound) {
  ManualClock clock(100);
  EventLoop loop(&clock);
  int ran = 0;
  loop.At(150, [&] { ++ran; });
  loop.At(250, [&] { ++ran; });
  EXPECT_EQ(loop.Run(200), 1);
  EXPECT_EQ(clock.NowNanos(), 150);  // the last event run, not the bound
  EXPECT_EQ(loop.pending(), 1u);
  EXPECT_EQ(loop.Run(), 1);
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(loop.events_run(), 2);
}

}  // namespace
}  // namespace tandem::sim
