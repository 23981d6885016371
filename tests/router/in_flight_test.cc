// The router's in-flight accounting (router/in_flight.h, Node's pending_*): placements count
// against their node until a load report's receipt for this router shows them, the node
// restarts or forgets this router, a report from a node without receipts comes, or they expire;
// several routers each see the others' work in the reports alone.
#include "router/in_flight.h"

#include <memory>
#include <optional>

#include "common/util/clock.h"
#include "gtest/gtest.h"
#include "router/node.h"

namespace tandem {
namespace {

constexpr absl::Duration kTtl = absl::Seconds(2);

InFlightWork Work(int64_t tokens, int64_t blocks = 1) {
  return InFlightWork{.tokens = tokens, .blocks = blocks, .context_tokens = tokens};
}

// A load report of incarnation `incarnation` whose engine counted `running` requests, with
// receipts (router id, received); `counts_receipts` false: an older node.
v1::NodeLoad Report(uint64_t incarnation,
                    std::initializer_list<std::pair<uint64_t, int64_t>> receipts,
                    bool counts_receipts = true) {
  v1::NodeLoad load;
  load.set_incarnation(incarnation);
  load.set_block_size(16);
  load.set_num_kv_blocks(100);
  load.set_num_free_kv_blocks(100);
  for (const auto& [router, received] : receipts) {
    v1::RouterReceipt* r = load.add_receipts();
    r->set_router_id(router);
    r->set_received(received);
  }
  load.set_max_router_receipts(counts_receipts ? 64 : 0);
  return load;
}

std::shared_ptr<Node> MakeNode(uint64_t router_id, ManualClock* clock) {
  return std::make_shared<Node>(
      NodeRole::kPrefill, "p:1", /*client=*/nullptr,
      InFlightOptions{.router_id = router_id, .ttl = kTtl, .clock = clock});
}

TEST(InFlightLedgerTest, TagsCountUpFromOnePerNode) {
  InFlightLedger ledger(7, kTtl);
  const absl::Time t0 = absl::UnixEpoch();
  const PlacementTag a = ledger.Add(Work(10), t0);
  const PlacementTag b = ledger.Add(Work(20), t0);
  EXPECT_EQ(a.router_id, 7u);
  EXPECT_EQ(a.seq, 1u);
  EXPECT_EQ(b.seq, 2u);
  const InFlightSums sums = ledger.Sums(t0);
  EXPECT_EQ(sums.requests, 2);
  EXPECT_EQ(sums.tokens, 30);
  EXPECT_EQ(sums.blocks, 2);
  EXPECT_EQ(sums.context_tokens, 30);
}

TEST(InFlightLedgerTest, AReportTakenBeforeThePlacementsArrivedRetiresNone) {
  ManualClock clock;
  auto node = MakeNode(7, &clock);
  node->MarkUp(Report(1, {}));
  for (int i = 0; i < 3; ++i) node->AddPlacement(Work(100));
  // Taken before any arrived: no receipt for this router (the node counts receipts): all three
  // still count. Today's router zeroed them here.
  node->MarkUp(Report(1, {}));
  EXPECT_EQ(node->snapshot().pending_requests, 3);
  EXPECT_EQ(node->snapshot().pending_tokens, 300);
  // Two arrived.
  node->MarkUp(Report(1, {{7, 2}}));
  EXPECT_EQ(node->snapshot().pending_requests, 1);
  EXPECT_EQ(node->snapshot().pending_tokens, 100);
  // The same report again retires nothing more; the third arrives.
  node->MarkUp(Report(1, {{7, 2}}));
  EXPECT_EQ(node->snapshot().pending_requests, 1);
  node->MarkUp(Report(1, {{7, 3}}));
  EXPECT_EQ(node->snapshot().pending_requests, 0);
  EXPECT_EQ(node->snapshot().pending_blocks, 0);
}

TEST(InFlightLedgerTest, OutOfOrderArrivalsRetireByCount) {
  InFlightLedger ledger(7, kTtl);
  const absl::Time t0 = absl::UnixEpoch();
  ledger.Add(Work(100), t0);  // seq 1: still on the wire
  ledger.Add(Work(100), t0);  // seq 2: arrived first
  ledger.OnReport(1, /*restarted=*/false, t0);
  // One arrived: one retired (the first sent), the sums right in aggregate.
  EXPECT_EQ(ledger.Sums(t0).requests, 1);
  EXPECT_EQ(ledger.Sums(t0).tokens, 100);
}

TEST(InFlightLedgerTest, TwoRoutersSeeEachOthersWorkInTheReports) {
  ManualClock clock;
  // Router A and router B, each with its own view of the same node.
  auto a = MakeNode(0xA, &clock);
  auto b = MakeNode(0xB, &clock);
  a->MarkUp(Report(1, {}));
  b->MarkUp(Report(1, {}));
  for (int i = 0; i < 4; ++i) a->AddPlacement(Work(1000));
  b->AddPlacement(Work(500));
  // Before any report, each sees only its own.
  EXPECT_EQ(a->snapshot().pending_requests, 4);
  EXPECT_EQ(b->snapshot().pending_requests, 1);
  // The node took A's four and not B's yet: its load shows A's work to both.
  v1::NodeLoad load = Report(1, {{0xA, 4}});
  load.set_num_waiting(4);
  load.set_num_queued_tokens(4000);
  a->MarkUp(load);
  b->MarkUp(load);
  EXPECT_EQ(a->snapshot().pending_requests, 0);
  EXPECT_EQ(b->snapshot().pending_requests, 1);
  EXPECT_EQ(b->snapshot().load.num_queued_tokens() + b->snapshot().pending_tokens, 4500);
  // B's arrives.
  load = Report(1, {{0xA, 4}, {0xB, 1}});
  b->MarkUp(load);
  EXPECT_EQ(b->snapshot().pending_requests, 0);
}

TEST(InFlightLedgerTest, AnOlderNodeWithoutReceiptsRetiresAllOnEveryReport) {
  ManualClock clock;
  auto node = MakeNode(7, &clock);
  node->MarkUp(Report(1, {}, /*counts_receipts=*/false));
  node->AddPlacement(Work(100));
  node->AddPlacement(Work(100));
  node->MarkUp(Report(1, {}, /*counts_receipts=*/false));
  EXPECT_EQ(node->snapshot().pending_requests, 0);
}

TEST(InFlightLedgerTest, PlacementsExpireAfterTheirTtlFromWhenTheyWereSent) {
  ManualClock clock;
  auto node = MakeNode(7, &clock);
  node->MarkUp(Report(1, {}));
  node->AddPlacement(Work(100));  // its RPC failed: never arrives
  clock.AdvanceSeconds(1);
  const PlacementTag late = node->AddPlacement(Work(50));  // a prefill, sent later
  clock.AdvanceSeconds(0.5);
  node->PlacementSent(late.seq);
  EXPECT_EQ(node->snapshot().pending_requests, 2);
  clock.AdvanceSeconds(0.5);  // 2 s after the first
  EXPECT_EQ(node->snapshot().pending_requests, 1);
  EXPECT_EQ(node->snapshot().pending_tokens, 50);
  clock.AdvanceSeconds(1.4);  // 1.9 s after the second was sent
  EXPECT_EQ(node->snapshot().pending_requests, 1);
  clock.AdvanceSeconds(0.1);
  EXPECT_EQ(node->snapshot().pending_requests, 0);
}

TEST(InFlightLedgerTest, AWithdrawnPlacementKeepsTheCountsAligned) {
  ManualClock clock;
  auto node = MakeNode(7, &clock);
  node->MarkUp(Report(1, {}));
  const PlacementTag never_sent = node->AddPlacement(Work(1));
  node->AddPlacement(Work(10));
  node->AddPlacement(Work(100));
  node->WithdrawPlacement(never_sent.seq);
  EXPECT_EQ(node->snapshot().pending_tokens, 110);
  node->MarkUp(Report(1, {{7, 1}}));
  EXPECT_EQ(node->snapshot().pending_tokens, 100);
  node->MarkUp(Report(1, {{7, 2}}));
  EXPECT_EQ(node->snapshot().pending_requests, 0);
}

TEST(InFlightLedgerTest, ARestartOrAForgottenRouterStartsTheCountOver) {
  ManualClock clock;
  auto node = MakeNode(7, &clock);
  node->MarkUp(Report(1, {}));
  for (int i = 0; i < 5; ++i) node->AddPlacement(Work(100));
  node->MarkUp(Report(1, {{7, 3}}));
  EXPECT_EQ(node->snapshot().pending_requests, 2);
  // A new incarnation: which of ours it has is unknown, so none counts; it has taken one of ours
  // already.
  EXPECT_TRUE(node->MarkUp(Report(2, {{7, 1}})));
  EXPECT_EQ(node->snapshot().pending_requests, 0);
  // From here the counts line up with the new incarnation's.
  node->AddPlacement(Work(100));
  node->AddPlacement(Work(100));
  node->MarkUp(Report(2, {{7, 2}}));
  EXPECT_EQ(node->snapshot().pending_requests, 1);
  // The node forgot this router (more recent routers took its place): its count went back.
  node->AddPlacement(Work(100));
  node->MarkUp(Report(2, {}));
  EXPECT_EQ(node->snapshot().pending_requests, 0);
  node->AddPlacement(Work(100));
  node->MarkUp(Report(2, {{7, 1}}));
  EXPECT_EQ(node->snapshot().pending_requests, 0);
}

TEST(InFlightLedgerTest, ProcessRouterIdIsStableAndNonZero) {
  EXPECT_NE(ProcessRouterId(), 0u);
  EXPECT_EQ(ProcessRouterId(), ProcessRouterId());
}

TEST(InFlightLedgerTest, SetPlacementTagLeavesAnEmptyTagUnset) {
  v1::ReserveRequest request;
  SetPlacementTag({}, request.mutable_placement());
  EXPECT_EQ(request.placement().router_id(), 0u);
  SetPlacementTag({.router_id = 9, .seq = 4}, request.mutable_placement());
  EXPECT_EQ(request.placement().router_id(), 9u);
  EXPECT_EQ(request.placement().seq(), 4u);
}

}  // namespace
}  // namespace tandem
