// Graceful drain, as Kubernetes does it: SIGTERM reaches a decode node while it streams. The
// stream in flight finishes with every token, requests sent after the signal are served by the
// other decode node, and the drained node exits 0 within its --drain-timeout-ms. The node pauses
// its streams and the router moves each with its KV to the other decode node (live KV
// migration): every token once, nothing recomputed, and the node leaves long before its drain
// timeout. Without live migration (--no-drain-live-migration), a node whose drain timeout passes
// cancels what is left and still exits 0 (no hang); the router migrates those streams by
// recomputing them on the other decode node, so the clients see every token once and no error.
#include <signal.h>
#include <sys/wait.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
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

std::vector<int> DrainPrompt(int salt) {
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
  void StartCluster(const std::string& drain_timeout_ms, bool live_migration = true) {
    ClusterSpec spec;
    spec.model_dir = TestModelDir("llama3.2");
    spec.num_prefill = 1;
    spec.num_decode = 2;
    spec.node_args = kSlowSimArgs;
    spec.decode_args = {"--drain-timeout-ms", drain_timeout_ms};
    if (!live_migration) spec.decode_args.push_back("--no-drain-live-migration");
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

  // 16 streams of 100 tokens through the router, half on each decode node (round_robin); once
  // every stream has a token, SIGTERM the decode node holding KV blocks. It must exit 0 within
  // `exit_within`, and every stream must end OK with exactly the sim's tokens. Returns that node,
  // -1 (with a failure) when it could not.
  int DrainStreamingNode(int salt, absl::Duration exit_within) {
    constexpr int kStreams = 16;
    constexpr int kTokens = 100;
    std::vector<absl::Notification> first_token(kStreams);
    std::vector<StreamResult> results(kStreams);
    int busy = -1;
    {
      std::vector<std::jthread> streamers;  // joined at the end of this block
      for (int i = 0; i < kStreams; ++i) {
        streamers.emplace_back([&, i] {
          results[i] = Stream(cluster_.router_address(),
                              GreedyTokenRequest(DrainPrompt(salt + i), kTokens), &first_token[i]);
        });
      }
      for (auto& n : first_token) n.WaitForNotification();
      busy = BusyDecodeNode();
      if (busy < 0) {
        ADD_FAILURE() << "no decode node holds KV blocks\n" << cluster_.Logs();
        return -1;
      }
      const absl::Time signalled = absl::Now();
      cluster_.decode(busy).Signal(SIGTERM);
      std::optional<int> exit = cluster_.decode(busy).WaitExit(absl::Seconds(30));
      if (!exit.has_value()) {
        ADD_FAILURE() << "the drained decode node did not exit";
        return -1;
      }
      EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0)
          << cluster_.decode(busy).DescribeExit();
      EXPECT_LT(absl::Now() - signalled, exit_within) << cluster_.decode(busy).LogTail();
    }
    // No stream was interrupted: each one has every token, once, in order.
    for (int i = 0; i < kStreams; ++i) {
      EXPECT_TRUE(results[i].status.ok())
          << "stream " << i << ": " << results[i].status.error_message() << "\n"
          << cluster_.Logs();
      EXPECT_EQ(results[i].tokens, SimTokens(DrainPrompt(salt + i), kTokens)) << "stream " << i;
    }
    return busy;
  }

  LocalCluster cluster_;
};

TEST_F(NodeDrainTest, SigtermLetsTheStreamFinishAndNewRequestsGoElsewhere) {
  ASSERT_NO_FATAL_FAILURE(StartCluster("30000"));
  constexpr int kTokens = 60;
  absl::Notification first_token;
  StreamResult in_flight;
  std::jthread streamer([&] {
    in_flight = Stream(cluster_.router_address(), GreedyTokenRequest(DrainPrompt(1), kTokens),
                       &first_token);
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
    GenerateOutcome r = cluster_.Generate(GreedyTokenRequest(DrainPrompt(10 + i), 4));
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

TEST_F(NodeDrainTest, SigtermMovesEveryStreamWithItsKvToTheOtherDecodeNode) {
  ASSERT_NO_FATAL_FAILURE(StartCluster("30000"));
  constexpr int kStreams = 16;
  // It leaves once its streams have moved, long before its 30 s drain timeout.
  const int busy = DrainStreamingNode(/*salt=*/200, absl::Seconds(10));
  ASSERT_GE(busy, 0);
  absl::StatusOr<std::string> metrics = ScrapeMetrics(cluster_.router_metrics_address());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  // round_robin put half of the streams on the drained node: each moved with its KV, none was
  // recomputed, none resumed.
  EXPECT_EQ(MetricValue(*metrics,
                        "tandem_router_kv_moves_total{trigger=\"node_paused\",result=\"moved\"}"),
            kStreams / 2)
      << *metrics << cluster_.Logs();
  EXPECT_EQ(MetricValue(*metrics,
                        "tandem_router_kv_moves_total{trigger=\"node_paused\",result=\"resumed\"}"),
            0);
  for (const char* reason : {"stream_aborted", "stream_failed", "node_unreachable"}) {
    EXPECT_EQ(MetricValue(*metrics,
                          absl::StrCat("tandem_router_migrations_total{reason=\"", reason, "\"}")),
              0)
        << reason;
  }
  EXPECT_GT(MetricValue(*metrics, "tandem_router_kv_move_bytes_total"), 0);
  const int other = 1 - busy;
  EXPECT_TRUE(cluster_.WaitForLoad(
      cluster_.decode(other).grpc_address(), /*decode=*/true,
      [](const v1::NodeLoad& l) {
        return l.num_free_kv_blocks() == l.num_kv_blocks() && l.num_running() == 0 &&
               l.num_paused() == 0;
      },
      absl::Seconds(5)))
      << cluster_.Logs();
}

TEST_F(NodeDrainTest, ADrainTimeoutCutsTheStreamsAndTheRouterMigratesThem) {
  ASSERT_NO_FATAL_FAILURE(StartCluster("300", /*live_migration=*/false));
  // It cuts what is left at its 300 ms drain timeout and exits; no stream is interrupted.
  const int busy = DrainStreamingNode(/*salt=*/100, absl::Seconds(5));
  ASSERT_GE(busy, 0);
  absl::StatusOr<std::string> metrics = ScrapeMetrics(cluster_.router_metrics_address());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_GE(MetricValue(*metrics, "tandem_router_migrations_total{reason=\"stream_aborted\"}"), 1)
      << *metrics;
  const int other = 1 - busy;
  EXPECT_TRUE(cluster_.WaitForLoad(
      cluster_.decode(other).grpc_address(), /*decode=*/true,
      [](const v1::NodeLoad& l) {
        return l.num_free_kv_blocks() == l.num_kv_blocks() && l.num_running() == 0;
      },
      absl::Seconds(5)))
      << cluster_.Logs();
}

}  // namespace
}  // namespace tandem::testing
