// The single-process reference of the token-exactness tests: what tandem-generate gives for each
// prompt (greedy, EOS ignored), and the mixed prompts those tests send through a cluster.
#ifndef TANDEM_TESTS_INTEGRATION_CLUSTER_REFERENCE_TOKENS_H_
#define TANDEM_TESTS_INTEGRATION_CLUSTER_REFERENCE_TOKENS_H_

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/process_launcher.h"

namespace tandem::testing {

// `n` prompts of 1 to 110 tokens (up to 4 chunks of 32), every fourth one starting with the same
// 40 tokens (a prefix-cache hit on the second and later ones).
inline std::vector<std::vector<int>> MixedPrompts(int n, uint32_t seed = 20261121) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> token(100, 20000);
  std::vector<int> shared_prefix(40);
  for (int& t : shared_prefix) t = token(rng);
  std::vector<std::vector<int>> prompts;
  for (int i = 0; i < n; ++i) {
    std::vector<int> prompt;
    if (i % 4 == 0) prompt = shared_prefix;
    const int length = 1 + (i * 37) % 110;
    for (int j = 0; j < length; ++j) prompt.push_back(token(rng));
    prompts.push_back(std::move(prompt));
  }
  return prompts;
}

// tandem-generate's greedy tokens (`max_tokens` each, EOS ignored) for each prompt, in order,
// with `kv_cache_dtype` KV (--kv-cache-dtype; "auto": the backend's own).
inline std::vector<std::vector<int>> ReferenceTokens(const std::string& model,
                                                     const std::vector<std::vector<int>>& prompts,
                                                     int max_tokens,
                                                     const std::string& kv_cache_dtype = "auto") {
  const std::string dir = MakeTestTempDir("disagg_reference_");
  const std::string file = dir + "/prompts.jsonl";
  {
    std::ofstream out(file);
    for (const auto& p : prompts) out << "[" << absl::StrJoin(p, ",") << "]\n";
  }
  CommandResult r = RunCommand(BinaryPath("tandem-generate"),
                               {"--model", model, "--prompts-file", file, "--temperature", "0",
                                "--max-tokens", std::to_string(max_tokens), "--ignore-eos",
                                "--threads", "2", "--kv-cache-dtype", kv_cache_dtype});
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

// Sends every prompt at once through `cluster` (greedy, `max_tokens` each) and expects each to
// succeed, end at its length and give exactly `expected`'s tokens.
inline void ExpectConcurrentGreedyTokens(LocalCluster& cluster,
                                         const std::vector<std::vector<int>>& prompts,
                                         const std::vector<std::vector<int>>& expected,
                                         int max_tokens) {
  std::vector<GenerateOutcome> outcomes(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back(
        [&, i] { outcomes[i] = cluster.Generate(GreedyTokenRequest(prompts[i], max_tokens)); });
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
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_INTEGRATION_CLUSTER_REFERENCE_TOKENS_H_
