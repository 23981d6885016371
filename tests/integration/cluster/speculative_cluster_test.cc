// Speculative decoding through the whole cluster on the cpu backend: decode nodes that speculate by
// prompt lookup (--speculative ngram) give exactly tandem-generate's greedy tokens without
// speculation, for 32 concurrent requests through gRPC (a prefill node computing the prompts, the
// decode node proposing drafts wherever its context repeats), and the same text through the OpenAI
// HTTP API; the decode node exports its speculation counters and frees every block afterwards.
// The same with a draft model on the decode node (--draft-model): a draft of known agreement
// (tandem-make-model --extra-layers-from), whose KV the decode node computes itself from the
// imported context, gets most of its drafts accepted and changes no token.
#include <cstdio>
#include <string>
#include <utility>
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

// Runs kSpeculatedRequests greedy requests through a 1P:1D cluster of `model` whose decode node
// speculates with `decode_args`, and one over HTTP; checks tandem-generate's tokens and text, and
// returns the decode node's (drafts, accepted) after checking every block came back.
std::pair<double, double> RunSpeculativeCluster(const std::string& model,
                                                std::vector<std::string> decode_args) {
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
  spec.decode_args = std::move(decode_args);
  spec.router_args = {"--local-prefill-threshold", "0"};
  cluster.Start(spec);
  if (::testing::Test::HasFatalFailure()) return {-1, -1};

  ExpectConcurrentGreedyTokens(cluster, prompts, expected, kSpeculatedMaxTokens);

  // HTTP: the first prompt as token ids; the text is the gRPC answer's.
  const GenerateOutcome grpc = cluster.Generate(GreedyTokenRequest(prompts[0], 12));
  EXPECT_TRUE(grpc.status.ok()) << grpc.status.error_message();
  const std::string body =
      absl::StrCat(R"({"prompt": [)", absl::StrJoin(prompts[0], ","),
                   R"(], "max_tokens": 12, "temperature": 0, )", R"("ignore_eos": true})");
  CommandResult http = RunCommand(
      "/usr/bin/curl",
      {"-sS", "--max-time", "60", "-H", "Content-Type: application/json", "--data-binary", body,
       "http://" + cluster.router_http_address() + "/v1/completions"},
      {}, absl::Seconds(70));
  EXPECT_EQ(http.exit_code, 0) << http.stderr_text;
  const nlohmann::json answer = nlohmann::json::parse(http.stdout_text, nullptr, false);
  EXPECT_TRUE(answer.contains("choices")) << http.stdout_text;
  if (answer.contains("choices")) {
    EXPECT_EQ(answer["choices"][0]["text"].get<std::string>(), grpc.text);
  }

  absl::StatusOr<std::string> metrics = ScrapeMetrics(cluster.decode_metrics_address(0));
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  const double drafts =
      metrics.ok() ? MetricValue(*metrics, "tandem_decode_spec_draft_tokens_total") : -1;
  const double accepted =
      metrics.ok() ? MetricValue(*metrics, "tandem_decode_spec_accepted_tokens_total") : -1;
  std::printf("decode node: %.0f drafts, %.0f accepted\n", drafts, accepted);
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
  if (::testing::Test::HasFailure()) ADD_FAILURE() << cluster.Logs();
  return {drafts, accepted};
}

TEST(SpeculativeClusterTest, NgramDecodeNodeGivesTheSameTokensOverGrpcAndHttp) {
  const auto [drafts, accepted] = RunSpeculativeCluster(
      TestModelDir("llama"), {"--speculative", "ngram", "--num-speculative-tokens", "3"});
  // The node speculated on every decode step it could: its metrics carry the families (the tiny
  // random model almost never repeats a token of its context, so prompt lookup finds few drafts
  // and the verification paths themselves are the engine tests' and SimClusterTest's).
  EXPECT_GE(drafts, 0);
  EXPECT_GE(accepted, 0);
  EXPECT_LE(accepted, drafts);
}

TEST(SpeculativeClusterTest, DraftModelDecodeNodeGivesTheSameTokensOverGrpcAndHttp) {
  const DraftTargetDirs pair = TestDraftTargetPair(0.1f);
  const auto [drafts, accepted] = RunSpeculativeCluster(
      pair.target, {"--draft-model", pair.draft, "--num-speculative-tokens", "3"});
  // Every decoding request drafts (the draft model always has a guess), and this pair agrees on
  // most greedy tokens.
  EXPECT_GT(drafts, kSpeculatedRequests * 3);
  EXPECT_GT(accepted, drafts / 3);  // 54% in the runs here; how many ride a step varies
  EXPECT_LE(accepted, drafts);
}

}  // namespace
}  // namespace tandem::testing
