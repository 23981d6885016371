// The router replicas of tandem-sim: in-flight accounting by receipts (a report forgets only the
// placements the node had received when it published), and bursts spread evenly over both pools
// with 1, 2 and 4 replicas under the cost policy.
#include "tools/sim/sim_router.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "tools/sim/sim_cluster.h"

namespace tandem::sim {
namespace {

SimNodeLoad LoadPublishedAt(int64_t at) {
  SimNodeLoad load;
  load.num_kv_blocks = 1000;
  load.num_free_kv_blocks = 1000;
  load.block_size = 16;
  load.published_at = at;
  return load;
}

TEST(SimRouterTest, AReportForgetsOnlyWhatTheNodeHadReceived) {
  SimRouter router(PlacementOptions{}, /*receipts=*/true, /*expiry_nanos=*/1'000'000'000, 1, 1);
  const uint64_t a = router.NotePlaced(false, 0, {.placed_at = 0, .queued_tokens = 100});
  const uint64_t b = router.NotePlaced(false, 0, {.placed_at = 0, .queued_tokens = 50});
  EXPECT_EQ(router.Candidate(false, 0, "d").queued_tokens, 150);
  EXPECT_EQ(router.Candidate(false, 0, "d").num_sequences, 2);
  router.NoteDelivered(false, 0, a, 10);
  // Published before either arrived: both still count.
  router.Report(false, 0, LoadPublishedAt(5), 20);
  EXPECT_EQ(router.Candidate(false, 0, "d").queued_tokens, 150);
  // Published after the first arrived: the receipt retires one (the first, by count).
  router.Report(false, 0, LoadPublishedAt(15), 20);
  EXPECT_EQ(router.Candidate(false, 0, "d").queued_tokens, 50);
  router.NoteDelivered(false, 0, b, 30);
  router.Report(false, 0, LoadPublishedAt(40), 50);
  EXPECT_EQ(router.Candidate(false, 0, "d").queued_tokens, 0);
  EXPECT_EQ(router.Candidate(false, 0, "d").num_sequences, 0);
}

TEST(SimRouterTest, WithoutReceiptsAReportForgetsEverything) {
  SimRouter router(PlacementOptions{}, /*receipts=*/false, 1'000'000'000, 1, 1);
  router.NotePlaced(true, 0, {.placed_at = 0, .queued_tokens = 100});
  router.Report(true, 0, LoadPublishedAt(0), 0);
  EXPECT_EQ(router.Candidate(true, 0, "p").queued_tokens, 0);
}

TEST(SimRouterTest, UndeliveredPlacementsExpireAndADeadNodeStartsEmpty) {
  SimRouter router(PlacementOptions{}, /*receipts=*/true, /*expiry_nanos=*/100, 1, 2);
  router.NotePlaced(false, 0, {.placed_at = 0, .blocks = 7});
  router.NotePlaced(false, 1, {.placed_at = 0, .blocks = 7});
  router.Report(false, 0, LoadPublishedAt(50), 50);
  EXPECT_EQ(router.Candidate(false, 0, "d0").free_kv_blocks, 1000 - 7);
  router.Report(false, 0, LoadPublishedAt(150), 150);  // never delivered: its attempt died
  EXPECT_EQ(router.Candidate(false, 0, "d0").free_kv_blocks, 1000);
  router.MarkDown(false, 1);
  EXPECT_TRUE(router.down(false, 1));
  router.Report(false, 1, LoadPublishedAt(60), 60);
  EXPECT_FALSE(router.down(false, 1));
  EXPECT_EQ(router.Candidate(false, 1, "d1").free_kv_blocks, 1000);
}

// 64 uncached long prompts at once on 2 prefill + 2 decode nodes: every replica places its share
// on load reports that cannot have seen any of it yet, and both pools still end within one
// request of even.
TEST(SimRouterTest, ABurstSpreadsEvenlyWithOneTwoAndFourReplicas) {
  for (int routers : {1, 2, 4}) {
    SimClusterOptions o;
    o.mode = ServingMode::kDisaggregated;
    o.num_prefill = 2;
    o.num_decode = 2;
    o.policy = PlacementPolicy::kCost;
    o.num_routers = routers;
    std::vector<bench::BenchRequest> requests;
    for (int i = 0; i < 64; ++i) {
      bench::BenchRequest r;
      for (int t = 0; t < 4096; ++t) r.prompt_ids.push_back(1000 + (i * 7919 + t * 31) % 30000);
      r.prompt_len = 4096;
      r.output_len = 16;
      requests.push_back(std::move(r));
    }
    auto run = RunSimulation(o, requests, std::vector<double>(requests.size(), 0.0));
    ASSERT_TRUE(run.ok()) << run.status();
    for (const auto* placed : {&run->stats.placed_on_prefill, &run->stats.placed_on_decode}) {
      ASSERT_EQ(placed->size(), 2u);
      const auto [lo, hi] = std::minmax_element(placed->begin(), placed->end());
      EXPECT_LE(*hi - *lo, 1) << (placed == &run->stats.placed_on_prefill ? "prefill " : "decode ")
                              << routers << " replica(s): " << (*placed)[0] << " vs "
                              << (*placed)[1];
    }
    EXPECT_EQ(run->stats.placements.at("disaggregated"), 64) << routers << " replica(s)";
  }
}

TEST(SimRouterTest, ReplicasAreDeterministic) {
  SimClusterOptions o;
  o.mode = ServingMode::kDisaggregated;
  o.num_prefill = 2;
  o.num_decode = 3;
  o.policy = PlacementPolicy::kCost;
  o.num_routers = 4;
  o.placement_seed = 9;
  std::vector<bench::BenchRequest> requests;
  std::vector<double> arrivals;
  for (int i = 0; i < 200; ++i) {
    bench::BenchRequest r;
    for (int t = 0; t < 500 + 37 * (i % 13); ++t) r.prompt_ids.push_back(1000 + (i + t) % 9000);
    r.prompt_len = static_cast<int32_t>(r.prompt_ids.size());
    r.output_len = 20 + i % 50;
    requests.push_back(std::move(r));
    arrivals.push_back(0.01 * i);
  }
  auto a = RunSimulation(o, requests, arrivals);
  auto b = RunSimulation(o, requests, arrivals);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->results.size(), b->results.size());
  for (size_t i = 0; i < a->results.size(); ++i) {
    EXPECT_EQ(a->results[i].ttft_s, b->results[i].ttft_s) << i;
    EXPECT_EQ(a->results[i].e2e_s, b->results[i].e2e_s) << i;
  }
  EXPECT_EQ(a->stats.placed_on_decode, b->stats.placed_on_decode);
}

// Two colocated nodes under least_loaded placement and a stream of uneven requests: polls listed at
// the period's own times give the periodic run exactly; listed polls are the only ones until the
// list ends, then the period takes over.
TEST(SimRouterTest, ListedPollTimesReplaceThePeriodicPolls) {
  SimClusterOptions o;
  o.num_decode = 2;
  o.policy = PlacementPolicy::kLeastLoaded;
  o.load_poll_ms = 50;
  std::vector<bench::BenchRequest> requests;
  std::vector<double> arrivals;
  for (int i = 0; i < 120; ++i) {
    bench::BenchRequest r;
    for (int t = 0; t < 200 + 97 * (i % 11); ++t)
      r.prompt_ids.push_back(1000 + (i * 31 + t) % 9000);
    r.prompt_len = static_cast<int32_t>(r.prompt_ids.size());
    r.output_len = 10 + (i * 7) % 60;
    requests.push_back(std::move(r));
    arrivals.push_back(0.013 * i + 0.004 * (i % 3));
  }
  auto periodic = RunSimulation(o, requests, arrivals);
  ASSERT_TRUE(periodic.ok()) << periodic.status();
  SimClusterOptions listed = o;
  for (int64_t k = 1; k <= 10; ++k) listed.load_poll_times_ns.push_back(k * 50'000'000);
  auto same = RunSimulation(listed, requests, arrivals);
  ASSERT_TRUE(same.ok()) << same.status();
  ASSERT_EQ(periodic->results.size(), same->results.size());
  for (size_t i = 0; i < same->results.size(); ++i) {
    EXPECT_EQ(periodic->results[i].ttft_s, same->results[i].ttft_s) << i;
    EXPECT_EQ(periodic->results[i].e2e_s, same->results[i].e2e_s) << i;
  }
  EXPECT_EQ(periodic->stats.load_polls, same->stats.load_polls);
  // The polls matter here: half a period later, some request goes elsewhere.
  for (int64_t& t : listed.load_poll_times_ns) t += 25'000'000;
  auto shifted = RunSimulation(listed, requests, arrivals);
  ASSERT_TRUE(shifted.ok()) << shifted.status();
  ASSERT_EQ(periodic->results.size(), shifted->results.size());
  int moved = 0;
  for (size_t i = 0; i < shifted->results.size(); ++i) {
    moved += periodic->results[i].decode_node != shifted->results[i].decode_node;
  }
  EXPECT_GT(moved, 0);

  // Three listed polls early, with a period longer than the run: the first at 0 and those three.
  listed.load_poll_ms = 3'600'000;
  listed.load_poll_times_ns = {7'000'000, 19'000'000, 61'000'000};
  auto three = RunSimulation(listed, requests, arrivals);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->stats.load_polls, 1 + 3 + 1);  // the period's next one ends the run's polls
  listed.load_poll_times_ns = {};
  auto none = RunSimulation(listed, requests, arrivals);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->stats.load_polls, 1 + 1);
}

TEST(SimRouterTest, ListedPollTimesMustBeInOrderAndForOneRouter) {
  SimClusterOptions o;
  o.load_poll_times_ns = {5'000'000, 4'000'000};
  EXPECT_EQ(ValidateSimClusterOptions(o, 1, 1).code(), absl::StatusCode::kInvalidArgument);
  o.load_poll_times_ns = {-1};
  EXPECT_EQ(ValidateSimClusterOptions(o, 1, 1).code(), absl::StatusCode::kInvalidArgument);
  o.load_poll_times_ns = {4'000'000, 4'000'000, 5'000'000};
  EXPECT_TRUE(ValidateSimClusterOptions(o, 1, 1).ok());
  o.num_routers = 2;
  EXPECT_EQ(ValidateSimClusterOptions(o, 1, 1).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::sim
