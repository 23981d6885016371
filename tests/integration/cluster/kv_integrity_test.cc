// KV integrity on real processes (issue 17 item 3): the prefill node's test hooks corrupt its
// first transfer — one byte flipped in flight by the UCX transport (TANDEM_TEST_CORRUPT_KV_WRITES),
// or a completion of a stale epoch (TANDEM_TEST_STALE_KV_EPOCH). Each time the decode node
// refuses the import before admitting it (counted by reason), the router retries the request, and
// the client gets the same tokens as from a clean cluster. Blocks all come back.
#include <string>
#include <vector>

#include "common/metrics/prometheus_text.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

std::vector<int> IntegrityPrompt() {
  std::vector<int> prompt;
  for (int i = 0; i < 70; ++i) prompt.push_back(300 + (i * 37) % 4000);
  return prompt;
}

double Metric(const std::string& address, std::string_view name, const MetricLabels& labels) {
  absl::StatusOr<std::string> body = ScrapeMetrics(address);
  if (!body.ok()) return -1;
  absl::StatusOr<PrometheusText> scrape = PrometheusText::Parse(*body);
  if (!scrape.ok()) return -1;
  return scrape->Value(name, labels).value_or(0);
}

ClusterSpec Spec(EnvVars prefill_env, std::string ucx_tls) {
  ClusterSpec spec;
  spec.model_dir = TestModelDir("llama");
  spec.ucx_tls = std::move(ucx_tls);
  spec.node_args = {"--max-num-batched-tokens", "32", "--max-num-seqs", "8", "--kv-cache-mb", "16"};
  // Every request disaggregated, on the one prefill node (the retry goes to it again): not the
  // cost policy, which may prefill on the decode node once the nodes report their step prices.
  // A stale epoch's blocks stay quarantined until the lease ends (plus 2 s): keep it short.
  spec.router_args = {"--policy", "least_loaded", "--local-prefill-threshold",
                      "0",        "--lease-ms",   "3000"};
  spec.prefill_env = std::move(prefill_env);
  return spec;
}

// The tokens a clean cluster gives for IntegrityPrompt() (one cluster for the whole suite).
const std::vector<int>& CleanTokens() {
  static const std::vector<int> tokens = [] {
    LocalCluster clean;
    clean.Start(Spec({}, "tcp"));
    GenerateOutcome outcome = clean.Generate(GreedyTokenRequest(IntegrityPrompt(), 6));
    EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    return outcome.tokens;
  }();
  return tokens;
}

class KvIntegrityTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_EQ(MissingBinaries({"tandem-router", "tandem-prefill", "tandem-decode"}), "");
  }

  // Runs one request on a cluster whose prefill node has `hook` set to 1; checks the refusal
  // `reason` was counted once and the request was retried to the clean tokens.
  void ExpectDetectedAndRetried(const std::string& hook, const std::string& reason) {
    const std::vector<int> expected = CleanTokens();
    ASSERT_FALSE(expected.empty());
    LocalCluster cluster;
    ASSERT_NO_FATAL_FAILURE(cluster.Start(Spec({{hook, "1"}}, GetParam())));
    const GenerateOutcome outcome = cluster.Generate(GreedyTokenRequest(IntegrityPrompt(), 6));
    EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    EXPECT_EQ(outcome.tokens, expected);
    const std::string decode = cluster.decode_metrics_address(0);
    EXPECT_EQ(Metric(decode, "tandem_decode_kv_imports_refused_total", {{"reason", reason}}), 1);
    // The retry's KV was verified and admitted.
    EXPECT_EQ(Metric(decode, "tandem_decode_kv_imports_verified_total", {}), 1);
    EXPECT_EQ(Metric(cluster.router_metrics_address(), "tandem_router_retries_total",
                     {{"reason", "decode_failed"}}),
              1);
    EXPECT_TRUE(cluster.WaitForLoad(
        cluster.decode_address(0), /*decode=*/true,
        [](const v1::NodeLoad& l) {
          return l.num_free_kv_blocks() == l.num_kv_blocks() && l.num_held_kv_blocks() == 0;
        },
        absl::Seconds(15)))
        << "decode blocks did not come back";
    if (HasFailure()) ADD_FAILURE() << cluster.Logs();
  }
};

TEST_P(KvIntegrityTest, AByteFlippedInFlightIsDetectedAndTheRequestRetried) {
  ExpectDetectedAndRetried("TANDEM_TEST_CORRUPT_KV_WRITES", "checksum_mismatch");
}

TEST_P(KvIntegrityTest, AStaleEpochIsRefusedAndTheRequestRetried) {
  ExpectDetectedAndRetried("TANDEM_TEST_STALE_KV_EPOCH", "stale_epoch");
}

INSTANTIATE_TEST_SUITE_P(Transports, KvIntegrityTest, ::testing::Values("tcp", "posix,sysv,self"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "tcp" ? std::string("tcp") : std::string("shm");
                         });

}  // namespace
}  // namespace tandem::testing
