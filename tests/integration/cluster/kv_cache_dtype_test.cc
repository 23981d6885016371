// Nodes whose KV caches store different dtypes refuse each other: the prefill node checks the
// decode node's layout descriptor in the handoff before it writes anything, and the request fails
// with INVALID_ARGUMENT naming the field; the decode node gets its blocks back. (Equal dtypes give
// tandem-generate's tokens: disaggregated_equals_colocated_test's KvCacheDTypes cases.)
#include <cstdio>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

void ExpectRefusal(const std::string& prefill_dtype, const std::string& decode_dtype,
                   const std::string& field) {
  LocalCluster cluster;
  ClusterSpec spec;
  spec.model_dir = TestModelDir("llama");
  spec.num_prefill = 1;
  spec.num_decode = 1;
  spec.node_args = {"--kv-cache-mb", "16", "--kv-cache-dtype", prefill_dtype};
  spec.decode_args = {"--kv-cache-dtype", decode_dtype};  // after node_args: the decode's wins
  spec.router_args = {"--policy", "least_loaded", "--local-prefill-threshold", "0"};
  ASSERT_NO_FATAL_FAILURE(cluster.Start(spec));
  std::vector<int> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(1000 + 37 * i);
  const GenerateOutcome outcome = cluster.Generate(GreedyTokenRequest(prompt, 4));
  std::printf("prefill %s, decode %s: %s\n", prefill_dtype.c_str(), decode_dtype.c_str(),
              outcome.status.error_message().c_str());
  EXPECT_FALSE(outcome.status.ok());
  EXPECT_TRUE(outcome.tokens.empty());
  EXPECT_NE(outcome.status.error_message().find(field), std::string::npos)
      << outcome.status.error_message();
  EXPECT_TRUE(cluster.WaitForLoad(
      cluster.decode(0).grpc_address(), /*decode=*/true,
      [](const v1::NodeLoad& l) { return l.num_free_kv_blocks() == l.num_kv_blocks(); },
      absl::Seconds(10)))
      << "the decode node still holds blocks";
  auto metrics = ScrapeMetrics(cluster.prefill_metrics_address(0));
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_GE(MetricValue(*metrics,
                        "tandem_prefill_kv_transfer_failures_total{reason=\"layout_mismatch\"}"),
            1);
  if (::testing::Test::HasFailure()) ADD_FAILURE() << cluster.Logs();
}

TEST(KvCacheDTypeClusterTest, F32PrefillAndBf16DecodeRefuseEachOther) {
  ExpectRefusal("f32", "bf16", "dtype");
}

TEST(KvCacheDTypeClusterTest, Fp8PrefillAndBf16DecodeRefuseEachOther) {
  ExpectRefusal("fp8_e4m3", "bf16", "dtype");
}

}  // namespace
}  // namespace tandem::testing
