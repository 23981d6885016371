// PrefillService's liveness while its sync pool is spent: with the server's sync threads capped and
// every one but the poller held by a WatchKvEvents stream (open until its client goes away), a
// further sync call is turned away (RESOURCE_EXHAUSTED), yet GetLoad (a callback-API method) and
// grpc.health.v1.Health/Check (gRPC's callback-based default health service) answer within the
// router's 500 ms probe deadline, Check turning NOT_SERVING when the health service is told to (as
// a drain does).
#include <memory>
#include <vector>

#include "common/serving/grpc_server.h"
#include "gtest/gtest.h"
#include "tests/common/serving/liveness_probe.h"
#include "tests/prefill_node/prefill_test_nodes.h"

namespace tandem {
namespace {

using ::tandem::testing::LivenessAnswer;
using ::tandem::testing::PrefillNode;
using ::tandem::testing::WatchCall;

constexpr int kSyncThreads = 4;

TEST(PrefillServiceLivenessTest, AnswersLoadAndHealthWhileEverySyncThreadIsHeld) {
  PrefillNode node({}, GrpcServerOptions{.max_sync_threads = kSyncThreads});
  std::vector<std::unique_ptr<WatchCall>> held;
  for (int i = 0; i < kSyncThreads - 1; ++i) {
    held.push_back(std::make_unique<WatchCall>(node));
    v1::KvEvents first;
    ASSERT_TRUE(held.back()->reader->Read(&first)) << "stream " << i;
    ASSERT_TRUE(first.reset()) << "stream " << i;
  }

  const LivenessAnswer answer = testing::ExpectLiveWithoutSyncThreads(
      *node.server.server, node.channel, *node.stub, "prefill");
  EXPECT_EQ(answer.load.incarnation(), node.transport.incarnation());

  for (std::unique_ptr<WatchCall>& call : held) {
    EXPECT_EQ(call->Cancel().error_code(), grpc::StatusCode::CANCELLED);
  }
}

}  // namespace
}  // namespace tandem
