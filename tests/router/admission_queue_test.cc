// AdmissionQueue: slots, arrival order, the count and token bounds, the wait's end by time or by
// the client leaving.
#include "router/admission_queue.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

bool Never() { return false; }

AdmissionOptions Options(int64_t running, int64_t queued, int64_t tokens = 1 << 20) {
  return AdmissionOptions{.max_running = running,
                          .max_queued_requests = queued,
                          .max_queued_prompt_tokens = tokens,
                          .max_wait = absl::Seconds(10)};
}

// Waits (bounded) until `q` holds `n` waiters.
bool WaitForQueued(const AdmissionQueue& q, int64_t n) {
  for (int i = 0; i < 2000 && q.queued() != n; ++i) absl::SleepFor(absl::Milliseconds(1));
  return q.queued() == n;
}

TEST(AdmissionQueueTest, FreeSlotsAdmitAtOnceAndAFullQueueRefusesAtOnce) {
  AdmissionQueue q(Options(2, 0), Clock::Real());
  EXPECT_EQ(q.Admit(10, absl::InfiniteFuture(), Never), Admission::kAdmitted);
  EXPECT_EQ(q.Admit(10, absl::InfiniteFuture(), Never), Admission::kAdmitted);
  EXPECT_EQ(q.Admit(10, absl::InfiniteFuture(), Never), Admission::kQueueFull);
  EXPECT_EQ(q.running(), 2);
  q.Release();
  EXPECT_EQ(q.Admit(10, absl::InfiniteFuture(), Never), Admission::kAdmitted);
}

TEST(AdmissionQueueTest, WaitersGetSlotsInArrivalOrder) {
  AdmissionQueue q(Options(1, 10), Clock::Real());
  ASSERT_EQ(q.Admit(1, absl::InfiniteFuture(), Never), Admission::kAdmitted);
  std::vector<int> order;
  absl::Mutex mu;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([&, i] {
      EXPECT_EQ(q.Admit(1, absl::InfiniteFuture(), Never), Admission::kAdmitted);
      {
        absl::MutexLock lock(&mu);
        order.push_back(i);
      }
      q.Release();
    });
    ASSERT_TRUE(WaitForQueued(q, i + 1));  // queued in index order
  }
  q.Release();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(q.running(), 0);
  EXPECT_EQ(q.queued_prompt_tokens(), 0);
}

TEST(AdmissionQueueTest, QueuedPromptTokensAreBounded) {
  AdmissionQueue q(Options(1, 10, 100), Clock::Real());
  ASSERT_EQ(q.Admit(1, absl::InfiniteFuture(), Never), Admission::kAdmitted);
  std::thread first([&] {
    EXPECT_EQ(q.Admit(80, absl::InfiniteFuture(), Never), Admission::kAdmitted);
    q.Release();
  });
  ASSERT_TRUE(WaitForQueued(q, 1));
  EXPECT_EQ(q.Admit(30, absl::InfiniteFuture(), Never), Admission::kQueueFull);  // 110 > 100
  q.Release();
  first.join();
}

TEST(AdmissionQueueTest, APromptOverTheTokenBudgetMayStillWaitAlone) {
  AdmissionQueue q(Options(1, 10, 100), Clock::Real());
  ASSERT_EQ(q.Admit(1, absl::InfiniteFuture(), Never), Admission::kAdmitted);
  std::thread big([&] {
    EXPECT_EQ(q.Admit(500, absl::InfiniteFuture(), Never), Admission::kAdmitted);
    q.Release();
  });
  ASSERT_TRUE(WaitForQueued(q, 1));
  q.Release();
  big.join();
}

TEST(AdmissionQueueTest, TheWaitEndsAtMaxWaitOrTheDeadline) {
  ManualClock clock(1'000'000'000);
  AdmissionOptions o = Options(1, 10);
  o.max_wait = absl::Seconds(5);
  AdmissionQueue q(o, &clock);
  ASSERT_EQ(q.Admit(1, absl::InfiniteFuture(), Never), Admission::kAdmitted);
  Admission late = Admission::kAdmitted;
  std::thread waiter([&] { late = q.Admit(1, absl::InfiniteFuture(), Never); });
  ASSERT_TRUE(WaitForQueued(q, 1));
  clock.AdvanceSeconds(5);
  waiter.join();
  EXPECT_EQ(late, Admission::kTimedOut);
  EXPECT_EQ(q.queued(), 0);
  // The request's own deadline comes first.
  const absl::Time deadline = clock.Now() + absl::Seconds(1);
  std::thread waiter2([&] { late = q.Admit(1, deadline, Never); });
  ASSERT_TRUE(WaitForQueued(q, 1));
  clock.AdvanceSeconds(1);
  waiter2.join();
  EXPECT_EQ(late, Admission::kTimedOut);
  EXPECT_EQ(q.running(), 1);  // the waiters never took a slot
}

TEST(AdmissionQueueTest, AClientThatLeavesStopsWaiting) {
  AdmissionQueue q(Options(1, 10), Clock::Real());
  ASSERT_EQ(q.Admit(1, absl::InfiniteFuture(), Never), Admission::kAdmitted);
  std::atomic<bool> gone{false};
  Admission result = Admission::kAdmitted;
  std::thread waiter(
      [&] { result = q.Admit(1, absl::InfiniteFuture(), [&] { return gone.load(); }); });
  ASSERT_TRUE(WaitForQueued(q, 1));
  gone = true;
  waiter.join();
  EXPECT_EQ(result, Admission::kCancelled);
  EXPECT_EQ(q.queued(), 0);
  q.Release();
  EXPECT_EQ(q.running(), 0);
}

}  // namespace
}  // namespace tandem
