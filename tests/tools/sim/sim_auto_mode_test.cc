// tandem-sim --mode auto: every node decodes and prefills for the others (tandem-decode
// --serve-prefill behind a router in --mode auto), placed by the same Placer. One node is a
// colocated cluster; several hand prompts to each other over the KV links, never to themselves;
// a prompt under the local-prefill threshold stays on its decode node; nodes killed mid-run lose
// no request; runs are deterministic.
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "tools/sim/sim_cluster.h"

namespace tandem::sim {
namespace {

struct AutoWorkload {
  std::vector<bench::BenchRequest> requests;
  std::vector<double> arrivals;
};

// `n` requests at `rate` per second, prompts of `prompt_len` (every third one half as long),
// `output_len` tokens out.
AutoWorkload SteadyMixed(int n, double rate, int32_t prompt_len, int32_t output_len) {
  AutoWorkload w;
  for (int i = 0; i < n; ++i) {
    bench::BenchRequest r;
    r.prompt_len = i % 3 == 2 ? prompt_len / 2 : prompt_len;
    for (int32_t j = 0; j < r.prompt_len; ++j) {
      r.prompt_ids.push_back(1000 + (i * 7919 + j) % 9000);
    }
    r.output_len = output_len;
    w.requests.push_back(std::move(r));
    w.arrivals.push_back(i / rate);
  }
  return w;
}

SimClusterOptions Auto(int nodes, PlacementPolicy policy) {
  SimClusterOptions o;
  o.mode = ServingMode::kAuto;
  o.num_decode = nodes;
  o.policy = policy;
  return o;
}

void ExpectEveryAutoRequestComplete(const SimRun& run, int32_t output_len) {
  for (size_t i = 0; i < run.results.size(); ++i) {
    const bench::RequestResult& r = run.results[i];
    ASSERT_TRUE(r.success) << "request " << i << ": " << r.error;
    EXPECT_EQ(r.output_tokens, output_len) << "request " << i;
  }
}

int64_t Count(const SimRunStats& stats, const std::string& reason) {
  auto it = stats.placements.find(reason);
  return it == stats.placements.end() ? 0 : it->second;
}

TEST(SimAutoModeTest, OneNodeIsAColocatedCluster) {
  const AutoWorkload w = SteadyMixed(60, 20, 1024, 64);
  SimClusterOptions colocated;
  colocated.policy = PlacementPolicy::kLeastLoaded;
  absl::StatusOr<SimRun> a = RunSimulation(colocated, w.requests, w.arrivals);
  absl::StatusOr<SimRun> b =
      RunSimulation(Auto(1, PlacementPolicy::kLeastLoaded), w.requests, w.arrivals);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  // The lone node prefills every prompt itself (no other node to prefill it), exactly as it
  // does colocated.
  EXPECT_EQ(Count(b->stats, "no_prefill_node"), 60);
  EXPECT_EQ(b->stats.kv_bytes, 0);
  ASSERT_EQ(a->results.size(), b->results.size());
  for (size_t i = 0; i < a->results.size(); ++i) {
    EXPECT_EQ(a->results[i].ttft_s, b->results[i].ttft_s) << "request " << i;
    EXPECT_EQ(a->results[i].e2e_s, b->results[i].e2e_s) << "request " << i;
  }
}

TEST(SimAutoModeTest, NodesPrefillForEachOtherAndShortPromptsStayLocal) {
  for (PlacementPolicy policy : {PlacementPolicy::kRoundRobin, PlacementPolicy::kLeastLoaded,
                                 PlacementPolicy::kPrefixAware}) {
    SCOPED_TRACE(PlacementPolicyName(policy));
    SimClusterOptions options = Auto(3, policy);
    options.local_prefill_threshold = 700;  // the half-length prompts (512 tokens)
    const AutoWorkload w = SteadyMixed(90, 30, 1024, 64);
    absl::StatusOr<SimRun> run = RunSimulation(options, w.requests, w.arrivals);
    ASSERT_TRUE(run.ok()) << run.status();
    ExpectEveryAutoRequestComplete(*run, 64);
    EXPECT_EQ(Count(run->stats, "disaggregated"), 60);
    EXPECT_EQ(Count(run->stats, "short_prompt"), 30);
    // Each node decoded some requests and prefilled some for the others; every prefill sent KV.
    ASSERT_EQ(run->stats.placed_on_prefill.size(), 3u);
    ASSERT_EQ(run->stats.placed_on_decode.size(), 3u);
    for (int n = 0; n < 3; ++n) {
      EXPECT_GT(run->stats.placed_on_prefill[n], 0) << "node " << n;
      EXPECT_GT(run->stats.placed_on_decode[n], 0) << "node " << n;
    }
    EXPECT_EQ(std::accumulate(run->stats.placed_on_prefill.begin(),
                              run->stats.placed_on_prefill.end(), int64_t{0}),
              60);
    EXPECT_GT(run->stats.kv_bytes, 0);
  }
}

TEST(SimAutoModeTest, TheCostPolicyPlacesEveryRequestAndRunsAreDeterministic) {
  SimClusterOptions options = Auto(4, PlacementPolicy::kCost);
  options.placement_slo_tpot_ms = 40;
  const AutoWorkload w = SteadyMixed(200, 40, 2048, 128);
  absl::StatusOr<SimRun> a = RunSimulation(options, w.requests, w.arrivals);
  absl::StatusOr<SimRun> b = RunSimulation(options, w.requests, w.arrivals);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  ExpectEveryAutoRequestComplete(*a, 128);
  int64_t placed = 0;
  for (const auto& [reason, count] : a->stats.placements) placed += count;
  EXPECT_EQ(placed, 200);
  EXPECT_EQ(Count(a->stats, "no_prefill_node"), 0);  // there is always another node
  EXPECT_EQ(a->stats.placements, b->stats.placements);
  for (size_t i = 0; i < a->results.size(); ++i) {
    EXPECT_EQ(a->results[i].ttft_s, b->results[i].ttft_s) << "request " << i;
    EXPECT_EQ(a->results[i].e2e_s, b->results[i].e2e_s) << "request " << i;
  }
}

TEST(SimAutoModeTest, NodesKilledMidRunLoseNoRequest) {
  SimClusterOptions options = Auto(3, PlacementPolicy::kRoundRobin);
  // One node dies while it prefills for others and decodes its own; it comes back empty.
  options.faults.kills = {{.at_s = 0.8, .node = "decode-1"}, {.at_s = 2.0, .node = "decode-2"}};
  options.faults.node_restart_s = 0.5;
  const AutoWorkload w = SteadyMixed(150, 60, 2048, 100);
  absl::StatusOr<SimRun> run = RunSimulation(options, w.requests, w.arrivals);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->stats.kills, 2);
  EXPECT_GT(run->stats.retries + run->stats.migrations, 0);
  ExpectEveryAutoRequestComplete(*run, 100);
}

TEST(SimAutoModeTest, ABurstLargerThanThePoolsGoesWhereThereIsRoom) {
  // Two nodes of 100 blocks, 20 prompts of 600 tokens (38 blocks; 41 with their output) at once.
  // A node prefills for the other only while its free blocks, less what the router placed there
  // since, hold the prompt (router/auto_mode.h); the rest prefill on their decode node. All are
  // carried, as colocated nodes carry them.
  SimClusterOptions options = Auto(2, PlacementPolicy::kLeastLoaded);
  options.num_kv_blocks = 100;
  const AutoWorkload w = SteadyMixed(20, 1e9, 600, 50);
  absl::StatusOr<SimRun> run = RunSimulation(options, w.requests, w.arrivals);
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectEveryAutoRequestComplete(*run, 50);
  EXPECT_GT(Count(run->stats, "disaggregated"), 0);
  EXPECT_GT(Count(run->stats, "no_prefill_node"), 0);
  EXPECT_EQ(run->stats.retries, 0);
}

TEST(SimAutoModeTest, NodesWhoseBlocksAreAllReservedForEachOthersPromptsFailRatherThanWait) {
  // The same burst through four router replicas, each placing on its own view: together they
  // reserve more than the nodes can prefill for each other. A node that can run nothing fails
  // its queue head (Engine::Step); for a prefill the router cancels the reservation and retries
  // the request without that node. Requests fail (a known limit of auto mode: README), but every
  // one ends; none waits forever.
  SimClusterOptions options = Auto(2, PlacementPolicy::kLeastLoaded);
  options.num_kv_blocks = 100;
  options.num_routers = 4;
  const AutoWorkload w = SteadyMixed(20, 1e9, 600, 50);
  absl::StatusOr<SimRun> run = RunSimulation(options, w.requests, w.arrivals);
  ASSERT_TRUE(run.ok()) << run.status();
  int succeeded = 0;
  for (const bench::RequestResult& r : run->results) {
    EXPECT_NE(r.error, "never finished");
    succeeded += r.success;
  }
  EXPECT_GT(succeeded, 0);
  EXPECT_GT(run->stats.retries, 0);
}

TEST(SimAutoModeTest, PrefillNodesAreRefused) {
  SimClusterOptions options = Auto(2, PlacementPolicy::kRoundRobin);
  options.num_prefill = 1;
  const AutoWorkload w = SteadyMixed(1, 1, 16, 1);
  absl::StatusOr<SimRun> run = RunSimulation(options, w.requests, w.arrivals);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("--mode auto runs no prefill nodes"), std::string::npos);
}

}  // namespace
}  // namespace tandem::sim
