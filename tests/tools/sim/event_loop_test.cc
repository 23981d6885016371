// tandem-sim's event loop: time order, ties in scheduling order, Run's bound, the clock.
#include "tools/sim/event_loop.h"

#include <utility>
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

// AtEach's events run exactly where At would have put them: the same script of events, once
// with At for every event and once with one AtEach for the "arrivals", gives the same order.
TEST(EventLoopTest, AtEachRunsAsAtWouldHave) {
  const std::vector<int64_t> arrivals = {30, 10, 30, 20, 10, 40, 0};
  auto script = [&](bool each) {
    ManualClock clock;
    EventLoop loop(&clock);
    std::vector<std::pair<int, int64_t>> ran;                 // (id, time)
    loop.At(10, [&] { ran.emplace_back(100, loop.now()); });  // before the arrivals: first of 10
    auto arrive = [&](size_t i) {
      ran.emplace_back(static_cast<int>(i), loop.now());
      if (i == 3) loop.At(30, [&] { ran.emplace_back(101, loop.now()); });  // after those at 30
      if (i == 1) {
        loop.At(
            10, [&] { ran.emplace_back(102, loop.now()); }, EventLoop::Order::kStepEnd);
      }
    };
    if (each) {
      loop.AtEach(arrivals, arrive);
    } else {
      for (size_t i = 0; i < arrivals.size(); ++i) loop.At(arrivals[i], [&, i] { arrive(i); });
    }
    loop.At(30, [&] { ran.emplace_back(103, loop.now()); });  // after the arrivals at 30
    loop.At(
        40, [&] { ran.emplace_back(104, loop.now()); }, EventLoop::Order::kStepEnd);
    EXPECT_EQ(loop.pending(), arrivals.size() + 3);
    EXPECT_EQ(loop.Run(25), 6);  // 6 at 0; 100, 1, 102 (a step end: first of the rest) and 4 at 10;
                                 // 3 at 20
    EXPECT_EQ(loop.Run(), 6);
    EXPECT_EQ(loop.pending(), 0u);
    return ran;
  };
  const auto with_at = script(false);
  EXPECT_THAT(with_at, ElementsAre(std::pair(6, 0), std::pair(100, 10), std::pair(1, 10),
                                   std::pair(102, 10), std::pair(4, 10), std::pair(3, 20),
                                   std::pair(0, 30), std::pair(2, 30), std::pair(103, 30),
                                   std::pair(101, 30), std::pair(104, 40), std::pair(5, 40)));
  EXPECT_EQ(script(true), with_at);
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
