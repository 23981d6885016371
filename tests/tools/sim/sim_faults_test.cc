// Faults in tandem-sim: the kill list's parsing; the facts of a killed attempt judged by the
// router's own JudgeAttempt; whole runs with nodes killed, where every request ends (retried,
// migrated with its tokens, or failed with the router's error) and none is lost.
#include "tools/sim/sim_faults.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tools/sim/sim_cluster.h"

namespace tandem::sim {
namespace {

TEST(SimFaultsTest, ParsesAKillListAndRefusesBadParts) {
  absl::StatusOr<std::vector<NodeKill>> kills = ParseNodeKills("1.5:decode-0,30:prefill-2");
  ASSERT_TRUE(kills.ok()) << kills.status();
  ASSERT_EQ(kills->size(), 2u);
  EXPECT_EQ((*kills)[0].at_s, 1.5);
  EXPECT_EQ((*kills)[0].node, "decode-0");
  EXPECT_EQ((*kills)[1].node, "prefill-2");
  EXPECT_TRUE(ParseNodeKills("")->empty());
  for (const char* bad : {"decode-0", "x:decode-0", "-1:decode-0", "3:", "1:a,,2:b"}) {
    EXPECT_FALSE(ParseNodeKills(bad).ok()) << bad;
  }
}

TEST(SimFaultsTest, TheRouterRetriesWhatDiedBeforeItsFirstTokenAndMigratesWhatHadTokens) {
  KilledAttempt a{.kind = PlacementKind::kColocated, .decode_died = true};
  AttemptVerdict v = JudgeAttempt(FactsOfKilledAttempt(a));
  EXPECT_TRUE(v.retry);
  EXPECT_FALSE(v.migrate);
  EXPECT_TRUE(v.blame_decode);
  EXPECT_TRUE(v.decode_unreachable);

  a.sent_tokens = true;
  v = JudgeAttempt(FactsOfKilledAttempt(a));
  EXPECT_TRUE(v.migrate);
  EXPECT_EQ(v.migration_reason, MigrationReason::kNodeUnreachable);

  // Disaggregated: the decode node died before its handoff.
  KilledAttempt d{.kind = PlacementKind::kDisaggregated, .decode_died = true};
  v = JudgeAttempt(FactsOfKilledAttempt(d));
  EXPECT_TRUE(v.retry);
  EXPECT_EQ(v.reason, RetryReason::kReserveFailed);
  // ... after it: the running prefill is cancelled.
  d.reserved = true;
  v = JudgeAttempt(FactsOfKilledAttempt(d));
  EXPECT_TRUE(v.retry);
  EXPECT_TRUE(v.cancel_prefill);
  // The prefill node died: the decode node's reservation is cancelled, the prefill node blamed.
  d.decode_died = false;
  v = JudgeAttempt(FactsOfKilledAttempt(d));
  EXPECT_TRUE(v.retry);
  EXPECT_EQ(v.reason, RetryReason::kPrefillFailed);
  EXPECT_TRUE(v.cancel_decode);
  EXPECT_TRUE(v.blame_prefill);
  EXPECT_TRUE(v.prefill_unreachable);
}

struct Workload {
  std::vector<bench::BenchRequest> requests;
  std::vector<double> arrivals;
};

Workload Steady(int n, double rate, int32_t prompt_len, int32_t output_len) {
  Workload w;
  for (int i = 0; i < n; ++i) {
    bench::BenchRequest r;
    r.prompt_len = prompt_len;
    for (int32_t j = 0; j < prompt_len; ++j) r.prompt_ids.push_back(1000 + (i * 7919 + j) % 9000);
    r.output_len = output_len;
    w.requests.push_back(std::move(r));
    w.arrivals.push_back(i / rate);
  }
  return w;
}

void ExpectEveryRequestComplete(const SimRun& run, int32_t output_len) {
  for (size_t i = 0; i < run.results.size(); ++i) {
    const bench::RequestResult& r = run.results[i];
    ASSERT_TRUE(r.success) << "request " << i << ": " << r.error;
    EXPECT_EQ(r.output_tokens, output_len) << "request " << i;
  }
}

TEST(SimFaultsTest, AColocatedNodeKilledMidRunLosesNoRequest) {
  SimClusterOptions options;
  options.num_decode = 2;
  options.policy = PlacementPolicy::kRoundRobin;
  options.faults.kills = {{.at_s = 1.0, .node = "decode-0"}};
  options.faults.node_restart_s = 0;  // it stays dead
  const Workload w = Steady(100, 50, 512, 200);
  absl::StatusOr<SimRun> run = RunSimulation(options, w.requests, w.arrivals);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->stats.kills, 1);
  // Requests streaming on decode-0 moved on to decode-1 with their tokens; those that had none
  // yet were retried there.
  EXPECT_GT(run->stats.migrations, 0);
  ExpectEveryRequestComplete(*run, 200);
  // A migrated request's stream paused while decode-1 recomputed its prompt and tokens.
  double longest_gap = 0;
  for (const bench::RequestResult& r : run->results) {
    for (double itl : r.itl_s) longest_gap = std::max(longest_gap, itl);
  }
  EXPECT_GT(longest_gap, 0.05);
}

TEST(SimFaultsTest, DisaggregatedNodesKilledMidRunLoseNoRequest) {
  SimClusterOptions options;
  options.mode = ServingMode::kDisaggregated;
  options.num_prefill = 2;
  options.num_decode = 2;
  options.policy = PlacementPolicy::kRoundRobin;
  options.faults.kills = {{.at_s = 0.5, .node = "prefill-0"}, {.at_s = 1.2, .node = "decode-1"}};
  options.faults.node_restart_s = 0.5;
  const Workload w = Steady(120, 60, 2048, 100);
  absl::StatusOr<SimRun> run = RunSimulation(options, w.requests, w.arrivals);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->stats.kills, 2);
  EXPECT_GT(run->stats.retries, 0);
  ExpectEveryRequestComplete(*run, 100);
}

TEST(SimFaultsTest, WithTheOnlyNodeDeadRequestsFailWithTheRoutersError) {
  SimClusterOptions options;
  options.faults.kills = {{.at_s = 0.5, .node = "decode-0"}};
  options.faults.node_restart_s = 0;
  const Workload w = Steady(40, 40, 256, 10);
  absl::StatusOr<SimRun> run = RunSimulation(options, w.requests, w.arrivals);
  ASSERT_TRUE(run.ok()) << run.status();
  int failed = 0;
  for (const bench::RequestResult& r : run->results) {
    if (r.success) continue;
    ++failed;
    EXPECT_NE(r.error, "never finished");
    EXPECT_FALSE(r.error.empty());
  }
  EXPECT_GT(failed, 0);
  EXPECT_LT(failed, 40);  // those done before the kill succeeded
}

TEST(SimFaultsTest, RandomKillsAreDeterministicAndEveryRequestEnds) {
  SimClusterOptions options;
  options.mode = ServingMode::kDisaggregated;
  options.num_prefill = 2;
  options.num_decode = 3;
  options.faults.kill_random_node_every_s = 0.4;
  options.faults.node_restart_s = 0.3;
  options.faults.seed = 7;
  const Workload w = Steady(200, 80, 1024, 120);
  absl::StatusOr<SimRun> a = RunSimulation(options, w.requests, w.arrivals);
  absl::StatusOr<SimRun> b = RunSimulation(options, w.requests, w.arrivals);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(a->stats.kills, 3);
  EXPECT_EQ(a->stats.kills, b->stats.kills);
  EXPECT_EQ(a->stats.retries, b->stats.retries);
  EXPECT_EQ(a->stats.migrations, b->stats.migrations);
  int succeeded = 0;
  for (size_t i = 0; i < a->results.size(); ++i) {
    EXPECT_NE(a->results[i].error, "never finished") << "request " << i;
    EXPECT_EQ(a->results[i].success, b->results[i].success);
    EXPECT_EQ(a->results[i].e2e_s, b->results[i].e2e_s);
    succeeded += a->results[i].success;
  }
  EXPECT_GT(succeeded, 150);
}

TEST(SimFaultsTest, AnUnknownNodeIsRefused) {
  SimClusterOptions options;
  options.faults.kills = {{.at_s = 1, .node = "decode-7"}};
  const Workload w = Steady(1, 1, 16, 1);
  absl::StatusOr<SimRun> run = RunSimulation(options, w.requests, w.arrivals);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("decode-7"), std::string::npos);
}

}  // namespace
}  // namespace tandem::sim
