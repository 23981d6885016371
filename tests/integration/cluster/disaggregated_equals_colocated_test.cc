// Disaggregation does not change tokens: 64 concurrent greedy requests of mixed lengths (some
// sharing prefixes, some longer than a prefill chunk) through router -> 2 prefill -> 2 decode
// give exactly the tokens tandem-generate gives in one process. Over UCX tcp and shared memory.
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

constexpr int kNumRequests = 64;
constexpr int kMaxTokens = 8;

std::vector<std::vector<int>> MixedPrompts() {
  std::mt19937 rng(20261121);
  std::uniform_int_distribution<int> token(100, 20000);
  std::vector<int> shared_prefix(40);
  for (int& t : shared_prefix) t = token(rng);
  std::vector<std::vector<int>> prompts;
  for (int i = 0; i < kNumRequests; ++i) {
    std::vector<int> prompt;
    if (i % 4 == 0) prompt = shared_prefix;  // a prefix-cache hit on the second and later ones
    const int length = 1 + (i * 37) % 110;   // 1 .. 110 tokens: up to 4 chunks of 32
    for (int j = 0; j < length; ++j) prompt.push_back(token(rng));
    prompts.push_back(std::move(prompt));
  }
  return prompts;
}

// tandem-generate's greedy tokens for each prompt, in order.
std::vector<std::vector<int>> ReferenceTokens(const std::string& model,
                                              const std::vector<std::vector<int>>& prompts) {
  const std::string dir = MakeTestTempDir("disagg_reference_");
  const std::string file = dir + "/prompts.jsonl";
  {
    std::ofstream out(file);
    for (const auto& p : prompts) out << "[" << absl::StrJoin(p, ",") << "]\n";
  }
  CommandResult r =
      RunCommand(BinaryPath("tandem-generate"),
                 {"--model", model, "--prompts-file", file, "--temperature", "0", "--max-tokens",
                  std::to_string(kMaxTokens), "--ignore-eos", "--threads", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  std::vector<std::vector<int>> tokens(prompts.size());
  std::istringstream lines(r.stdout_text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line);
    tokens[j["index"].get<size_t>()] = j["token_ids"].get<std::vector<int>>();
  }
  return tokens;
}

class DisaggregatedEqualsColocatedTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DisaggregatedEqualsColocatedTest, SixtyFourConcurrentGreedyRequests) {
  const std::string model = TestModelDir("llama");
  const std::vector<std::vector<int>> prompts = MixedPrompts();
  const std::vector<std::vector<int>> expected = ReferenceTokens(model, prompts);

  LocalCluster cluster;
  ClusterSpec spec;
  spec.model_dir = model;
  spec.num_prefill = 2;
  spec.num_decode = 2;
  spec.ucx_tls = GetParam();
  spec.node_args = {
      "--max-num-batched-tokens", "32", "--max-num-seqs", "32", "--kv-cache-mb", "32"};
  spec.router_args = {"--policy", "least_loaded", "--local-prefill-threshold", "0"};
  ASSERT_NO_FATAL_FAILURE(cluster.Start(spec));

  std::vector<GenerateOutcome> outcomes(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back(
        [&, i] { outcomes[i] = cluster.Generate(GreedyTokenRequest(prompts[i], kMaxTokens)); });
  }
  for (std::thread& t : clients) t.join();

  int mismatches = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(outcomes[i].status.ok())
        << "request " << i << ": " << outcomes[i].status.error_message();
    EXPECT_EQ(outcomes[i].finish_reason, "length") << "request " << i;
    if (outcomes[i].tokens != expected[i]) ++mismatches;
    EXPECT_EQ(outcomes[i].tokens, expected[i])
        << "request " << i << " (prompt of " << prompts[i].size() << " tokens)";
  }
  EXPECT_EQ(mismatches, 0);
  // Every request went through a prefill node and was imported by a decode node.
  int64_t imported = 0;
  for (int d = 0; d < 2; ++d) {
    auto load = cluster.DecodeLoad(cluster.decode(d).grpc_address());
    ASSERT_TRUE(load.ok()) << load.status();
    imported += load->num_imported_requests();
    EXPECT_GT(load->num_imported_requests(), 0) << "decode " << d << " got no requests";
  }
  EXPECT_EQ(imported, kNumRequests);
  for (int d = 0; d < 2; ++d) {
    EXPECT_TRUE(cluster.WaitForLoad(
        cluster.decode(d).grpc_address(), /*decode=*/true,
        [](const v1::NodeLoad& l) { return l.num_free_kv_blocks() == l.num_kv_blocks(); },
        absl::Seconds(10)))
        << "decode " << d << " still holds blocks";
  }
  if (HasFailure()) ADD_FAILURE() << cluster.Logs();
}

INSTANTIATE_TEST_SUITE_P(Transports, DisaggregatedEqualsColocatedTest,
                         ::testing::Values("tcp", "posix,sysv,self"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "tcp" ? std::string("UcxTcp")
                                                      : std::string("UcxSharedMemory");
                         });

}  // namespace
}  // namespace tandem::testing
