// Request migration on real processes: a decode node killed mid-stream (SIGSTOP at the client's
// fifth token, then SIGKILL) does not end the client's stream: the router moves the request to
// the other decode node, which recomputes prompt + the tokens so far, and the client receives
// exactly the tokens tandem-generate produces in one process, each once (greedy, and seeded
// sampling with penalties), and the surviving node's blocks all return.
#include <signal.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

constexpr int kMaxTokens = 120;
constexpr int kKillAtToken = 5;

std::vector<int> Prompt() {
  std::vector<int> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back(300 + (i * 131) % 9000);
  return prompt;
}

struct Sampling {
  float temperature = 0.0f;
  float top_p = 1.0f;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
};

// tandem-generate's tokens for `prompt` in one process.
std::vector<int> ReferenceTokens(const std::string& model, const std::vector<int>& prompt,
                                 const Sampling& s) {
  const std::string dir = MakeTestTempDir("migration_reference_");
  const std::string file = dir + "/prompts.jsonl";
  {
    std::ofstream out(file);
    out << "[" << absl::StrJoin(prompt, ",") << "]\n";
  }
  std::vector<std::string> args = {"--model",
                                   model,
                                   "--prompts-file",
                                   file,
                                   "--temperature",
                                   absl::StrCat(s.temperature),
                                   "--max-tokens",
                                   std::to_string(kMaxTokens),
                                   "--ignore-eos",
                                   "--threads",
                                   "2"};
  if (s.temperature > 0) {
    for (const std::string& a :
         {std::string("--top-p"), absl::StrCat(s.top_p), std::string("--repetition-penalty"),
          absl::StrCat(s.repetition_penalty), std::string("--frequency-penalty"),
          absl::StrCat(s.frequency_penalty), std::string("--seed"), absl::StrCat(s.seed)}) {
      args.push_back(a);
    }
  }
  CommandResult r = RunCommand(BinaryPath("tandem-generate"), args);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  std::istringstream lines(r.stdout_text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    return nlohmann::json::parse(line)["token_ids"].get<std::vector<int>>();
  }
  return {};
}

v1::GenerateRequest Request(const std::vector<int>& prompt, const Sampling& s) {
  v1::GenerateRequest request = GreedyTokenRequest(prompt, kMaxTokens);
  if (s.temperature > 0) {
    v1::SamplingParams* p = request.mutable_sampling();
    p->set_temperature(s.temperature);
    p->set_top_p(s.top_p);
    p->set_repetition_penalty(s.repetition_penalty);
    p->set_frequency_penalty(s.frequency_penalty);
    p->set_seed(s.seed);
  }
  return request;
}

class RequestMigrationTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ClusterSpec spec;
    spec.model_dir = TestModelDir("llama");
    spec.num_prefill = 1;
    spec.num_decode = 2;
    spec.node_args = {
        "--max-num-batched-tokens", "32", "--max-num-seqs", "8", "--kv-cache-mb", "16"};
    spec.decode_args = {"--lease-ms", "3000"};
    spec.router_args = {"--policy", "round_robin", "--local-prefill-threshold", "0",
                        // the killed node must be seen as down quickly
                        "--health-interval-ms", "100"};
    ASSERT_NO_FATAL_FAILURE(cluster_.Start(spec));
  }

  LocalCluster cluster_;
};

TEST_P(RequestMigrationTest, ADecodeNodeKilledMidStreamLosesNoTokenAndRepeatsNone) {
  const bool sampled = GetParam();
  Sampling s;
  if (sampled)
    s = {.temperature = 0.8f,
         .top_p = 0.9f,
         .repetition_penalty = 1.1f,
         .frequency_penalty = 0.3f,
         .seed = 20261126};
  const std::vector<int> prompt = Prompt();
  const std::vector<int> expected = ReferenceTokens(TestModelDir("llama"), prompt, s);
  ASSERT_EQ(expected.size(), static_cast<size_t>(kMaxTokens));

  auto stub = v1::Generation::NewStub(
      grpc::CreateChannel(cluster_.router_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = stub->Generate(&context, Request(prompt, s));
  v1::GenerateResponse response;
  std::vector<int> got;
  std::string finish_reason;
  int killed = -1;
  while (reader->Read(&response)) {
    for (const auto& t : response.tokens()) got.push_back(t.id());
    if (!response.finish_reason().empty()) finish_reason = response.finish_reason();
    if (killed < 0 && got.size() >= static_cast<size_t>(kKillAtToken)) {
      // The node streaming it: stop it where it is, then kill it.
      for (int d = 0; d < 2 && killed < 0; ++d) {
        auto load = cluster_.DecodeLoad(cluster_.decode_address(d));
        if (load.ok() && load->num_running() > 0) {
          cluster_.decode(d).Signal(SIGSTOP);
          cluster_.decode(d).Kill();
          killed = d;
        }
      }
      ASSERT_GE(killed, 0) << "no decode node was running the request at token " << got.size();
    }
  }
  const grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << cluster_.Logs();
  EXPECT_EQ(finish_reason, "length");
  EXPECT_EQ(got, expected) << "got " << absl::StrJoin(got, ",") << "\nwant "
                           << absl::StrJoin(expected, ",");

  absl::StatusOr<std::string> metrics = ScrapeMetrics(cluster_.router_metrics_address());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(MetricValue(*metrics, "tandem_router_migrations_total{reason=\"node_unreachable\"}"), 1)
      << *metrics;
  EXPECT_EQ(MetricValue(*metrics, "tandem_router_failed_after_first_token_total"), 0);
  const int survivor = 1 - killed;
  EXPECT_TRUE(cluster_.WaitForLoad(
      cluster_.decode_address(survivor), /*decode=*/true,
      [](const v1::NodeLoad& l) {
        return l.num_free_kv_blocks() == l.num_kv_blocks() && l.num_running() == 0;
      },
      absl::Seconds(5)))
      << cluster_.Logs();
}

INSTANTIATE_TEST_SUITE_P(GreedyAndSeeded, RequestMigrationTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("SeededSampling")
                                             : std::string("Greedy");
                         });

}  // namespace
}  // namespace tandem::testing
