// The router in front of real nodes: a dead decode node is routed around and used again once it
// is back; a prefill node killed mid-transfer costs no hang and no blocks; a client that goes away
// releases everything; bad input is INVALID_ARGUMENT and the router keeps serving.
#include <signal.h>

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

std::vector<int> FaultsPrompt(int n, int salt) {
  std::vector<int> prompt;
  for (int i = 0; i < n; ++i) prompt.push_back(300 + (i * 131 + salt * 977) % 9000);
  return prompt;
}

bool AllBlocksFree(const v1::NodeLoad& load) {
  return load.num_free_kv_blocks() == load.num_kv_blocks() && load.num_held_kv_blocks() == 0 &&
         load.num_awaiting_kv() == 0 && load.num_running() == 0;
}

class RouterFaultsTest : public ::testing::Test {
 protected:
  void Start(int num_prefill, int num_decode, std::vector<std::string> router_args = {}) {
    spec_.model_dir = TestModelDir("llama");
    spec_.num_prefill = num_prefill;
    spec_.num_decode = num_decode;
    spec_.node_args = {
        "--max-num-batched-tokens", "16", "--max-num-seqs", "8", "--kv-cache-mb", "16"};
    spec_.decode_args = {"--lease-ms", "3000"};
    spec_.router_args = {"--policy", "round_robin", "--local-prefill-threshold",
                         "0",        "--lease-ms",  "3000"};
    spec_.router_args.insert(spec_.router_args.end(), router_args.begin(), router_args.end());
    ASSERT_NO_FATAL_FAILURE(cluster_.Start(spec_));
  }

  ClusterSpec spec_;
  LocalCluster cluster_;
};

TEST_F(RouterFaultsTest, DeadDecodeNodeIsAvoidedAndUsedAgainAfterRestart) {
  ASSERT_NO_FATAL_FAILURE(Start(1, 2));
  const std::string listen = cluster_.decode(1).grpc_address();
  cluster_.decode(1).Kill();
  ASSERT_TRUE(cluster_.decode(1).WaitExit(absl::Seconds(5)).has_value());
  for (int i = 0; i < 6; ++i) {
    GenerateOutcome r = cluster_.Generate(GreedyTokenRequest(FaultsPrompt(20, i), 4));
    EXPECT_TRUE(r.status.ok()) << "request " << i << ": " << r.status.error_message() << "\n"
                               << cluster_.Logs();
    EXPECT_EQ(r.tokens.size(), 4u);
  }
  // Back on the same address (a new incarnation): the router's health checks find it again.
  auto restarted = cluster_.StartDecode(1, listen);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  absl::SleepFor(absl::Seconds(1));
  for (int i = 0; i < 8; ++i) {
    GenerateOutcome r = cluster_.Generate(GreedyTokenRequest(FaultsPrompt(20, 100 + i), 4));
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  }
  auto load = cluster_.DecodeLoad(*restarted);
  ASSERT_TRUE(load.ok());
  EXPECT_GT(load->num_finished_requests(), 0) << "the restarted node got no requests\n"
                                              << cluster_.Logs();
}

TEST_F(RouterFaultsTest, PrefillNodeKilledMidTransferNeitherHangsNorLeaks) {
  ASSERT_NO_FATAL_FAILURE(Start(2, 1));
  GenerateOutcome outcome;
  const absl::Time start = absl::Now();
  std::thread client([&] {
    outcome = cluster_.Generate(GreedyTokenRequest(FaultsPrompt(3000, 1), 4), absl::Seconds(30));
  });
  absl::SleepFor(absl::Milliseconds(80));
  // Whichever prefill node has it: kill both's chances by killing the busy one.
  for (int p = 0; p < 2; ++p) {
    auto load = cluster_.PrefillLoad(cluster_.prefill(p).grpc_address());
    if (load.ok() && load->num_running() > 0) cluster_.prefill(p).Kill();
  }
  client.join();
  const absl::Duration took = absl::Now() - start;
  // Retried on the other prefill node, or failed with a clear error; within the lease either way.
  if (!outcome.status.ok()) {
    EXPECT_FALSE(outcome.status.error_message().empty());
  } else {
    EXPECT_EQ(outcome.tokens.size(), 4u);
  }
  EXPECT_LT(took, absl::Seconds(12));
  EXPECT_TRUE(cluster_.WaitForLoad(cluster_.decode(0).grpc_address(), /*decode=*/true,
                                   AllBlocksFree, absl::Seconds(8)))
      << cluster_.Logs();
}

TEST_F(RouterFaultsTest, ClientCancelMidStreamReleasesBothNodes) {
  ASSERT_NO_FATAL_FAILURE(Start(1, 1));
  auto stub = v1::Generation::NewStub(
      grpc::CreateChannel(cluster_.router_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::GenerateRequest request = GreedyTokenRequest(FaultsPrompt(50, 3), 5000);
  auto reader = stub->Generate(&context, request);
  v1::GenerateResponse response;
  int tokens = 0;
  while (tokens < 3 && reader->Read(&response)) tokens += response.tokens_size();
  if (tokens < 3) {
    FAIL() << "stream ended after " << tokens << " tokens: " << reader->Finish().error_message();
  }
  context.TryCancel();
  while (reader->Read(&response)) {
  }
  reader->Finish();
  EXPECT_TRUE(cluster_.WaitForLoad(cluster_.decode(0).grpc_address(), /*decode=*/true,
                                   AllBlocksFree, absl::Seconds(5)))
      << cluster_.Logs();
  EXPECT_TRUE(cluster_.WaitForLoad(
      cluster_.prefill(0).grpc_address(), /*decode=*/false,
      [](const v1::NodeLoad& l) { return l.num_held_kv_blocks() == 0 && l.num_running() == 0; },
      absl::Seconds(5)));
}

TEST_F(RouterFaultsTest, BadInputIsInvalidArgumentAndTheRouterKeepsServing) {
  ASSERT_NO_FATAL_FAILURE(Start(1, 1));
  std::vector<std::pair<std::string, v1::GenerateRequest>> bad;
  {
    v1::GenerateRequest r = GreedyTokenRequest({}, 4);
    bad.emplace_back("empty prompt", r);
  }
  {
    v1::GenerateRequest r;
    r.set_text("");
    bad.emplace_back("empty text", r);
  }
  bad.emplace_back("longer than the context", GreedyTokenRequest(FaultsPrompt(9000, 1), 4));
  {
    v1::GenerateRequest r = GreedyTokenRequest(FaultsPrompt(5, 1), 4);
    r.mutable_sampling()->set_temperature(-1);
    bad.emplace_back("negative temperature", r);
  }
  {
    v1::GenerateRequest r = GreedyTokenRequest(FaultsPrompt(5, 1), 4);
    r.mutable_sampling()->set_top_p(1.5);
    bad.emplace_back("top_p above 1", r);
  }
  {
    v1::GenerateRequest r = GreedyTokenRequest(FaultsPrompt(5, 1), 4);
    r.set_model("no-such-model");
    bad.emplace_back("unknown model", r);
  }
  {
    v1::GenerateRequest r = GreedyTokenRequest({5, -3}, 4);
    bad.emplace_back("negative token id", r);
  }
  for (const auto& [name, request] : bad) {
    GenerateOutcome r = cluster_.Generate(request, absl::Seconds(20));
    EXPECT_EQ(r.status.error_code(), request.model().empty() ? grpc::StatusCode::INVALID_ARGUMENT
                                                             : grpc::StatusCode::NOT_FOUND)
        << name << ": " << r.status.error_message();
    EXPECT_FALSE(r.status.error_message().empty()) << name;
  }
  GenerateOutcome good = cluster_.Generate(GreedyTokenRequest(FaultsPrompt(5, 1), 4));
  EXPECT_TRUE(good.status.ok()) << good.status.error_message();
  EXPECT_EQ(good.tokens.size(), 4u);
}

}  // namespace
}  // namespace tandem::testing
