// Speculative decoding through the whole cluster on the cpu backend: decode nodes that speculate by
// prompt lookup (--speculative ngram) give exactly tandem-generate's greedy tokens without
// speculation, for 32 concurrent requests through gRPC (a prefill node computing the prompts, the
// decode node proposing drafts wherever its context repeats), and the same text through the OpenAI
// HTTP API; the decode node exports its speculation counters and frees every block afterwards.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/cluster/reference_tokens.h"
#include "tests/integration/process_launcher.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

constexpr int kSpeculatedRequests = 32;
constexpr int kSpeculatedMaxTokens = 24;

TEST(SpeculativeClusterTest, NgramDecodeNodeGivesTheSameTokensOverGrpcAndHttp) {
  const std::string model = TestModelDir("llama");
  const std::vector<std::vector<int>> prompts = MixedPrompts(kSpeculatedRequests);
  const std::vector<std::vector<int>> expected =
      ReferenceTokens(model, prompts, kSpeculatedMaxTokens, "auto");

  LocalCluster cluster;
  ClusterSpec spec;
  spec.model_dir = model;
  spec.num_prefill = 1;
  spec.num_decode = 1;
  spec.node_args = {
      "--max-num-batched-tokens", "64", "--max-num-seqs", "32", "--kv-cache-mb", "32"};
  spec.decode_args = {"--speculative", "ngram", "--num-speculative-tokens", "3"};
  spec.router_args = {"--local-prefill-threshold", "0"};
  ASSERT_NO_FATAL_FAILURE(cluster.Start(spec));

  ExpectConcurrentGreedyTokens(cluster, prompts, expected, kSpeculatedMaxTokens);

  // HTTP: the first prompt as token ids; the text is the gRPC answer's.
  const GenerateOutcome grpc = cluster.Generate(GreedyTokenRequest(prompts[0], 12));
  ASSERT_TRUE(grpc.status.ok()) << grpc.status.error_message();
  const std::string body =
      absl::StrCat(R"({"prompt": [)", absl::StrJoin(prompts[0], ","),
                   R"(], "max_tokens": 12, "temperature": 0, )", R"("ignore_eos": true})");
  CommandResult http = RunCommand(
      "/usr/bin/curl",
      {"-sS", "--max-time", "60", "-H", "Content-Type: application/json", "--data-binary", body,
       "http://" + cluster.router_http_address() + "/v1/completions"},
      {}, absl::Seconds(70));
  ASSERT_EQ(http.exit_code, 0) << http.stderr_text;
  const nlohmann::json answer = nlohmann::json::parse(http.stdout_text, nullptr, false);
  ASSERT_FALSE(answer.is_discarded()) << http.stdout_text;
  ASSERT_TRUE(answer.contains("choices")) << http.stdout_text;
  EXPECT_EQ(answer["choices"][0]["text"].get<std::string>(), grpc.text);

  // The node speculated on every decode step it could: its metrics carry the families (the tiny
  // random model almost never repeats a token of its context, so prompt lookup finds few drafts
  // and the verification paths themselves are the engine tests' and SimClusterTest's).
  absl::StatusOr<std::string> metrics = ScrapeMetrics(cluster.decode_metrics_address(0));
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const double drafts = MetricValue(*metrics, "tandem_decode_spec_draft_tokens_total");
  const double accepted = MetricValue(*metrics, "tandem_decode_spec_accepted_tokens_total");
  std::printf("decode node: %.0f drafts, %.0f accepted\n", drafts, accepted);
  EXPECT_GE(drafts, 0);
  EXPECT_GE(accepted, 0);
  EXPECT_LE(accepted, drafts);
  v1::NodeLoad last;
  EXPECT_TRUE(cluster.WaitForLoad(
      cluster.decode(0).grpc_address(), /*decode=*/true,
      [&](const v1::NodeLoad& l) {
        last = l;
        return l.num_free_kv_blocks() == l.num_kv_blocks();
      },
      absl::Seconds(10)))
      << "the decode node still holds blocks: " << last.num_free_kv_blocks() << " of "
      << last.num_kv_blocks() << " free";
  if (HasFailure()) ADD_FAILURE() << cluster.Logs();
}

}  // namespace
}  // namespace tandem::testing
