// DecodeService's liveness while its sync pool is spent: with the server's sync threads capped and
// every one but the poller held by a ConnectKv call (a sync method; an NCCL accept can take a
// while), a further sync call is turned away (RESOURCE_EXHAUSTED), yet GetLoad (a callback-API
// method) and grpc.health.v1.Health/Check (gRPC's callback-based default health service) answer
// within the router's 500 ms probe deadline, Check turning NOT_SERVING when the health service is
// told to (as a drain does). Reserve streams, on the callback API too, still open and wait for KV.
#include <atomic>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/notification.h"
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
  std::atomic<int> connecting{0};
  absl::Notification release;
  DecodeNode node(GrpcServerOptions{.max_sync_threads = kSyncThreads}, /*num_blocks=*/32,
                  [&](DecodeServiceOptions& options) {
                    options.accept_kv_connection = [&](std::string_view, uint64_t) {
                      connecting.fetch_add(1);
                      release.WaitForNotification();
                      return absl::OkStatus();
                    };
                  });
  // Each ConnectKv holds its sync thread until `release`.
  std::vector<std::thread> connects;
  absl::Cleanup join = [&] {
    release.Notify();
    for (std::thread& t : connects) t.join();
  };
  for (int i = 0; i < kSyncThreads - 1; ++i) {
    connects.emplace_back([&node] {
      grpc::ClientContext context;
      v1::ConnectKvResponse response;
      EXPECT_TRUE(node.stub->ConnectKv(&context, v1::ConnectKvRequest(), &response).ok());
    });
  }
  for (int i = 0; i < 500 && connecting.load() < kSyncThreads - 1; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(connecting.load(), kSyncThreads - 1);
  // Reserve streams need no sync thread: each gets its handoff and waits for KV that never comes
  // (30 s lease).
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
