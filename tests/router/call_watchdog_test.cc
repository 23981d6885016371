// CallGuard / CallWatchdog: expired attempts and requests cancel the node calls attached to them;
// a context attached after that is cancelled at once; the watchdog thread does the polling.
#include "router/call_watchdog.h"

#include <chrono>
#include <memory>

#include "common/util/clock.h"
#include "gtest/gtest.h"
#include "router/node.h"
#include "tests/router/fake_nodes.h"

namespace tandem {
namespace {

using testing::FakeDecodeNode;

// Runs GetLoad on `ctx` against `node`: CANCELLED if the context was cancelled before.
grpc::StatusCode CallWith(grpc::ClientContext* ctx, const FakeDecodeNode& node) {
  Node client(NodeRole::kDecode, node.address(), 1000);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::LoadRequest request;
  v1::NodeLoad load;
  return client.decode().GetLoad(ctx, request, &load).error_code();
}

TEST(CallGuardTest, AnExpiredAttemptCancelsItsCalls) {
  FakeDecodeNode d;
  CallGuard guard(nullptr, absl::Now() + absl::Hours(1));
  grpc::ClientContext attached, untouched;
  guard.Attach(&attached);
  guard.SetAttemptDeadline(absl::Now() - absl::Milliseconds(1));
  guard.Poll(absl::Now());
  EXPECT_TRUE(guard.attempt_timed_out());
  EXPECT_FALSE(guard.timed_out());
  EXPECT_EQ(CallWith(&attached, d), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(CallWith(&untouched, d), grpc::StatusCode::OK);
  // The next attempt starts clean.
  guard.SetAttemptDeadline(absl::InfiniteFuture());
  EXPECT_FALSE(guard.attempt_timed_out());
}

TEST(CallGuardTest, AnExpiredRequestCancelsNowAndLater) {
  FakeDecodeNode d;
  CallGuard guard(nullptr, absl::Now() - absl::Milliseconds(1));
  guard.Poll(absl::Now());
  EXPECT_TRUE(guard.timed_out());
  grpc::ClientContext late;
  guard.Attach(&late);  // cancelled on attach
  EXPECT_EQ(CallWith(&late, d), grpc::StatusCode::CANCELLED);
}

TEST(CallGuardTest, DetachedAndClosedGuardsAreLeftAlone) {
  FakeDecodeNode d;
  CallGuard guard(nullptr, absl::Now() + absl::Hours(1));
  grpc::ClientContext detached;
  guard.Attach(&detached);
  guard.Detach(&detached);
  guard.SetAttemptDeadline(absl::Now() - absl::Milliseconds(1));
  guard.Close();
  guard.Poll(absl::Now());
  EXPECT_FALSE(guard.attempt_timed_out());
  EXPECT_EQ(CallWith(&detached, d), grpc::StatusCode::OK);
}

TEST(CallWatchdogTest, PollsRegisteredGuards) {
  CallWatchdog watchdog(absl::Milliseconds(5));
  auto guard = std::make_shared<CallGuard>(nullptr, absl::Now() + absl::Milliseconds(20));
  watchdog.Add(guard);
  EXPECT_TRUE(FakeDecodeNode::WaitUntil([&] { return guard->timed_out(); }));
  watchdog.Remove(guard);
}

// The guards see the injected clock's time: a request is due when that clock says so, however
// much real time passes (the virtual-time simulator drives the router's deadlines this way).
TEST(CallWatchdogTest, GuardsSeeTheInjectedClock) {
  ManualClock clock(absl::ToUnixNanos(absl::FromUnixSeconds(1'800'000'000)));
  CallWatchdog watchdog(absl::Milliseconds(2), &clock);
  auto guard = std::make_shared<CallGuard>(nullptr, clock.Now() + absl::Seconds(30));
  watchdog.Add(guard);
  absl::SleepFor(absl::Milliseconds(50));  // many polls, all before the virtual deadline
  EXPECT_FALSE(guard->timed_out());
  clock.AdvanceSeconds(31);
  EXPECT_TRUE(FakeDecodeNode::WaitUntil([&] { return guard->timed_out(); }));
  watchdog.Remove(guard);
}

}  // namespace
}  // namespace tandem
