// SerialExecutor over a WorkerPool: tasks run in posting order, one at a time, never inside Post,
// and a task may post more; RunOrPost runs inline only where that is safe.
#include "common/util/serial_executor.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(SerialExecutorTest, RunsTasksInOrderOneAtATimeFromManyPosters) {
  WorkerPool pool(4);
  auto executor = SerialExecutor::Create(&pool);
  std::atomic<int> running{0};
  std::atomic<int> overlaps{0};
  absl::Mutex mu;
  std::vector<int> seen[4];
  absl::Notification all_done;
  std::atomic<int> left{4 * 500};
  std::vector<std::thread> posters;
  for (int p = 0; p < 4; ++p) {
    posters.emplace_back([&, p] {
      for (int i = 0; i < 500; ++i) {
        executor->Post([&, p, i] {
          if (running.fetch_add(1) != 0) ++overlaps;
          seen[p].push_back(i);  // unlocked: the executor serializes
          running.fetch_sub(1);
          if (left.fetch_sub(1) == 1) all_done.Notify();
        });
      }
    });
  }
  for (auto& t : posters) t.join();
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  // An acquire TSan sees (Debian's abseil waits inside the uninstrumented library).
  ASSERT_TRUE(all_done.HasBeenNotified());
  EXPECT_EQ(overlaps.load(), 0);
  for (int p = 0; p < 4; ++p) {
    ASSERT_EQ(seen[p].size(), 500u);
    for (int i = 0; i < 500; ++i) EXPECT_EQ(seen[p][i], i);  // each poster's order kept
  }
}

TEST(SerialExecutorTest, PostNeverRunsTheTaskInline) {
  WorkerPool pool(1);
  auto executor = SerialExecutor::Create(&pool);
  const std::thread::id me = std::this_thread::get_id();
  absl::Notification done;
  std::thread::id ran_on;
  executor->Post([&] {
    ran_on = std::this_thread::get_id();
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  // An acquire TSan sees (Debian's abseil waits inside the uninstrumented library).
  ASSERT_TRUE(done.HasBeenNotified());
  EXPECT_NE(ran_on, me);
}

TEST(SerialExecutorTest, ATaskMayPostMoreWhichRunAfterIt) {
  WorkerPool pool(2);
  auto executor = SerialExecutor::Create(&pool);
  std::vector<int> order;
  absl::Notification done;
  executor->Post([&] {
    executor->Post([&] {
      order.push_back(2);
      done.Notify();
    });
    order.push_back(1);
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  // An acquire TSan sees (Debian's abseil waits inside the uninstrumented library).
  ASSERT_TRUE(done.HasBeenNotified());
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(SerialExecutorTest, RunOrPostRunsInlineWhenIdleThenWhatTheTaskPosted) {
  WorkerPool pool(1);
  auto executor = SerialExecutor::Create(&pool);
  const std::thread::id me = std::this_thread::get_id();
  std::vector<std::thread::id> ran_on;
  executor->RunOrPost([&] {
    ran_on.push_back(std::this_thread::get_id());
    executor->Post([&] { ran_on.push_back(std::this_thread::get_id()); });
  });
  // Both ran before RunOrPost returned, here: the posted one by the inline drain.
  ASSERT_EQ(ran_on.size(), 2u);
  EXPECT_EQ(ran_on[0], me);
  EXPECT_EQ(ran_on[1], me);
}

TEST(SerialExecutorTest, RunOrPostPostsUnderAnInlineBlock) {
  WorkerPool pool(1);
  auto executor = SerialExecutor::Create(&pool);
  const std::thread::id me = std::this_thread::get_id();
  absl::Notification done;
  std::thread::id ran_on;
  {
    SerialExecutor::InlineBlock no_inline;
    executor->RunOrPost([&] {
      ran_on = std::this_thread::get_id();
      done.Notify();
    });
  }
  EXPECT_FALSE(SerialExecutor::InlineBlock::active());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(done.HasBeenNotified());
  EXPECT_NE(ran_on, me);
}

TEST(SerialExecutorTest, RunOrPostInsideAnotherExecutorsTaskPosts) {
  WorkerPool pool(1);
  auto outer = SerialExecutor::Create(&pool);
  auto inner = SerialExecutor::Create(&pool);
  const std::thread::id me = std::this_thread::get_id();
  absl::Notification done;
  std::thread::id inner_ran_on;
  outer->RunOrPost([&] {  // runs here, inline
    inner->RunOrPost([&] {
      inner_ran_on = std::this_thread::get_id();
      done.Notify();
    });
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(done.HasBeenNotified());
  EXPECT_NE(inner_ran_on, me);  // on a worker: handlers of two objects never nest
}

TEST(SerialExecutorTest, RunOrPostWhileBusyKeepsOrderAndNeverOverlaps) {
  WorkerPool pool(2);
  auto executor = SerialExecutor::Create(&pool);
  std::vector<int> order;
  std::atomic<int> running{0};
  std::atomic<int> overlaps{0};
  absl::Notification first_running;
  absl::Notification release_first;
  absl::Notification all_done;
  executor->Post([&] {
    first_running.Notify();
    release_first.WaitForNotificationWithTimeout(absl::Seconds(10));
    order.push_back(0);
  });
  ASSERT_TRUE(first_running.WaitForNotificationWithTimeout(absl::Seconds(10)));
  for (int i = 1; i <= 100; ++i) {
    executor->RunOrPost([&, i] {  // busy: queued behind the first, never inline here
      if (running.fetch_add(1) != 0) ++overlaps;
      order.push_back(i);
      running.fetch_sub(1);
      if (i == 100) all_done.Notify();
    });
  }
  release_first.Notify();
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(all_done.HasBeenNotified());
  EXPECT_EQ(overlaps.load(), 0);
  ASSERT_EQ(order.size(), 101u);
  for (int i = 0; i <= 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(WorkerPoolTest, RunsWhatWasQueuedBeforeItStops) {
  std::atomic<int> ran{0};
  {
    WorkerPool pool(2);
    for (int i = 0; i < 100; ++i) pool.Schedule([&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 100);
}

}  // namespace
}  // namespace tandem
