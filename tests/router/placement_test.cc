// Placer: each policy's choice of decode and prefill node, conditional disaggregation (local
// prefill for short uncached prompts, or when no prefill node is up), colocated mode.
#include "router/placement.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

NodeCandidate Candidate(int index, int64_t free_blocks = 100, int64_t queued = 0,
                        int64_t cached = 0, int64_t sequences = 0) {
  NodeCandidate c;
  c.index = index;
  c.address = "10.0.0." + std::to_string(index) + ":9000";
  c.free_kv_blocks = free_blocks;
  c.queued_tokens = queued;
  c.cached_prefix_tokens = cached;
  c.num_sequences = sequences;
  return c;
}

// A prefill node: a process of its own (a port no decode node listens on).
NodeCandidate PrefillCandidate(int index, int64_t free_blocks = 100, int64_t queued = 0,
                               int64_t cached = 0, int64_t sequences = 0) {
  NodeCandidate c = Candidate(index, free_blocks, queued, cached, sequences);
  c.address = "10.0.0." + std::to_string(index) + ":9100";
  return c;
}

PlacementOptions Options(PlacementPolicy policy, ServingMode mode = ServingMode::kDisaggregated,
                         int64_t threshold = 0) {
  PlacementOptions o;
  o.policy = policy;
  o.mode = mode;
  o.local_prefill_threshold = threshold;
  return o;
}

TEST(PlacementTest, ParsesAndNamesPoliciesAndModes) {
  for (PlacementPolicy p : {PlacementPolicy::kRoundRobin, PlacementPolicy::kLeastLoaded,
                            PlacementPolicy::kPrefixAware, PlacementPolicy::kCost}) {
    EXPECT_EQ(ParsePlacementPolicy(PlacementPolicyName(p)), p);
  }
  EXPECT_FALSE(ParsePlacementPolicy("random").has_value());
  EXPECT_EQ(ParseServingMode("colocated"), ServingMode::kColocated);
  EXPECT_EQ(ParseServingMode("disaggregated"), ServingMode::kDisaggregated);
  EXPECT_FALSE(ParseServingMode("both").has_value());
}

TEST(PlacementTest, RoundRobinCyclesEachRole) {
  Placer placer(Options(PlacementPolicy::kRoundRobin));
  std::vector<NodeCandidate> prefill = {PrefillCandidate(0), PrefillCandidate(1)};
  std::vector<NodeCandidate> decode = {Candidate(0), Candidate(1), Candidate(2)};
  std::vector<int> decode_seen, prefill_seen;
  for (int i = 0; i < 6; ++i) {
    auto p = placer.Choose(prefill, decode, 100);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->kind, PlacementKind::kDisaggregated);
    decode_seen.push_back(p->decode);
    prefill_seen.push_back(p->prefill);
  }
  EXPECT_EQ(decode_seen, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(prefill_seen, (std::vector<int>{0, 1, 0, 1, 0, 1}));
}

TEST(PlacementTest, LeastLoadedDecodeHasMostFreeBlocksThenFewestQueuedTokens) {
  Placer placer(Options(PlacementPolicy::kLeastLoaded));
  std::vector<NodeCandidate> prefill = {PrefillCandidate(0)};
  std::vector<NodeCandidate> decode = {Candidate(0, 50), Candidate(1, 80), Candidate(2, 60)};
  auto p = placer.Choose(prefill, decode, 10);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->decode, 1);

  decode = {Candidate(0, 80, 500), Candidate(1, 80, 100)};
  p = placer.Choose(prefill, decode, 10);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->decode, 1);
}

// A waiting prompt holds no blocks yet: of two nodes with equal queues, the one whose free
// blocks its queue will not take is the less loaded.
TEST(PlacementTest, LeastLoadedDecodeCountsTheBlocksItsQueueWillTake) {
  EXPECT_EQ(WaitingBlocks(4096, 16), 256);
  EXPECT_EQ(WaitingBlocks(4097, 16), 257);  // a partial block counts whole
  EXPECT_EQ(WaitingBlocks(4097, 0), 257);   // 16 tokens a block when the node reports none
  EXPECT_EQ(WaitingBlocks(100, 32), 4);
  EXPECT_EQ(WaitingBlocks(-5, 16), 0);

  Placer placer(Options(PlacementPolicy::kLeastLoaded, ServingMode::kColocated));
  NodeCandidate a = Candidate(0, 1000, /*queued=*/4096);
  a.waiting_blocks = 256;
  NodeCandidate b = Candidate(1, 800, /*queued=*/4096);
  auto p = placer.Choose({}, std::vector<NodeCandidate>{a, b}, 10);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->decode, 1);  // 744 < 800
  a.free_kv_blocks = 1057;
  p = placer.Choose({}, std::vector<NodeCandidate>{a, b}, 10);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->decode, 0);  // 801 > 800
  // A colocated node's queue comes first: fewer free blocks but nothing queued wins.
  b.queued_tokens = 0;
  b.free_kv_blocks = 10;
  p = placer.Choose({}, std::vector<NodeCandidate>{a, b}, 10);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->decode, 1);
  // A disaggregated cluster's decode node: its free blocks (less its queue's) come first.
  Placer disaggregated(Options(PlacementPolicy::kLeastLoaded));
  p = disaggregated.Choose(std::vector<NodeCandidate>{PrefillCandidate(0)},
                           std::vector<NodeCandidate>{a, b}, 10);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->decode, 0);  // 801 > 10
}

TEST(PlacementTest, LeastLoadedPrefillHasFewestQueuedTokens) {
  Placer placer(Options(PlacementPolicy::kLeastLoaded));
  std::vector<NodeCandidate> prefill = {PrefillCandidate(0, 100, 900), PrefillCandidate(1, 100, 10),
                                        PrefillCandidate(2, 100, 300)};
  std::vector<NodeCandidate> decode = {Candidate(0)};
  auto p = placer.Choose(prefill, decode, 10);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->prefill, 1);
  // Ties by sequence count.
  prefill = {PrefillCandidate(0, 100, 10, 0, 5), PrefillCandidate(1, 100, 10, 0, 2)};
  p = placer.Choose(prefill, decode, 10);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->prefill, 1);
}

TEST(PlacementTest, LeastLoadedIgnoresCachedPrefixes) {
  Placer placer(Options(PlacementPolicy::kLeastLoaded));
  std::vector<NodeCandidate> prefill = {PrefillCandidate(0, 100, 500, /*cached=*/64),
                                        PrefillCandidate(1, 100, 0, /*cached=*/0)};
  auto p = placer.Choose(prefill, std::vector<NodeCandidate>{Candidate(0)}, 100);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->prefill, 1);
}

TEST(PlacementTest, PrefixAwarePicksTheLongestCachedPrefixTiesByLoad) {
  Placer placer(Options(PlacementPolicy::kPrefixAware));
  std::vector<NodeCandidate> decode = {Candidate(0)};
  std::vector<NodeCandidate> prefill = {PrefillCandidate(0, 100, 0, 16),
                                        PrefillCandidate(1, 100, 900, 48),
                                        PrefillCandidate(2, 100, 0, 32)};
  auto p = placer.Choose(prefill, decode, 100);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->prefill, 1);
  EXPECT_EQ(p->cached_prefix_tokens, 48);

  prefill = {PrefillCandidate(0, 100, 700, 32), PrefillCandidate(1, 100, 200, 32),
             PrefillCandidate(2, 100, 0, 0)};
  p = placer.Choose(prefill, decode, 100);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->prefill, 1);
}

TEST(PlacementTest, ShortUncachedPromptsPrefillLocally) {
  Placer placer(Options(PlacementPolicy::kPrefixAware, ServingMode::kDisaggregated, 64));
  std::vector<NodeCandidate> decode = {Candidate(0), Candidate(1, 500)};
  // 100-token prompt, nothing cached: 100 >= 64, disaggregated.
  auto p = placer.Choose(std::vector<NodeCandidate>{PrefillCandidate(0)}, decode, 100);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, PlacementKind::kDisaggregated);
  EXPECT_EQ(p->reason, PlacementReason::kDisaggregated);
  EXPECT_EQ(PlacementReasonName(p->reason), "disaggregated");
  // 48 of them cached on the best prefill node: 52 < 64, local prefill on D.
  p = placer.Choose(std::vector<NodeCandidate>{PrefillCandidate(0, 100, 0, 48)}, decode, 100);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, PlacementKind::kLocalPrefill);
  EXPECT_EQ(p->reason, PlacementReason::kShortPrompt);
  EXPECT_EQ(PlacementReasonName(p->reason), "short_prompt");
  EXPECT_EQ(p->prefill, -1);
  EXPECT_EQ(p->decode, 1);
  // A short prompt.
  p = placer.Choose(std::vector<NodeCandidate>{PrefillCandidate(0)}, decode, 63);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, PlacementKind::kLocalPrefill);
  p = placer.Choose(std::vector<NodeCandidate>{PrefillCandidate(0)}, decode, 64);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, PlacementKind::kDisaggregated);
}

TEST(PlacementTest, ZeroThresholdNeverPrefillsLocally) {
  Placer placer(Options(PlacementPolicy::kLeastLoaded));
  auto p = placer.Choose(std::vector<NodeCandidate>{PrefillCandidate(0)},
                         std::vector<NodeCandidate>{Candidate(0)}, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, PlacementKind::kDisaggregated);
}

TEST(PlacementTest, NoPrefillNodeUpPrefillsLocally) {
  Placer placer(Options(PlacementPolicy::kLeastLoaded));
  auto p = placer.Choose({}, std::vector<NodeCandidate>{Candidate(0)}, 1000);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, PlacementKind::kLocalPrefill);
  EXPECT_EQ(p->reason, PlacementReason::kNoPrefillNode);
  EXPECT_EQ(PlacementReasonName(p->reason), "no_prefill_node");
}

TEST(PlacementTest, ColocatedUsesOnlyDecodeNodes) {
  Placer placer(Options(PlacementPolicy::kLeastLoaded, ServingMode::kColocated));
  auto p = placer.Choose(std::vector<NodeCandidate>{PrefillCandidate(0)},
                         std::vector<NodeCandidate>{Candidate(0, 10), Candidate(1, 20)}, 1000);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, PlacementKind::kColocated);
  EXPECT_EQ(p->prefill, -1);
  EXPECT_EQ(p->decode, 1);
}

TEST(PlacementTest, InAutoModeANodeIsNeverItsOwnPrefillNode) {
  // Every node in both pools; each policy's prefill pick skips the decode node it chose.
  const std::vector<NodeCandidate> nodes = {Candidate(0, 100, 0, 0), Candidate(1, 90, 0, 0),
                                            Candidate(2, 80, 0, 0)};
  for (PlacementPolicy policy : {PlacementPolicy::kRoundRobin, PlacementPolicy::kLeastLoaded,
                                 PlacementPolicy::kPrefixAware}) {
    Placer placer(Options(policy, ServingMode::kAuto));
    for (int i = 0; i < 6; ++i) {
      auto p = placer.Choose(nodes, nodes, 1000);
      ASSERT_TRUE(p.ok());
      EXPECT_EQ(p->kind, PlacementKind::kDisaggregated);
      EXPECT_NE(p->prefill, p->decode) << PlacementPolicyName(policy) << " " << i;
    }
  }
  // One node alone prefills locally.
  Placer placer(Options(PlacementPolicy::kLeastLoaded, ServingMode::kAuto));
  auto p = placer.Choose(std::vector<NodeCandidate>{nodes[0]}, std::vector<NodeCandidate>{nodes[0]},
                         1000);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, PlacementKind::kLocalPrefill);
  EXPECT_EQ(ServingModeName(ServingMode::kAuto), "auto");
  EXPECT_EQ(ParseServingMode("auto"), ServingMode::kAuto);
}

TEST(PlacementTest, NoDecodeNodeIsUnavailable) {
  Placer placer(Options(PlacementPolicy::kRoundRobin));
  auto p = placer.Choose(std::vector<NodeCandidate>{Candidate(0)}, {}, 10);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tandem
