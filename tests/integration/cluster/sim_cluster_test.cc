// A cluster of sim-backend nodes (Llama-3.1-8B on an H100, modelled) serves requests end to end
// through the real router, scheduler, block manager and UCX transport: every request gets the
// sim's deterministic tokens, disaggregated and colocated alike.
#include <string>
#include <thread>
#include <vector>

#include "common/backend/sim/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/cluster/sim_node_args.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

std::vector<std::vector<int>> Prompts() {
  std::vector<std::vector<int>> prompts;
  for (int i = 0; i < 6; ++i) {
    std::vector<int> p;
    for (int j = 0; j < 20 + 90 * i; ++j) p.push_back(1000 + (i * 7919 + j * 31) % 20000);
    prompts.push_back(p);
  }
  return prompts;
}

void ServeAndCheck(LocalCluster& cluster) {
  const auto prompts = Prompts();
  std::vector<GenerateOutcome> outcomes(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back(
        [&, i] { outcomes[i] = cluster.Generate(GreedyTokenRequest(prompts[i], 12)); });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(outcomes[i].status.ok()) << outcomes[i].status.error_message() << cluster.Logs();
    EXPECT_EQ(outcomes[i].finish_reason, "length");
    EXPECT_EQ(outcomes[i].tokens, SimTokens(prompts[i], 12)) << "request " << i;
  }
}

// One sim decode node, and a sim prefill node when `num_prefill` is 1.
ClusterSpec OneSimDecodeNodeSpec(int num_prefill) {
  ClusterSpec spec;
  spec.model_dir = TestModelDir("llama3.2");
  spec.num_prefill = num_prefill;
  spec.num_decode = 1;
  spec.node_args = SimNodeArgs(1024);
  if (num_prefill == 0) spec.router_args = {"--mode", "colocated"};
  return spec;
}

TEST(SimClusterTest, DisaggregatedServesTheSimsTokens) {
  LocalCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.Start(OneSimDecodeNodeSpec(1)));
  ASSERT_NO_FATAL_FAILURE(ServeAndCheck(cluster));
}

TEST(SimClusterTest, ColocatedServesTheSameTokens) {
  LocalCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.Start(OneSimDecodeNodeSpec(0)));
  ASSERT_NO_FATAL_FAILURE(ServeAndCheck(cluster));
}

// Speculation on the sim decode node (--speculative sim, drafts right 70% of the time): the
// requests get the same tokens, and the node's metrics count the drafts and the accepted ones.
TEST(SimClusterTest, SpeculationGivesTheSameTokensAndCountsItsDrafts) {
  LocalCluster cluster;
  ClusterSpec spec = OneSimDecodeNodeSpec(1);
  spec.decode_args = {"--speculative",         "sim", "--num-speculative-tokens", "4",
                      "--sim-acceptance-rate", "0.7"};
  ASSERT_NO_FATAL_FAILURE(cluster.Start(spec));
  ASSERT_NO_FATAL_FAILURE(ServeAndCheck(cluster));
  absl::StatusOr<std::string> metrics = ScrapeMetrics(cluster.decode_metrics_address(0));
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const double drafts = MetricValue(*metrics, "tandem_decode_spec_draft_tokens_total");
  const double accepted = MetricValue(*metrics, "tandem_decode_spec_accepted_tokens_total");
  const double verifications = MetricValue(*metrics, "tandem_decode_spec_verifications_total");
  // 6 requests of 12 tokens: the first comes from the prefill node, the other 11 from at least 3
  // verifications each (4 drafts at most, the last steps fewer).
  EXPECT_GE(verifications, 6 * 3);
  EXPECT_GT(drafts, verifications);
  EXPECT_GT(accepted, 0.2 * drafts);
  EXPECT_LT(accepted, 0.8 * drafts);
}

}  // namespace
}  // namespace tandem::testing
