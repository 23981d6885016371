// DecodeService's liveness while its sync pool is spent: with the server's sync threads capped and
// every one but the poller held by a Reserve stream waiting for KV, a further sync call is turned
// away (RESOURCE_EXHAUSTED), yet GetLoad (a callback-API method) and grpc.health.v1.Health/Check
// (gRPC's callback-based default health service) answer within the router's 500 ms probe deadline,
// Check turning NOT_SERVING when the health service is told to (as a drain does).
#include <memory>
#include <vector>

#include "common/serving/grpc_server.h"
#include "gtest/gtest.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/serving/liveness_probe.h"
#include "tests/decode_node/decode_test_node.h"

namespace tandem {
namespace {

using ::tandem::testing::DecodeNode;
using ::tandem::testing::LivenessAnswer;
using ::tandem::testing::ReserveCall;

constexpr int kSyncThreads = 4;

TEST(DecodeServiceLivenessTest, AnswersLoadAndHealthWhileEverySyncThreadIsHeld) {
  DecodeNode node(GrpcServerOptions{.max_sync_threads = kSyncThreads});
  // Each Reserve holds its sync thread from the handoff until KV that never comes (30 s lease).
  std::vector<std::unique_ptr<ReserveCall>> held;
  for (int i = 0; i < kSyncThreads - 1; ++i) {
    held.push_back(std::make_unique<ReserveCall>(node, MakePrompt(8, i + 1), 4));
    v1::DecodeEvent first;
    ASSERT_TRUE(held.back()->reader->Read(&first)) << "stream " << i;
    ASSERT_TRUE(first.has_handoff()) << "stream " << i;
  }

  const LivenessAnswer answer = testing::ExpectLiveWithoutSyncThreads(
      *node.server.server, node.channel, *node.stub, "decode");
  // The load is the engine's, published while the streams wait.
  EXPECT_EQ(answer.load.num_awaiting_kv(), kSyncThreads - 1);

  for (std::unique_ptr<ReserveCall>& call : held) {
    call->context.TryCancel();
    EXPECT_EQ(call->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
}

}  // namespace
}  // namespace tandem
