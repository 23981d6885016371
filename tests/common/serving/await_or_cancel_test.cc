// AwaitOrCancel and CancelOnce without gRPC: a fake "is cancelled" function, a ManualClock, and a
// fake wait that counts polls instead of sleeping.
#include "common/serving/await_or_cancel.h"

#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/util/clock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

// The work a test waits on: it answers `polls_after_cancel` polls after it was asked to stop, or
// when the test marks it done.
struct FakeWork {
  int polls = 0;
  int cancels = 0;
  int polls_after_cancel = 2;
  bool done = false;
  int cancelled_at_poll = -1;

  bool WaitFor(absl::Duration interval) {
    EXPECT_EQ(interval, kAwaitPollInterval);
    ++polls;
    if (cancels > 0 && polls - cancelled_at_poll > polls_after_cancel) done = true;
    return done;
  }
  void Cancel() {
    ++cancels;
    cancelled_at_poll = polls;
  }
};

CancelOnce::Options OptionsFor(FakeWork& work, Clock* clock) {
  return {.clock = clock, .on_cancel = [&work] { work.Cancel(); }};
}

TEST(AwaitOrCancelTest, ReturnsAtOnceWhenTheConditionHolds) {
  ManualClock clock;
  FakeWork work;
  work.done = true;
  CancelOnce::Options options = OptionsFor(work, &clock);
  options.is_cancelled = [] { return true; };
  options.deadline = clock.Now();
  CancelOnce cancel(std::move(options));
  EXPECT_EQ(AwaitOrCancel([&](absl::Duration d) { return work.WaitFor(d); }, cancel),
            CancelReason::kNone);
  EXPECT_EQ(work.polls, 1);
  EXPECT_EQ(work.cancels, 0);
}

TEST(AwaitOrCancelTest, CancelsOnceWhenTheCallerGoesAwayAndWaitsForTheAnswer) {
  ManualClock clock;
  FakeWork work;
  bool gone = false;
  CancelOnce::Options options = OptionsFor(work, &clock);
  options.is_cancelled = [&] { return gone || work.polls >= 3; };
  CancelOnce cancel(std::move(options));
  EXPECT_EQ(AwaitOrCancel([&](absl::Duration d) { return work.WaitFor(d); }, cancel),
            CancelReason::kCancelled);
  EXPECT_EQ(work.cancels, 1);  // asked once, though is_cancelled stayed true
  EXPECT_EQ(work.cancelled_at_poll, 3);
  EXPECT_EQ(work.polls, 6);  // the wait went on until the work answered
  EXPECT_EQ(cancel.reason(), CancelReason::kCancelled);
}

TEST(AwaitOrCancelTest, DeadlineFollowsTheInjectedClock) {
  ManualClock clock;
  FakeWork work;
  work.polls_after_cancel = 0;
  CancelOnce::Options options = OptionsFor(work, &clock);
  options.deadline = clock.Now() + absl::Seconds(10);
  options.is_cancelled = [] { return false; };
  CancelOnce cancel(std::move(options));
  int waits = 0;
  const CancelReason reason = AwaitOrCancel(
      [&](absl::Duration d) {
        // Virtual time: 4 s per poll after the first, so the fourth check sees 12 s >= 10 s.
        if (++waits > 1) clock.AdvanceSeconds(4);
        return work.WaitFor(d);
      },
      cancel);
  EXPECT_EQ(reason, CancelReason::kDeadline);
  EXPECT_EQ(work.cancels, 1);
  EXPECT_EQ(work.cancelled_at_poll, 4);
}

TEST(AwaitOrCancelTest, DeadlineIsReachedAtItsInstant) {
  ManualClock clock;
  CancelOnce cancel({.clock = &clock, .deadline = clock.Now() + absl::Seconds(1)});
  EXPECT_EQ(cancel.Check(), CancelReason::kNone);
  clock.AdvanceSeconds(1);
  EXPECT_EQ(cancel.Check(), CancelReason::kDeadline);
}

TEST(AwaitOrCancelTest, TheCallersCancellationWinsOverAPassedDeadline) {
  ManualClock clock;
  int cancels = 0;
  CancelOnce cancel({.clock = &clock,
                     .deadline = clock.Now() - absl::Seconds(1),
                     .is_cancelled = [] { return true; },
                     .on_cancel = [&] { ++cancels; }});
  EXPECT_EQ(cancel.Check(), CancelReason::kCancelled);
  EXPECT_EQ(cancel.Check(), CancelReason::kCancelled);
  EXPECT_EQ(cancels, 1);
}

TEST(AwaitOrCancelTest, CancelNowBeforeTheWaitKeepsItsReasonAndRunsOnce) {
  ManualClock clock;
  FakeWork work;
  CancelOnce::Options options = OptionsFor(work, &clock);
  options.deadline = clock.Now();  // passed, but the earlier reason stays
  CancelOnce cancel(std::move(options));
  cancel.CancelNow(CancelReason::kCancelled);
  EXPECT_TRUE(cancel.cancelled());
  cancel.CancelNow(CancelReason::kDeadline);
  EXPECT_EQ(AwaitOrCancel([&](absl::Duration d) { return work.WaitFor(d); }, cancel),
            CancelReason::kCancelled);
  EXPECT_EQ(work.cancels, 1);
}

TEST(AwaitOrCancelTest, NoSourcesWaitsUntilTheConditionHolds) {
  FakeWork work;
  CancelOnce cancel({});
  EXPECT_EQ(AwaitOrCancel(
                [&](absl::Duration d) {
                  work.done = work.polls >= 4;
                  return work.WaitFor(d);
                },
                cancel),
            CancelReason::kNone);
  EXPECT_EQ(work.polls, 5);
}

// The mutex form with a real thread answering: the give-up action runs without the mutex held (it
// takes the mutex itself here, as an engine's answer might).
TEST(AwaitOrCancelTest, MutexConditionAnsweredByAnotherThread) {
  absl::Mutex mu;
  bool answered = false;
  std::thread engine;
  CancelOnce cancel({.is_cancelled = [] { return true; },
                     .on_cancel =
                         [&] {
                           absl::MutexLock lock(&mu);  // would deadlock if held by the waiter
                           engine = std::thread([&] {
                             absl::MutexLock lock(&mu);
                             answered = true;
                           });
                         }});
  const CancelReason reason =
      AwaitOrCancel(mu, absl::Condition(&answered), cancel, absl::Milliseconds(1));
  engine.join();
  EXPECT_EQ(reason, CancelReason::kCancelled);
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(answered);
}

}  // namespace
}  // namespace tandem
