// KV rebalancing on real processes (router/kv_rebalance.h): two sim decode nodes, one with a
// small KV pool (40 blocks) and one with a large one, and round_robin placement, so the small one
// runs out of blocks while the large one has room. The router moves streams off the full node
// with their KV (a pause, ExportKv, the destination decodes on); every stream still gets exactly
// the sim's tokens, and both pools end empty.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/backend/sim/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

constexpr int kPromptTokens = 180;  // 12 blocks of 16
constexpr int kOutputTokens = 150;
constexpr int kStreams = 6;

std::vector<int> RebalancePrompt(int salt) {
  std::vector<int> p;
  for (int j = 0; j < kPromptTokens; ++j) p.push_back(1000 + (salt * 7919 + j * 31) % 20000);
  return p;
}

TEST(KvRebalanceClusterTest, StreamsMoveOffADecodeNodeOutOfBlocksWithTheirKv) {
  ClusterSpec spec;
  spec.model_dir = TestModelDir("llama3.2");
  spec.num_prefill = 1;
  spec.num_decode = 2;
  spec.node_args = {"--backend",
                    "sim",
                    "--sim-model",
                    "llama-3.1-8b",
                    "--sim-kv-scale",
                    "128",
                    "--sim-time-scale",
                    "4",
                    "--max-num-batched-tokens",
                    "2048"};
  // Three streams of 12 prompt blocks fill 36 of node 0's 40 blocks; their output overflows it.
  spec.decode_args_each = {{"--sim-kv-blocks", "40"}, {"--sim-kv-blocks", "2048"}};
  spec.router_args = {
      "--policy", "round_robin", "--health-interval-ms", "100", "--kv-rebalance-interval-ms",
      "200"};
  LocalCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.Start(spec));

  std::vector<GenerateOutcome> results(kStreams);
  {
    std::vector<std::jthread> streamers;
    for (int i = 0; i < kStreams; ++i) {
      streamers.emplace_back([&, i] {
        results[i] = cluster.Generate(GreedyTokenRequest(RebalancePrompt(i), kOutputTokens));
      });
      absl::SleepFor(absl::Milliseconds(50));  // round_robin in a known order
    }
  }
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(results[i].status.ok())
        << "stream " << i << ": " << results[i].status.error_message() << "\n"
        << cluster.Logs();
    EXPECT_EQ(results[i].tokens, SimTokens(RebalancePrompt(i), kOutputTokens)) << "stream " << i;
  }
  absl::StatusOr<std::string> metrics = ScrapeMetrics(cluster.router_metrics_address());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_GE(
      MetricValue(*metrics, "tandem_router_kv_moves_total{trigger=\"rebalance\",result=\"moved\"}"),
      1)
      << *metrics << cluster.Logs();
  EXPECT_EQ(MetricValue(*metrics, "tandem_router_failed_after_first_token_total"), 0);
  for (int d = 0; d < 2; ++d) {
    EXPECT_TRUE(cluster.WaitForLoad(
        cluster.decode_address(d), /*decode=*/true,
        [](const v1::NodeLoad& l) {
          return l.num_free_kv_blocks() == l.num_kv_blocks() && l.num_running() == 0 &&
                 l.num_paused() == 0;
        },
        absl::Seconds(5)))
        << "decode " << d << "\n"
        << cluster.Logs();
  }
}

}  // namespace
}  // namespace tandem::testing
