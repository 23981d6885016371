// RequestRunner in an auto cluster (--mode auto): the decode nodes are the prefill pool too, as the
// same Node objects (one in-flight ledger per node). A request is prefilled by another node, which
// writes into the decode node's reservation, or locally when no other node is up; never does a
// node prefill for itself through the disaggregated path.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/request_runner.h"
#include "tests/router/request_runner_fixture.h"

namespace tandem {
namespace {

using testing::CollectingSink;
using testing::FakeNode;
using testing::RequestRunnerTest;
using testing::TokenEvents;

class AutoModeRunnerTest : public RequestRunnerTest {
 protected:
  void SetUp() override {
    RequestRunnerTest::SetUp();
    options_.placement.mode = ServingMode::kAuto;
  }
};

TEST_F(AutoModeRunnerTest, ADecodeNodePrefillsForAnotherOne) {
  // least_loaded: D is the node with the most free blocks; P the least loaded of the others.
  options_.placement.policy = PlacementPolicy::kLeastLoaded;
  FakeNode d1(NodeRole::kDecode, "d:1", 5000), d2(NodeRole::kDecode, "d:2", 1000);
  Add(d1);
  Add(d2);
  d1.client->AddStream({.events = TokenEvents(Encode(" hello world"))});
  CollectingSink sink;
  const grpc::Status status = Run("Hi", sink);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(sink.text(), " hello world");
  ASSERT_EQ(d1.client->reserves().size(), 1u);
  EXPECT_TRUE(d1.client->prefills().empty());
  ASSERT_EQ(d2.client->prefills().size(), 1u);
  EXPECT_TRUE(d2.client->reserves().empty());
  // The prefill carries d:1's handoff, for the same request and prompt.
  EXPECT_EQ(d2.client->prefills()[0].handoff().request_id(), 1u);
  EXPECT_EQ(d2.client->prefills()[0].request_id(), d1.client->reserves()[0].request_id());
  EXPECT_EQ(d2.client->prefills()[0].prompt_token_ids_size(),
            d1.client->reserves()[0].prompt_token_ids_size());
  EXPECT_EQ(counters_.disaggregated.load(), 1);
  EXPECT_EQ(counters_.requests_ok.load(), 1);
}

TEST_F(AutoModeRunnerTest, ANodeWithoutRoomForThePromptDoesNotPrefillForAnother) {
  // d:2's blocks are all taken (reserved for prompts others prefill, say): were it to prefill
  // for d:1, it could not schedule the prompt. d:1 prefills locally.
  options_.placement.policy = PlacementPolicy::kLeastLoaded;
  FakeNode d1(NodeRole::kDecode, "d:1", 5000), d2(NodeRole::kDecode, "d:2", 0);
  Add(d1);
  Add(d2);
  d1.client->AddStream({.events = TokenEvents(Encode(" local"))});
  CollectingSink sink;
  ASSERT_TRUE(Run("Hi", sink).ok());
  EXPECT_EQ(sink.text(), " local");
  EXPECT_EQ(d1.client->generates().size(), 1u);
  EXPECT_TRUE(d2.client->prefills().empty());
  EXPECT_EQ(counters_.local_prefill_no_prefill_node.load(), 1);
}

TEST_F(AutoModeRunnerTest, APrefillForAnotherNodeCountsItsBlocksThereUntilReported) {
  options_.placement.policy = PlacementPolicy::kLeastLoaded;
  FakeNode d1(NodeRole::kDecode, "d:1", 5000), d2(NodeRole::kDecode, "d:2", 1000);
  Add(d1);
  Add(d2);
  d1.client->AddStream({.events = TokenEvents(Encode(" x"))});
  CollectingSink sink;
  ASSERT_TRUE(Run("Hi", sink).ok());
  ASSERT_EQ(d2.client->prefills().size(), 1u);
  // The prompt's one block, held on d:2 by the prefill, is in flight there (no report since).
  EXPECT_EQ(d2.node->snapshot().pending_blocks, 1);
  EXPECT_EQ(d2.node->snapshot().pending_requests, 1);
}

TEST_F(AutoModeRunnerTest, ALoneNodePrefillsLocally) {
  for (PlacementPolicy policy : {PlacementPolicy::kRoundRobin, PlacementPolicy::kLeastLoaded,
                                 PlacementPolicy::kPrefixAware, PlacementPolicy::kCost}) {
    SCOPED_TRACE(PlacementPolicyName(policy));
    options_.placement.policy = policy;
    FakeNode d(NodeRole::kDecode, "d:1");
    testing::FakeNodeDirectory directory;
    directory.Add(d);
    RouterCounters counters;
    RouterMetrics metrics(&counters, nullptr);
    d.client->AddStream({.events = TokenEvents(Encode(" alone"))});
    RequestRunner runner(testing::TestServedModel(), &directory, options_, &counters, &metrics);
    v1::GenerateRequest request;
    request.set_text("Hi");
    request.mutable_sampling()->set_max_tokens(16);
    CollectingSink sink;
    ASSERT_TRUE(runner.Run(request, RunOptions(), sink).ok());
    EXPECT_EQ(sink.text(), " alone");
    EXPECT_EQ(d.client->generates().size(), 1u);
    EXPECT_TRUE(d.client->reserves().empty());
    EXPECT_TRUE(d.client->prefills().empty());
    EXPECT_EQ(counters.local_prefill_no_prefill_node.load(), 1);
  }
}

TEST_F(AutoModeRunnerTest, RoundRobinNeverPairsANodeWithItself) {
  options_.placement.policy = PlacementPolicy::kRoundRobin;
  FakeNode d1(NodeRole::kDecode, "d:1"), d2(NodeRole::kDecode, "d:2"), d3(NodeRole::kDecode, "d:3");
  std::vector<FakeNode*> nodes = {&d1, &d2, &d3};
  for (FakeNode* n : nodes) {
    Add(*n);
    n->client->AddStream({.events = TokenEvents(Encode(" x"))});
  }
  RequestRunner runner(testing::TestServedModel(), &directory_, options_, &counters_, &metrics_);
  constexpr int kRequests = 9;
  for (int i = 0; i < kRequests; ++i) {
    v1::GenerateRequest request;
    request.set_text("Hi");
    request.mutable_sampling()->set_max_tokens(4);
    CollectingSink sink;
    ASSERT_TRUE(runner.Run(request, RunOptions(), sink).ok());
  }
  // Every request reserved on one node and prefilled on another; each node did both.
  std::map<std::string, int> decoded_at;
  for (int k = 0; k < 3; ++k) {
    for (const v1::ReserveRequest& r : nodes[k]->client->reserves()) decoded_at[r.request_id()] = k;
  }
  ASSERT_EQ(decoded_at.size(), static_cast<size_t>(kRequests));
  int prefills = 0;
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE(k);
    EXPECT_FALSE(nodes[k]->client->reserves().empty());
    EXPECT_FALSE(nodes[k]->client->prefills().empty());
    for (const v1::PrefillRequest& p : nodes[k]->client->prefills()) {
      ASSERT_TRUE(decoded_at.contains(p.request_id())) << p.request_id();
      EXPECT_NE(decoded_at[p.request_id()], k) << p.request_id();
      ++prefills;
    }
  }
  EXPECT_EQ(prefills, kRequests);
  EXPECT_EQ(counters_.disaggregated.load(), kRequests);
}

TEST_F(AutoModeRunnerTest, AFailedPrefillReleasesTheReservationAndRetriesWithoutThatNode) {
  options_.placement.policy = PlacementPolicy::kLeastLoaded;
  FakeNode d1(NodeRole::kDecode, "d:1", 5000), d2(NodeRole::kDecode, "d:2", 1000);
  Add(d1);
  Add(d2);
  d2.client->AddPrefillAnswer(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full"));
  d1.client->AddStream({.end = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")});
  d1.client->AddStream({.events = TokenEvents(Encode(" second"))});
  CollectingSink sink;
  ASSERT_TRUE(Run("Hi", sink).ok());
  EXPECT_EQ(sink.text(), " second");
  EXPECT_EQ(d2.client->prefills().size(), 1u);
  // d:1's reservation is released by a Cancel to d:1 (a node of both roles takes the router's
  // Cancels on its DecodeNode service, which ends a Prefill call of the id too).
  ASSERT_EQ(d1.client->reserves().size(), 1u);
  ASSERT_EQ(d1.client->cancels().size(), 1u);
  EXPECT_EQ(d1.client->cancels()[0], d1.client->reserves()[0].request_id());
  EXPECT_EQ(counters_.retries_for(RetryReason::kPrefillFailed), 1);
  // The retry avoids d:2 in both roles: d:1 alone is left, which prefills locally.
  EXPECT_EQ(d1.client->generates().size(), 1u);
  EXPECT_TRUE(d2.client->generates().empty());
  EXPECT_EQ(counters_.disaggregated.load(), 1);
  EXPECT_EQ(counters_.local_prefill_no_prefill_node.load(), 1);
}

}  // namespace
}  // namespace tandem
