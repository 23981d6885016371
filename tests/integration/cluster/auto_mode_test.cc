// An auto cluster (tandem-router --mode auto): every node is one tandem-decode --serve-prefill
// process, serving DecodeNode and PrefillNode on one engine and one KV pool, and there are no
// prefill nodes. A request is prefilled on another node, which writes its KV into the blocks its
// decode node reserved, or on its decode node itself. Either way, greedy output equals
// tandem-generate's token for token (CPU backend, UCX tcp), and every decision is counted in
// tandem_router_placements_total with its reason.
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/cluster/reference_tokens.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

constexpr int kAutoMaxTokens = 8;

double Placements(const std::string& router_metrics, const std::string& mode,
                  const std::string& reason) {
  return MetricValue(router_metrics, absl::StrCat("tandem_router_placements_total{mode=\"", mode,
                                                  "\",reason=\"", reason, "\"}"));
}

ClusterSpec AutoSpec(int nodes, const std::string& policy) {
  ClusterSpec spec;
  spec.model_dir = TestModelDir("llama");
  spec.num_prefill = 0;
  spec.num_decode = nodes;
  spec.node_args = {
      "--max-num-batched-tokens", "32", "--max-num-seqs", "32", "--kv-cache-mb", "32"};
  spec.decode_args = {"--serve-prefill"};
  spec.router_args = {"--mode", "auto", "--policy", policy};
  return spec;
}

// Two nodes; node 1's pool is four times node 0's, so the decode node of every request is node 1
// (least_loaded: the most free blocks) and its prefill node, when it has one, node 0 (a node is
// never its own prefill node). A prompt under --local-prefill-threshold prefills on node 1.
TEST(AutoModeTest, APromptPrefillsOnAnotherNodeOrLocallyWithTheSameTokens) {
  ClusterSpec spec = AutoSpec(2, "least_loaded");
  spec.decode_args_each = {{"--kv-cache-mb", "8"}, {"--kv-cache-mb", "32"}};
  spec.router_args.insert(spec.router_args.end(), {"--local-prefill-threshold", "32"});
  const std::vector<std::vector<int>> all = MixedPrompts(8);
  const std::vector<std::vector<int>> prompts = {all[2], all[5]};  // 75 and 76 tokens
  std::vector<std::vector<int>> expected = ReferenceTokens(spec.model_dir, prompts, kAutoMaxTokens);
  const std::vector<int> short_prompt(all[0].begin(), all[0].begin() + 12);
  expected.push_back(ReferenceTokens(spec.model_dir, {short_prompt}, kAutoMaxTokens)[0]);
  LocalCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.Start(spec));

  for (size_t i = 0; i < prompts.size(); ++i) {
    const GenerateOutcome out = cluster.Generate(GreedyTokenRequest(prompts[i], kAutoMaxTokens));
    ASSERT_TRUE(out.status.ok()) << out.status.error_message() << cluster.Logs();
    EXPECT_EQ(out.tokens, expected[i]) << "prompt " << i;
  }
  const GenerateOutcome local = cluster.Generate(GreedyTokenRequest(short_prompt, kAutoMaxTokens));
  ASSERT_TRUE(local.status.ok()) << local.status.error_message() << cluster.Logs();
  EXPECT_EQ(local.tokens, expected.back());

  auto router = ScrapeMetrics(cluster.router_metrics_address());
  ASSERT_TRUE(router.ok()) << router.status();
  EXPECT_EQ(Placements(*router, "disaggregated", "prefill_node"), 2);
  EXPECT_EQ(Placements(*router, "local_prefill", "short_prompt"), 1);
  // Node 0 prefilled both long prompts and decoded nothing; node 1 imported their KV and prefilled
  // the short one itself.
  auto node0 = ScrapeMetrics(cluster.decode_metrics_address(0));
  auto node1 = ScrapeMetrics(cluster.decode_metrics_address(1));
  ASSERT_TRUE(node0.ok() && node1.ok());
  EXPECT_EQ(MetricValue(*node0, "tandem_prefill_requests_total"), 2);
  EXPECT_EQ(MetricValue(*node1, "tandem_prefill_requests_total"), 0);
  EXPECT_EQ(MetricValue(*node0, "tandem_decode_reservations_total"), 0);
  EXPECT_EQ(MetricValue(*node1, "tandem_decode_reservations_ended_total{outcome=\"imported\"}"), 2);
  EXPECT_EQ(MetricValue(*node1, "tandem_decode_generate_requests_total"), 1);
  // One engine, counted once: the engine's families are tandem_decode_*, not tandem_prefill_*.
  EXPECT_GT(MetricValue(*node0, "tandem_decode_steps_total"), 0);
  EXPECT_EQ(MetricValue(*node0, "tandem_prefill_steps_total"), -1);
  if (HasFailure()) ADD_FAILURE() << cluster.Logs();
}

// 64 concurrent greedy requests of mixed lengths through three auto nodes give tandem-generate's
// tokens under the load-based and the cost policies, whether prefilled on another node or (under
// 16 uncached tokens, or by the cost model's choice) on the decode node; the prefills the router
// sent to another node are the ones the nodes ran for others and their decode nodes imported.
class AutoModeTokensTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AutoModeTokensTest, SixtyFourConcurrentGreedyRequests) {
  constexpr int kRequests = 64;
  ClusterSpec spec = AutoSpec(3, GetParam());
  spec.router_args.insert(spec.router_args.end(), {"--local-prefill-threshold", "16"});
  const std::vector<std::vector<int>> prompts = MixedPrompts(kRequests);
  const std::vector<std::vector<int>> expected =
      ReferenceTokens(spec.model_dir, prompts, kAutoMaxTokens);
  LocalCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.Start(spec));

  ExpectConcurrentGreedyTokens(cluster, prompts, expected, kAutoMaxTokens);

  auto router = ScrapeMetrics(cluster.router_metrics_address());
  ASSERT_TRUE(router.ok()) << router.status();
  const double disaggregated = Placements(*router, "disaggregated", "prefill_node");
  double local = 0;
  for (const char* reason : {"short_prompt", "no_prefill_node", "cheaper_local"}) {
    local += Placements(*router, "local_prefill", reason);
  }
  EXPECT_EQ(disaggregated + local, kRequests);
  if (GetParam() != "cost") {  // the threshold rule: both kinds (the cost model chooses its own)
    EXPECT_GT(disaggregated, 0);
    EXPECT_GT(local, 0);
  }
  double prefilled_for_others = 0;
  double imported = 0;
  for (int n = 0; n < 3; ++n) {
    auto node = ScrapeMetrics(cluster.decode_metrics_address(n));
    ASSERT_TRUE(node.ok()) << node.status();
    prefilled_for_others += MetricValue(*node, "tandem_prefill_requests_total");
    imported += MetricValue(*node, "tandem_decode_reservations_ended_total{outcome=\"imported\"}");
  }
  EXPECT_EQ(prefilled_for_others, disaggregated);
  EXPECT_EQ(imported, disaggregated);
  std::printf(
      "--mode auto --policy %s: %.0f of %d requests prefilled on another node, %.0f on "
      "their decode node\n",
      GetParam().c_str(), disaggregated, kRequests, local);
  for (int n = 0; n < 3; ++n) {
    EXPECT_TRUE(cluster.WaitForLoad(
        cluster.decode(n).grpc_address(), /*decode=*/true,
        [](const v1::NodeLoad& l) { return l.num_free_kv_blocks() == l.num_kv_blocks(); },
        absl::Seconds(10)))
        << "node " << n << " still holds blocks";
  }
  if (HasFailure()) ADD_FAILURE() << cluster.Logs();
}

INSTANTIATE_TEST_SUITE_P(Policies, AutoModeTokensTest,
                         ::testing::Values("least_loaded", "prefix_aware", "cost"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::erase(name, '_');
                           return name;
                         });

}  // namespace
}  // namespace tandem::testing
