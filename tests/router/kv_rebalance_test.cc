// PlanKvRebalance (router/kv_rebalance.h): which stream leaves a full decode node, and where to.
#include "router/kv_rebalance.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

RebalanceNode RebalanceCandidate(const std::string& address, int64_t free, int64_t running = 4) {
  return {.address = address,
          .num_kv_blocks = 1000,
          .num_free_kv_blocks = free,
          .block_size = 16,
          .num_running = running};
}

TEST(KvRebalanceTest, TheLargestStreamLeavesAFullNodeForTheRoomiest) {
  const std::vector<RebalanceNode> nodes = {
      RebalanceCandidate("a", 10), RebalanceCandidate("b", 600), RebalanceCandidate("c", 900)};
  const std::vector<RebalanceStream> streams = {
      {.key = 1, .node = "a", .kv_tokens = 500},
      {.key = 2, .node = "a", .kv_tokens = 4000},
      {.key = 3, .node = "a", .kv_tokens = 9000, .movable = false},  // already moving
      {.key = 4, .node = "b", .kv_tokens = 20000},
  };
  const std::vector<RebalanceMove> moves = PlanKvRebalance(nodes, streams, {});
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].key, 2u);
  EXPECT_EQ(moves[0].from, "a");
  EXPECT_EQ(moves[0].to, "c");
}

TEST(KvRebalanceTest, NothingMovesWithoutAFullNode) {
  const std::vector<RebalanceNode> nodes = {RebalanceCandidate("a", 60),
                                            RebalanceCandidate("b", 900)};  // 6% free
  const std::vector<RebalanceStream> streams = {{.key = 1, .node = "a", .kv_tokens = 500}};
  EXPECT_TRUE(PlanKvRebalance(nodes, streams, {}).empty());
}

TEST(KvRebalanceTest, ANodeWithOneStreamIsNotFull) {
  // Moving its only stream would just move the shortage.
  const std::vector<RebalanceNode> nodes = {RebalanceCandidate("a", 0, /*running=*/1),
                                            RebalanceCandidate("b", 900)};
  const std::vector<RebalanceStream> streams = {{.key = 1, .node = "a", .kv_tokens = 500}};
  EXPECT_TRUE(PlanKvRebalance(nodes, streams, {}).empty());
}

TEST(KvRebalanceTest, NothingMovesWhereItWouldNotLeaveRoom) {
  // b has 300 free blocks (30%), but the stream needs 200: 10% would be left, under 12.5%.
  const std::vector<RebalanceNode> nodes = {RebalanceCandidate("a", 5),
                                            RebalanceCandidate("b", 300)};
  const std::vector<RebalanceStream> streams = {{.key = 1, .node = "a", .kv_tokens = 3200}};
  EXPECT_TRUE(PlanKvRebalance(nodes, streams, {}).empty());
  // A smaller one fits.
  const std::vector<RebalanceStream> small = {{.key = 2, .node = "a", .kv_tokens = 800}};
  EXPECT_EQ(PlanKvRebalance(nodes, small, {}).size(), 1u);
}

TEST(KvRebalanceTest, AStreamMovesOnlyUpToItsLimitAndTwoFullNodesShareADestination) {
  const std::vector<RebalanceNode> nodes = {RebalanceCandidate("a", 5), RebalanceCandidate("b", 5),
                                            RebalanceCandidate("c", 500)};
  std::vector<RebalanceStream> streams = {
      {.key = 1, .node = "a", .kv_tokens = 1600, .moves = 1},  // moved once already
      {.key = 2, .node = "b", .kv_tokens = 1600},
      {.key = 3, .node = "b", .kv_tokens = 1000},
  };
  std::vector<RebalanceMove> moves = PlanKvRebalance(nodes, streams, {});
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].key, 2u);
  // With a's stream movable too, c takes both while it stays roomy (500 - 101 - 101 > 125).
  streams[0].moves = 0;
  moves = PlanKvRebalance(nodes, streams, {});
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ(moves[0].to, "c");
  EXPECT_EQ(moves[1].to, "c");
}

}  // namespace
}  // namespace tandem
