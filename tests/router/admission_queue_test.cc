// AdmissionQueue: slots, arrival order, the count and token bounds, leaving the queue.
#include "router/admission_queue.h"

#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

AdmissionOptions Options(int64_t running, int64_t queued, int64_t tokens = 1 << 20) {
  return AdmissionOptions{.max_running = running,
                          .max_queued_requests = queued,
                          .max_queued_prompt_tokens = tokens,
                          .max_wait = absl::Seconds(10)};
}

void Nothing() {}

TEST(AdmissionQueueTest, FreeSlotsAdmitAtOnceAndAFullQueueRefusesAtOnce) {
  AdmissionQueue q(Options(2, 0));
  uint64_t ticket = 0;
  EXPECT_EQ(q.Admit(10, Nothing, &ticket), Admission::kAdmitted);
  EXPECT_EQ(q.Admit(10, Nothing, &ticket), Admission::kAdmitted);
  EXPECT_EQ(q.Admit(10, Nothing, &ticket), Admission::kQueueFull);
  EXPECT_EQ(q.running(), 2);
  q.Release();
  EXPECT_EQ(q.Admit(10, Nothing, &ticket), Admission::kAdmitted);
}

TEST(AdmissionQueueTest, WaitersGetSlotsInArrivalOrder) {
  AdmissionQueue q(Options(1, 10));
  uint64_t ticket = 0;
  ASSERT_EQ(q.Admit(1, Nothing, &ticket), Admission::kAdmitted);
  std::vector<int> order;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(q.Admit(
                  1, [&order, i] { order.push_back(i); }, &ticket),
              Admission::kQueued);
  }
  EXPECT_EQ(q.queued(), 3);
  for (int i = 0; i < 3; ++i) q.Release();  // each admits the next waiter
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(q.running(), 1);
  EXPECT_EQ(q.queued_prompt_tokens(), 0);
}

TEST(AdmissionQueueTest, QueuedPromptTokensAreBounded) {
  AdmissionQueue q(Options(1, 10, 100));
  uint64_t ticket = 0;
  ASSERT_EQ(q.Admit(1, Nothing, &ticket), Admission::kAdmitted);
  ASSERT_EQ(q.Admit(80, Nothing, &ticket), Admission::kQueued);
  EXPECT_EQ(q.Admit(30, Nothing, &ticket), Admission::kQueueFull);  // 110 > 100
  EXPECT_EQ(q.Admit(20, Nothing, &ticket), Admission::kQueued);     // 100
  EXPECT_EQ(q.queued_prompt_tokens(), 100);
}

TEST(AdmissionQueueTest, APromptOverTheTokenBudgetMayStillWaitAlone) {
  AdmissionQueue q(Options(1, 10, 100));
  uint64_t ticket = 0;
  ASSERT_EQ(q.Admit(1, Nothing, &ticket), Admission::kAdmitted);
  bool admitted = false;
  ASSERT_EQ(q.Admit(
                500, [&] { admitted = true; }, &ticket),
            Admission::kQueued);
  q.Release();
  EXPECT_TRUE(admitted);
}

TEST(AdmissionQueueTest, AWaiterThatLeavesIsSkippedAndOneAdmittedCannotLeave) {
  AdmissionQueue q(Options(1, 10));
  uint64_t first = 0, second = 0, unused = 0;
  ASSERT_EQ(q.Admit(1, Nothing, &unused), Admission::kAdmitted);
  bool first_admitted = false, second_admitted = false;
  ASSERT_EQ(q.Admit(
                5, [&] { first_admitted = true; }, &first),
            Admission::kQueued);
  ASSERT_EQ(q.Admit(
                7, [&] { second_admitted = true; }, &second),
            Admission::kQueued);
  EXPECT_TRUE(q.Leave(first));  // timed out, say
  EXPECT_FALSE(q.Leave(first));
  EXPECT_EQ(q.queued_prompt_tokens(), 7);
  q.Release();
  EXPECT_FALSE(first_admitted);
  EXPECT_TRUE(second_admitted);
  EXPECT_FALSE(q.Leave(second));  // it holds a slot now
  EXPECT_EQ(q.running(), 1);
  EXPECT_EQ(q.queued(), 0);
}

}  // namespace
}  // namespace tandem
