// What the request path tells the nodes and keeps for itself about its placements
// (router/in_flight.h): every Reserve, Generate and Prefill carries this router's PlacementTag
// with the next sequence number of its (router, node); each placement counts in the node's
// pending_* until a report shows it; a prefill that is never sent (no handoff) is withdrawn.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "router/in_flight.h"
#include "router/request_runner.h"
#include "tests/router/request_runner_fixture.h"

namespace tandem {
namespace {

using testing::CollectingSink;
using testing::FakeNode;
using testing::RequestRunnerTest;
using testing::TokenEvents;

TEST_F(RequestRunnerTest, RequestsCarryTheirPlacementTags) {
  FakeNode p(NodeRole::kPrefill, "p:1"), d(NodeRole::kDecode, "d:1");
  Add(p);
  Add(d);
  d.client->AddStream({.events = TokenEvents(Encode(" hello"))});
  for (int i = 0; i < 2; ++i) {
    CollectingSink sink;
    ASSERT_TRUE(Run("Hi", sink).ok());
  }
  ASSERT_EQ(d.client->reserves().size(), 2u);
  ASSERT_EQ(p.client->prefills().size(), 2u);
  for (uint64_t i = 0; i < 2; ++i) {
    const v1::PlacementTag reserve = d.client->reserves()[i].placement();
    const v1::PlacementTag prefill = p.client->prefills()[i].placement();
    EXPECT_EQ(reserve.router_id(), ProcessRouterId());
    EXPECT_EQ(prefill.router_id(), ProcessRouterId());
    EXPECT_EQ(reserve.seq(), i + 1);  // per node, from 1
    EXPECT_EQ(prefill.seq(), i + 1);
  }
  // The fake nodes never report again: both placements still count on each, with what they
  // bring (D: the blocks of prompt + max_tokens; P: the prompt to compute).
  const int64_t prompt = static_cast<int64_t>(Encode("Hi").size());
  const Node::Snapshot ds = d.node->snapshot();
  const Node::Snapshot ps = p.node->snapshot();
  EXPECT_EQ(ds.pending_requests, 2);
  EXPECT_EQ(ds.pending_tokens, 0);  // D computes no prompt tokens of a disaggregated request
  EXPECT_EQ(ds.pending_blocks, 2 * ((prompt + 16 + 15) / 16));
  EXPECT_EQ(ds.pending_context_tokens, 2 * prompt);
  EXPECT_EQ(ps.pending_requests, 2);
  EXPECT_EQ(ps.pending_tokens, 2 * prompt);
  EXPECT_EQ(ps.pending_blocks, 0);

  // A report whose receipt counts one of this router's requests retires one of them.
  v1::NodeLoad load = ps.load;
  load.set_max_router_receipts(64);
  v1::RouterReceipt* receipt = load.add_receipts();
  receipt->set_router_id(ProcessRouterId());
  receipt->set_received(1);
  p.node->MarkUp(load);
  EXPECT_EQ(p.node->snapshot().pending_requests, 1);
}

TEST_F(RequestRunnerTest, ALocalGenerationCarriesItsTag) {
  FakeNode d(NodeRole::kDecode, "d:1");
  Add(d);
  d.client->AddStream({.events = TokenEvents(Encode(" local"))});
  CollectingSink sink;
  ASSERT_TRUE(Run("Hi", sink).ok());
  ASSERT_EQ(d.client->generates().size(), 1u);
  EXPECT_EQ(d.client->generates()[0].placement().router_id(), ProcessRouterId());
  EXPECT_EQ(d.client->generates()[0].placement().seq(), 1u);
  const int64_t prompt = static_cast<int64_t>(Encode("Hi").size());
  EXPECT_EQ(d.node->snapshot().pending_tokens, prompt);  // D computes the prompt
}

TEST_F(RequestRunnerTest, APrefillNeverSentIsWithdrawn) {
  FakeNode p(NodeRole::kPrefill, "p:1");
  FakeNode d1(NodeRole::kDecode, "d:1", 5000), d2(NodeRole::kDecode, "d:2");
  Add(p);
  Add(d1);
  Add(d2);
  d1.client->AddStream({.no_handoff = true});  // the first attempt never gets to prefill
  d2.client->AddStream({.events = TokenEvents(Encode(" fine"))});
  CollectingSink sink;
  ASSERT_TRUE(Run("Hi", sink).ok());
  ASSERT_EQ(p.client->prefills().size(), 1u);
  // The first attempt's placement on P (seq 1) was withdrawn; the second's (seq 2) was sent and
  // is the only one counted there.
  EXPECT_EQ(p.client->prefills()[0].placement().seq(), 2u);
  EXPECT_EQ(p.node->snapshot().pending_requests, 1);
}

}  // namespace
}  // namespace tandem
