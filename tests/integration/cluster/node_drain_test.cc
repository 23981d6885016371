// Graceful drain, as Kubernetes does it: SIGTERM reaches a decode node while it streams. The
// stream in flight finishes with every token, requests sent after the signal are served by the
// other decode node, and the drained node exits 0 within its --drain-timeout-ms. A node whose
// drain timeout passes cancels what is left and still exits 0 (no hang).
#include <signal.h>
#include <sys/wait.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/backend/sim/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

// Sim nodes (Llama-3.1-8B on an H100, slowed 4×): a decode step takes tens of milliseconds, so a
// 60-token stream lasts a few seconds — long enough to signal the node in the middle of it.
const std::vector<std::string> kSlowSimArgs = {"--backend",
                                               "sim",
                                               "--sim-model",
                                               "llama-3.1-8b",
                                               "--sim-kv-scale",
                                               "128",
                                               "--sim-kv-blocks",
                                               "512",
                                               "--sim-time-scale",
                                               "4",
                                               "--max-num-batched-tokens",
                                               "2048"};

std::vector<int> Prompt(int salt) {
  std::vector<int> p;
  for (int j = 0; j < 40; ++j) p.push_back(1000 + (salt * 7919 + j * 31) % 20000);
  return p;
}

struct StreamResult {
  std::vector<int> tokens;
  grpc::Status status;
};

// Streams `request` through the router; notifies `first_token` when the first token arrives.
StreamResult Stream(const std::string& router, const v1::GenerateRequest& request,
                    absl::Notification* first_token) {
  auto stub =
      v1::Generation::NewStub(grpc::CreateChannel(router, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto reader = stub->Generate(&ctx, request);
  StreamResult result;
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    for (const v1::Token& token : response.tokens()) result.tokens.push_back(token.id());
    if (!result.tokens.empty() && !first_token->HasBeenNotified()) first_token->Notify();
  }
  result.status = reader->Finish();
  if (!first_token->HasBeenNotified()) first_token->Notify();
  return result;
}

class NodeDrainTest : public ::testing::Test {
 protected:
  void StartCluster(const std::string& drain_timeout_ms) {
    ClusterSpec spec;
    spec.model_dir = TestModelDir("llama3.2");
    spec.num_prefill = 1;
    spec.num_decode = 2;
    spec.node_args = kSlowSimArgs;
    spec.decode_args = {"--drain-timeout-ms", drain_timeout_ms};
    spec.router_args = {"--policy", "round_robin", "--health-interval-ms", "100"};
    ASSERT_NO_FATAL_FAILURE(cluster_.Start(spec));
  }

  // The decode node the router put the first request on: the one holding KV blocks.
  int BusyDecodeNode() {
    for (int i = 0; i < 2; ++i) {
      auto load = cluster_.DecodeLoad(cluster_.decode(i).grpc_address());
      if (load.ok() && load->num_free_kv_blocks() < load->num_kv_blocks()) return i;
    }
    return -1;
  }

  LocalCluster cluster_;
};

TEST_F(NodeDrainTest, SigtermLetsTheStreamFinishAndNewRequestsGoElsewhere) {
  ASSERT_NO_FATAL_FAILURE(StartCluster("30000"));
  constexpr int kTokens = 60;
  absl::Notification first_token;
  StreamResult in_flight;
  std::jthread streamer([&] {
    in_flight =
        Stream(cluster_.router_address(), GreedyTokenRequest(Prompt(1), kTokens), &first_token);
  });
  first_token.WaitForNotification();
  const int busy = BusyDecodeNode();
  if (busy < 0) streamer.join();
  ASSERT_GE(busy, 0) << "no decode node is running the request; the stream: "
                     << in_flight.tokens.size() << " tokens, " << in_flight.status.error_message()
                     << "\n"
                     << cluster_.Logs();
  // (std::jthread joins on every exit path, ASSERT failures included.)
  const absl::Time signalled = absl::Now();
  cluster_.decode(busy).Signal(SIGTERM);

  // While the node drains, new requests are served (by the other decode node, or after a retry).
  for (int i = 0; i < 3; ++i) {
    GenerateOutcome r = cluster_.Generate(GreedyTokenRequest(Prompt(10 + i), 4));
    EXPECT_TRUE(r.status.ok()) << r.status.error_message() << "\n" << cluster_.Logs();
    EXPECT_EQ(r.tokens.size(), 4u);
  }

  streamer.join();
  ASSERT_TRUE(in_flight.status.ok()) << in_flight.status.error_message() << "\n" << cluster_.Logs();
  EXPECT_EQ(in_flight.tokens.size(), static_cast<size_t>(kTokens));

  std::optional<int> exit = cluster_.decode(busy).WaitExit(absl::Seconds(30));
  ASSERT_TRUE(exit.has_value()) << "the drained decode node did not exit";
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << cluster_.decode(busy).DescribeExit();
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(30));
  EXPECT_NE(cluster_.decode(busy).Log().find("drained"), std::string::npos)
      << cluster_.decode(busy).LogTail();
}

TEST_F(NodeDrainTest, ADrainTimeoutCancelsWhatIsLeftAndTheNodeStillExits) {
  ASSERT_NO_FATAL_FAILURE(StartCluster("300"));
  absl::Notification first_token;
  StreamResult in_flight;
  std::jthread streamer([&] {
    in_flight =
        Stream(cluster_.router_address(), GreedyTokenRequest(Prompt(2), 2000), &first_token);
  });
  first_token.WaitForNotification();
  const int busy = BusyDecodeNode();
  ASSERT_GE(busy, 0) << cluster_.Logs();
  const absl::Time signalled = absl::Now();
  cluster_.decode(busy).Signal(SIGTERM);
  std::optional<int> exit = cluster_.decode(busy).WaitExit(absl::Seconds(20));
  ASSERT_TRUE(exit.has_value()) << "the decode node hung after its drain timeout";
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << cluster_.decode(busy).DescribeExit();
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(5));
  streamer.join();
  // The stream was cut after its first token: the router reports an error, not a silent end.
  EXPECT_FALSE(in_flight.status.ok());
  EXPECT_LT(in_flight.tokens.size(), 2000u);
}

}  // namespace
}  // namespace tandem::testing
