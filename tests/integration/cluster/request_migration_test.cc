// Request migration on real processes: a decode node killed mid-stream (SIGSTOP at the client's
// fifth token, then SIGKILL) does not end the client's stream: the router moves the request to
// the other decode node, which recomputes prompt + the tokens so far, and the client receives
// exactly the tokens tandem-generate produces in one process, each once (greedy, and seeded
// sampling with penalties), and the surviving node's blocks all return. A decode node drained
// mid-stream (SIGTERM) moves the stream with its KV instead (live KV migration), with the same
// tokens and nothing recomputed.
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <functional>
#include <optional>
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

constexpr int kMigrateMaxTokens = 120;
constexpr int kKillAtToken = 5;

std::vector<int> MigrationPrompt() {
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
std::vector<int> MigrationReferenceTokens(const std::string& model, const std::vector<int>& prompt,
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
                                   std::to_string(kMigrateMaxTokens),
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
  v1::GenerateRequest request = GreedyTokenRequest(prompt, kMigrateMaxTokens);
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

Sampling SamplingFor(bool sampled) {
  if (!sampled) return {};
  return {.temperature = 0.8f,
          .top_p = 0.9f,
          .repetition_penalty = 1.1f,
          .frequency_penalty = 0.3f,
          .seed = 20261126};
}

struct StreamOutcome {
  std::vector<int> tokens;
  std::string finish_reason;
  grpc::Status status;
  int node = -1;  // the decode node `act` was done to
};

// Streams the request through the router; at the client's kKillAtToken-th token, does `act` to
// the decode node running it.
StreamOutcome StreamAndAct(LocalCluster& cluster, const v1::GenerateRequest& request,
                           const std::function<void(LaunchedProcess&)>& act) {
  auto stub = v1::Generation::NewStub(
      grpc::CreateChannel(cluster.router_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = stub->Generate(&context, request);
  v1::GenerateResponse response;
  StreamOutcome out;
  while (reader->Read(&response)) {
    for (const auto& t : response.tokens()) out.tokens.push_back(t.id());
    if (!response.finish_reason().empty()) out.finish_reason = response.finish_reason();
    if (out.node < 0 && out.tokens.size() >= static_cast<size_t>(kKillAtToken)) {
      for (int d = 0; d < 2 && out.node < 0; ++d) {
        auto load = cluster.DecodeLoad(cluster.decode_address(d));
        if (load.ok() && load->num_running() > 0) {
          act(cluster.decode(d));
          out.node = d;
        }
      }
      if (out.node < 0) {
        ADD_FAILURE() << "no decode node was running the request at token " << out.tokens.size();
        context.TryCancel();
      }
    }
  }
  out.status = reader->Finish();
  return out;
}

TEST_P(RequestMigrationTest, ADecodeNodeKilledMidStreamLosesNoTokenAndRepeatsNone) {
  const Sampling s = SamplingFor(GetParam());
  const std::vector<int> prompt = MigrationPrompt();
  const std::vector<int> expected = MigrationReferenceTokens(TestModelDir("llama"), prompt, s);
  ASSERT_EQ(expected.size(), static_cast<size_t>(kMigrateMaxTokens));
  // Stop the node where it is, then kill it.
  const StreamOutcome got = StreamAndAct(cluster_, Request(prompt, s), [](LaunchedProcess& node) {
    node.Signal(SIGSTOP);
    node.Kill();
  });
  ASSERT_GE(got.node, 0);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message() << "\n" << cluster_.Logs();
  EXPECT_EQ(got.finish_reason, "length");
  EXPECT_EQ(got.tokens, expected) << "got " << absl::StrJoin(got.tokens, ",") << "\nwant "
                                  << absl::StrJoin(expected, ",");

  absl::StatusOr<std::string> metrics = ScrapeMetrics(cluster_.router_metrics_address());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(MetricValue(*metrics, "tandem_router_migrations_total{reason=\"node_unreachable\"}"), 1)
      << *metrics;
  EXPECT_EQ(MetricValue(*metrics, "tandem_router_failed_after_first_token_total"), 0);
  const int survivor = 1 - got.node;
  EXPECT_TRUE(cluster_.WaitForLoad(
      cluster_.decode_address(survivor), /*decode=*/true,
      [](const v1::NodeLoad& l) {
        return l.num_free_kv_blocks() == l.num_kv_blocks() && l.num_running() == 0;
      },
      absl::Seconds(5)))
      << cluster_.Logs();
}

// Live KV migration on the CPU backend: SIGTERM at the fifth token makes the node pause the
// stream and the router move it with its KV (the tiny model's real K/V, checksummed) to the other
// decode node, which decodes on from it: the tokens are tandem-generate's, nothing is recomputed.
TEST_P(RequestMigrationTest, ADecodeNodeDrainedMidStreamMovesTheKvAndLosesNoToken) {
  const Sampling s = SamplingFor(GetParam());
  const std::vector<int> prompt = MigrationPrompt();
  const std::vector<int> expected = MigrationReferenceTokens(TestModelDir("llama"), prompt, s);
  ASSERT_EQ(expected.size(), static_cast<size_t>(kMigrateMaxTokens));
  const StreamOutcome got = StreamAndAct(cluster_, Request(prompt, s),
                                         [](LaunchedProcess& node) { node.Signal(SIGTERM); });
  ASSERT_GE(got.node, 0);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message() << "\n" << cluster_.Logs();
  EXPECT_EQ(got.finish_reason, "length");
  EXPECT_EQ(got.tokens, expected) << "got " << absl::StrJoin(got.tokens, ",") << "\nwant "
                                  << absl::StrJoin(expected, ",");
  std::optional<int> exit = cluster_.decode(got.node).WaitExit(absl::Seconds(20));
  ASSERT_TRUE(exit.has_value()) << "the drained decode node did not exit";
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0)
      << cluster_.decode(got.node).DescribeExit();

  absl::StatusOr<std::string> metrics = ScrapeMetrics(cluster_.router_metrics_address());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(MetricValue(*metrics,
                        "tandem_router_kv_moves_total{trigger=\"node_paused\",result=\"moved\"}"),
            1)
      << *metrics << cluster_.Logs();
  for (const char* reason : {"node_unreachable", "stream_aborted", "stream_failed"}) {
    EXPECT_EQ(MetricValue(*metrics,
                          absl::StrCat("tandem_router_migrations_total{reason=\"", reason, "\"}")),
              0)
        << reason;
  }
  const int survivor = 1 - got.node;
  absl::StatusOr<std::string> decode_metrics =
      ScrapeMetrics(cluster_.decode_metrics_address(survivor));
  ASSERT_TRUE(decode_metrics.ok()) << decode_metrics.status();
  // The moved KV was checked against the source's checksums before it was admitted.
  EXPECT_EQ(MetricValue(*decode_metrics, "tandem_decode_migrations_in_total"), 1)
      << *decode_metrics;
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
