// CallTicker: every watched call is ticked each interval until it is unwatched or gone; the thread
// sleeps while nothing is watched.
#include "common/serving/call_ticker.h"

#include <atomic>
#include <memory>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

struct CountingCall : CallTicker::Tickable {
  void OnTick() override { ticks.fetch_add(1); }
  std::atomic<int> ticks{0};
};

// Waits up to 2 s for `call` to reach `n` ticks.
bool AwaitTicks(const CountingCall& call, int n) {
  for (int i = 0; i < 200 && call.ticks.load() < n; ++i) absl::SleepFor(absl::Milliseconds(10));
  return call.ticks.load() >= n;
}

TEST(CallTickerTest, TicksWatchedCallsUntilUnwatched) {
  CallTicker ticker(absl::Milliseconds(5));
  auto a = std::make_shared<CountingCall>();
  auto b = std::make_shared<CountingCall>();
  ticker.Watch(a);
  ticker.Watch(b);
  ticker.Watch(a);  // once
  EXPECT_EQ(ticker.watched(), 2);
  EXPECT_TRUE(AwaitTicks(*a, 3));
  EXPECT_TRUE(AwaitTicks(*b, 3));
  ticker.Unwatch(a.get());
  EXPECT_EQ(ticker.watched(), 1);
  absl::SleepFor(absl::Milliseconds(20));  // a tick under way when Unwatch ran may still land
  const int after = a->ticks.load();
  const int b_before = b->ticks.load();
  EXPECT_TRUE(AwaitTicks(*b, b_before + 3));
  EXPECT_EQ(a->ticks.load(), after);
}

TEST(CallTickerTest, DropsCallsThatAreGone) {
  CallTicker ticker(absl::Milliseconds(5));
  auto call = std::make_shared<CountingCall>();
  ticker.Watch(call);
  EXPECT_TRUE(AwaitTicks(*call, 1));
  call.reset();
  for (int i = 0; i < 200 && ticker.watched() > 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(ticker.watched(), 0);
  // A call that is already gone is not watched at all.
  ticker.Watch(std::weak_ptr<CountingCall>());
  EXPECT_EQ(ticker.watched(), 0);
}

}  // namespace
}  // namespace tandem
