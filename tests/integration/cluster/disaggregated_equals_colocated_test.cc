// Disaggregation does not change tokens: 64 concurrent greedy requests of mixed lengths (some
// sharing prefixes, some longer than a prefill chunk) through router -> 2 prefill -> 2 decode
// give exactly the tokens tandem-generate gives in one process. Under every placement policy over
// UCX tcp, and over shared memory; and with bf16 and fp8 E4M3 KV caches. The cost policy may
// prefill a request on its decode node (cheaper_local) instead of a prefill node: its tokens must
// be the same too. And conversations under the cost policy: a second turn that finds its first
// turn's KV on a decode node (KV a prefill node wrote there, and the first turn's output the decode
// node computed) and prefills only the rest, there or through a prefill node that skips the held
// blocks, still gives tandem-generate's tokens for the whole second prompt.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/cluster/reference_tokens.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

constexpr int kNumRequests = 64;
constexpr int kEqualsMaxTokens = 8;

// (UCX transports, placement policy, --kv-cache-dtype of every node and of tandem-generate)
using ClusterCase = std::tuple<std::string, std::string, std::string>;
class DisaggregatedEqualsColocatedTest : public ::testing::TestWithParam<ClusterCase> {};

TEST_P(DisaggregatedEqualsColocatedTest, SixtyFourConcurrentGreedyRequests) {
  const auto& [transports, policy, kv_cache_dtype] = GetParam();
  const std::string model = TestModelDir("llama");
  const std::vector<std::vector<int>> prompts = MixedPrompts(kNumRequests);
  const std::vector<std::vector<int>> expected =
      ReferenceTokens(model, prompts, kEqualsMaxTokens, kv_cache_dtype);
  if (kv_cache_dtype != "auto") {
    // The dtype is in effect: tandem-generate's tokens with it are not all f32 KV's.
    EXPECT_NE(expected, ReferenceTokens(model, prompts, kEqualsMaxTokens, "f32"));
  }

  LocalCluster cluster;
  ClusterSpec spec;
  spec.model_dir = model;
  spec.num_prefill = 2;
  spec.num_decode = 2;
  spec.ucx_tls = transports;
  spec.node_args = {
      "--max-num-batched-tokens", "32",          "--max-num-seqs", "32", "--kv-cache-mb", "32",
      "--kv-cache-dtype",         kv_cache_dtype};
  spec.router_args = {"--policy", policy, "--local-prefill-threshold", "0"};
  ASSERT_NO_FATAL_FAILURE(cluster.Start(spec));

  ExpectConcurrentGreedyTokens(cluster, prompts, expected, kEqualsMaxTokens);
  // Every request went to one decode node, each of which got some; through a prefill node (imported
  // by the decode node) unless the cost policy prefilled it on the decode node.
  int64_t imported = 0;
  int64_t received = 0;
  for (int d = 0; d < 2; ++d) {
    auto load = cluster.DecodeLoad(cluster.decode(d).grpc_address());
    ASSERT_TRUE(load.ok()) << load.status();
    imported += load->num_imported_requests();
    int64_t here = 0;
    for (const v1::RouterReceipt& r : load->receipts()) here += r.received();
    EXPECT_GT(here, 0) << "decode " << d << " got no requests";
    received += here;
  }
  EXPECT_EQ(received, kNumRequests);
  std::printf("--policy %s: %lld of %d requests prefilled by a prefill node\n", policy.c_str(),
              static_cast<long long>(imported), kNumRequests);
  if (policy == "cost") {
    EXPECT_LE(imported, kNumRequests);
  } else {
    EXPECT_EQ(imported, kNumRequests);
  }
  for (int d = 0; d < 2; ++d) {
    EXPECT_TRUE(cluster.WaitForLoad(
        cluster.decode(d).grpc_address(), /*decode=*/true,
        [](const v1::NodeLoad& l) { return l.num_free_kv_blocks() == l.num_kv_blocks(); },
        absl::Seconds(10)))
        << "decode " << d << " still holds blocks";
  }
  if (HasFailure()) ADD_FAILURE() << cluster.Logs();
}

std::string ParamName(const ::testing::TestParamInfo<ClusterCase>& info) {
  std::string policy = std::get<1>(info.param);
  policy.erase(std::remove(policy.begin(), policy.end(), '_'), policy.end());
  std::string name =
      absl::StrCat(std::get<0>(info.param) == "tcp" ? "UcxTcp" : "UcxSharedMemory", "_", policy);
  if (std::get<2>(info.param) != "auto") absl::StrAppend(&name, "_kv_", std::get<2>(info.param));
  return name;
}

TEST(DisaggregatedEqualsColocatedConversationTest, SecondTurnsOnTheirFirstTurnsKv) {
  constexpr int kConversations = 16;
  const std::string model = TestModelDir("llama");
  std::mt19937 rng(20261126);
  std::uniform_int_distribution<int> token(100, 20000);
  std::vector<std::vector<int>> first(kConversations);
  for (int c = 0; c < kConversations; ++c) {
    for (int j = 0; j < 70 + 3 * c; ++j) first[c].push_back(token(rng));  // 2 to 4 chunks
  }

  LocalCluster cluster;
  ClusterSpec spec;
  spec.model_dir = model;
  spec.num_prefill = 2;
  spec.num_decode = 2;
  spec.node_args = {
      "--max-num-batched-tokens", "32", "--max-num-seqs", "32", "--kv-cache-mb", "32"};
  spec.router_args = {"--policy", "cost", "--slo-ttft-ms", "250"};
  ASSERT_NO_FATAL_FAILURE(cluster.Start(spec));
  std::vector<std::vector<int>> prompts = first;
  for (int turn = 0; turn < 2; ++turn) {
    const std::vector<std::vector<int>> expected =
        ReferenceTokens(model, prompts, kEqualsMaxTokens);
    std::vector<GenerateOutcome> outcomes(prompts.size());
    std::vector<std::thread> clients;
    for (size_t c = 0; c < prompts.size(); ++c) {
      clients.emplace_back([&, c] {
        outcomes[c] = cluster.Generate(GreedyTokenRequest(prompts[c], kEqualsMaxTokens));
      });
    }
    for (std::thread& t : clients) t.join();
    for (int c = 0; c < kConversations; ++c) {
      ASSERT_TRUE(outcomes[c].status.ok()) << "turn " << turn << ", conversation " << c << ": "
                                           << outcomes[c].status.error_message() << cluster.Logs();
      EXPECT_EQ(outcomes[c].tokens, expected[c]) << "turn " << turn << ", conversation " << c;
      // The next turn: this one, its answer and a question.
      prompts[c].insert(prompts[c].end(), outcomes[c].tokens.begin(), outcomes[c].tokens.end());
      for (int j = 0; j < 20; ++j) prompts[c].push_back(token(rng));
    }
    // The decode nodes' KV events reach the router before the next turn is placed.
    absl::SleepFor(absl::Seconds(1));
  }
  double hits = 0;
  for (int d = 0; d < 2; ++d) {
    auto body = ScrapeMetrics(cluster.decode_metrics_address(d));
    ASSERT_TRUE(body.ok()) << body.status();
    for (const char* path : {"reserve", "generate"}) {
      hits += MetricValue(
          *body,
          absl::StrCat("tandem_decode_prefix_cache_hit_requests_total{path=\"", path, "\"}"));
    }
  }
  std::printf("second turns that found their first turn's KV on their decode node: %.0f of %d\n",
              hits, kConversations);
  if (HasFailure()) ADD_FAILURE() << cluster.Logs();
}

INSTANTIATE_TEST_SUITE_P(Policies, DisaggregatedEqualsColocatedTest,
                         ::testing::Combine(::testing::Values("tcp"),
                                            ::testing::Values("round_robin", "least_loaded",
                                                              "prefix_aware", "cost"),
                                            ::testing::Values("auto")),
                         ParamName);
INSTANTIATE_TEST_SUITE_P(Transports, DisaggregatedEqualsColocatedTest,
                         ::testing::Combine(::testing::Values("posix,sysv,self"),
                                            ::testing::Values("least_loaded"),
                                            ::testing::Values("auto")),
                         ParamName);
// Each KV cache dtype (auto is f32 on the cpu backend): the prefill nodes write bf16 or fp8 KV
// (fp8 against the scales both sides calibrated from the model) and the decode nodes read it.
INSTANTIATE_TEST_SUITE_P(KvCacheDTypes, DisaggregatedEqualsColocatedTest,
                         ::testing::Combine(::testing::Values("tcp"),
                                            ::testing::Values("least_loaded"),
                                            ::testing::Values("bf16", "fp8_e4m3")),
                         ParamName);

}  // namespace
}  // namespace tandem::testing
