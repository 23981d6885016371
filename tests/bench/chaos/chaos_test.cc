// tandem-chaos's parts without a cluster: the fault plan, how each request's ending is judged and
// tallied, the expected tokens, /proc and /metrics parsing.
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/chaos/chaos_report.h"
#include "bench/chaos/expected_tokens.h"
#include "bench/chaos/fault_plan.h"
#include "bench/chaos/metrics_scrape.h"
#include "bench/chaos/process_sampler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::chaos {
namespace {

using ::testing::ElementsAre;

FaultPlanOptions AllKinds(uint64_t seed) {
  FaultPlanOptions o;
  o.seed = seed;
  o.duration_s = 600;
  o.interval_s = 10;
  o.num_nodes = 4;
  o.kinds = {FaultKind::kKill, FaultKind::kStop, FaultKind::kTerm, FaultKind::kNetCut};
  o.min_hold_s = 2;
  o.max_hold_s = 6;
  return o;
}

TEST(FaultPlanTest, OneFaultPerIntervalBeforeTheEndWithinBounds) {
  const std::vector<PlannedFault> plan = PlanFaults(AllKinds(1));
  ASSERT_EQ(plan.size(), 59u);  // 10, 20, ..., 590
  std::set<FaultKind> kinds;
  std::set<int> nodes;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedFault& f = plan[i];
    EXPECT_EQ(f.index, static_cast<int>(i));
    EXPECT_DOUBLE_EQ(f.at_s, 10.0 * (i + 1));
    EXPECT_GE(f.node, 0);
    EXPECT_LT(f.node, 4);
    if (FaultHolds(f.kind)) {
      EXPECT_GE(f.hold_s, 2.0);
      EXPECT_LE(f.hold_s, 6.0);
    } else {
      EXPECT_EQ(f.hold_s, 0.0);
    }
    kinds.insert(f.kind);
    nodes.insert(f.node);
  }
  EXPECT_EQ(kinds.size(), 4u);
  EXPECT_EQ(nodes.size(), 4u);
}

TEST(FaultPlanTest, SameSeedSamePlanOtherSeedOtherPlan) {
  auto key = [](const std::vector<PlannedFault>& plan) {
    std::vector<std::tuple<int, int, double>> k;
    for (const PlannedFault& f : plan) k.emplace_back(static_cast<int>(f.kind), f.node, f.hold_s);
    return k;
  };
  EXPECT_EQ(key(PlanFaults(AllKinds(7))), key(PlanFaults(AllKinds(7))));
  EXPECT_NE(key(PlanFaults(AllKinds(7))), key(PlanFaults(AllKinds(8))));
}

TEST(FaultPlanTest, OnlyTheGivenKindsAndNothingWithoutNodesOrKinds) {
  FaultPlanOptions o = AllKinds(3);
  o.kinds = {FaultKind::kStop};
  for (const PlannedFault& f : PlanFaults(o)) EXPECT_EQ(f.kind, FaultKind::kStop);
  o.kinds.clear();
  EXPECT_TRUE(PlanFaults(o).empty());
  o = AllKinds(3);
  o.num_nodes = 0;
  EXPECT_TRUE(PlanFaults(o).empty());
  o = AllKinds(3);
  o.duration_s = 10;  // the first fault would be at 10 s: not before the end
  EXPECT_TRUE(PlanFaults(o).empty());
}

TEST(FaultPlanTest, ParsesKindLists) {
  EXPECT_THAT(*ParseFaultKinds("kill,netcut,kill"),
              ElementsAre(FaultKind::kKill, FaultKind::kNetCut));
  EXPECT_FALSE(ParseFaultKinds("kill,reboot").has_value());
  EXPECT_FALSE(ParseFaultKinds("").has_value());
  for (FaultKind k : {FaultKind::kKill, FaultKind::kStop, FaultKind::kTerm, FaultKind::kNetCut}) {
    EXPECT_EQ(ParseFaultKind(FaultKindName(k)), k);
  }
}

bench::RequestResult Completed(TokenIds tokens) {
  bench::RequestResult r;
  r.success = true;
  r.e2e_s = 1;
  r.token_ids = std::move(tokens);
  return r;
}

bench::RequestResult Failed(absl::StatusCode code, const std::string& message, TokenIds tokens,
                            double e2e_s = 1) {
  bench::RequestResult r;
  r.success = false;
  r.grpc_code = static_cast<int>(code);
  r.error = "gRPC " + absl::StatusCodeToString(code) + ": " + message;
  r.e2e_s = e2e_s;
  r.token_ids = std::move(tokens);
  return r;
}

TEST(JudgeRequestTest, EachEnding) {
  const TokenIds want = {5, 6, 7, 8};
  RequestVerdict v = JudgeRequest(Completed({5, 6, 7, 8}), want, 30);
  EXPECT_EQ(v.ending, Ending::kCompleted);
  EXPECT_EQ(v.token_errors, 0);
  // A wrong token, a missing one, a repeated one.
  EXPECT_EQ(JudgeRequest(Completed({5, 9, 7, 8}), want, 30).token_errors, 1);
  EXPECT_EQ(JudgeRequest(Completed({5, 6, 7}), want, 30).ending, Ending::kWrongTokens);
  EXPECT_EQ(JudgeRequest(Completed({5, 6, 6, 7, 8}), want, 30).token_errors, 3);
  // Broken after two tokens, with a message: a clear failure; its delivered prefix is right.
  v = JudgeRequest(Failed(absl::StatusCode::kUnavailable, "decode failed (request id r)", {5, 6}),
                   want, 30);
  EXPECT_EQ(v.ending, Ending::kFailed);
  EXPECT_EQ(v.code, "UNAVAILABLE");
  EXPECT_EQ(v.token_errors, 0);
  EXPECT_EQ(v.tokens_delivered, 2);
  // ... but a wrong delivered token is corruption even when the stream failed.
  EXPECT_EQ(
      JudgeRequest(Failed(absl::StatusCode::kUnavailable, "x", {5, 1}), want, 30).token_errors, 1);
  // No message, or OK without output: not a clear error.
  EXPECT_EQ(JudgeRequest(Failed(absl::StatusCode::kInternal, "", {}), want, 30).ending,
            Ending::kFailedUnclear);
  bench::RequestResult empty;
  empty.error = "the stream carried no output";
  EXPECT_EQ(JudgeRequest(empty, want, 30).ending, Ending::kFailedUnclear);
  // The client's own deadline: no end in time.
  EXPECT_EQ(JudgeRequest(Failed(absl::StatusCode::kDeadlineExceeded, "Deadline Exceeded", {}, 30),
                         want, 30)
                .ending,
            Ending::kLost);
  // The router's deadline, before the client's: an end with a clear error.
  EXPECT_EQ(JudgeRequest(Failed(absl::StatusCode::kDeadlineExceeded, "request timed out", {}, 20),
                         want, 30)
                .ending,
            Ending::kFailed);
}

TEST(TallyTest, CountsEveryEndingOnce) {
  const std::vector<TokenIds> expected = {{1, 2}, {3, 4}};
  std::vector<bench::RequestResult> results = {
      Completed({1, 2}),
      Completed({3, 4}),
      Completed({3, 9}),
      Failed(absl::StatusCode::kUnavailable, "broken", {1}),
      Failed(absl::StatusCode::kUnavailable, "broken", {}),
      Failed(absl::StatusCode::kResourceExhausted, "queue full", {}),
      Failed(absl::StatusCode::kDeadlineExceeded, "Deadline Exceeded", {}, 99)};
  const std::vector<int> prompt_of = {0, 1, 1, 0, 1, 0, 1};
  Tally t = TallyRequests(results, prompt_of, expected, 30);
  EXPECT_EQ(t.sent, 7);
  EXPECT_EQ(t.completed, 2);
  EXPECT_EQ(t.wrong_token_requests, 1);
  EXPECT_EQ(t.wrong_tokens, 1);
  EXPECT_EQ(t.failed, 3);
  EXPECT_EQ(t.failed_after_first_token, 1);
  EXPECT_EQ(t.failed_by_code["UNAVAILABLE"], 2);
  EXPECT_EQ(t.failed_by_code["RESOURCE_EXHAUSTED"], 1);
  EXPECT_EQ(t.lost, 1);
  EXPECT_EQ(t.tokens_checked, 7);
  EXPECT_FALSE(t.examples.empty());
}

TEST(ReportTest, GoalsNeedNoLossNoLeakNoWrongTokenAndEveryNodeReachable) {
  ChaosReport report;
  report.tally.sent = report.tally.completed = 3;
  NodeKv node;
  node.name = "decode-0";
  node.reachable = true;
  node.kv_blocks = node.free_blocks = 64;
  report.kv = {node};
  EXPECT_TRUE(report.GoalsMet());
  report.kv[0].leaked = 2;
  EXPECT_FALSE(report.GoalsMet());
  report.kv[0].leaked = 0;
  report.kv[0].reachable = false;
  EXPECT_FALSE(report.GoalsMet());
  report.kv[0].reachable = true;
  report.tally.lost = 1;
  EXPECT_FALSE(report.GoalsMet());
  report.tally.lost = 0;
  report.tally.wrong_tokens = 1;
  EXPECT_FALSE(report.GoalsMet());
  report.tally.wrong_tokens = 0;
  EXPECT_TRUE(report.ToJson()["goals_met"].get<bool>());
  EXPECT_NE(report.Table().find("MET"), std::string::npos);
}

TEST(ExpectedTokensTest, PromptsAreSeededAndSpanTheLengths) {
  const std::vector<TokenIds> a = MakePrompts(5, 10, 50, 1000, 3);
  EXPECT_EQ(a, MakePrompts(5, 10, 50, 1000, 3));
  EXPECT_NE(a, MakePrompts(5, 10, 50, 1000, 4));
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a.front().size(), 10u);
  EXPECT_EQ(a.back().size(), 50u);
  for (const TokenIds& p : a) {
    for (int32_t id : p) {
      EXPECT_GE(id, 100);
      EXPECT_LT(id, 1000);
    }
  }
}

TEST(ExpectedTokensTest, TokenErrorsCountsPositionsAndLength) {
  EXPECT_EQ(TokenErrors({1, 2, 3}, {1, 2, 3}), 0);
  EXPECT_EQ(TokenErrors({1, 2, 3}, {1, 0, 3}), 1);
  EXPECT_EQ(TokenErrors({1, 2, 3}, {1, 2}), 1);
  EXPECT_EQ(TokenErrors({1, 2, 3}, {}), 3);
}

TEST(ProcStatusTest, ParsesRssAndThreads) {
  std::optional<ProcStatus> s =
      ParseProcStatus("Name:\ttandem-decode\nVmRSS:\t   12345 kB\nThreads:\t26\n");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rss_kib, 12345);
  EXPECT_EQ(s->threads, 26);
  EXPECT_FALSE(ParseProcStatus("Name:\tzombie\nThreads:\t1\n").has_value());
  std::optional<ProcStatus> self = ReadProcStatus(::getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_GT(self->rss_kib, 0);
  EXPECT_GE(self->threads, 1);
}

TEST(ProcessSummaryTest, FirstMaxLastAndIncarnations) {
  std::vector<ProcessSample> samples = {
      {0, "decode-0", 10, 100, 20}, {1, "decode-0", 10, 300, 25}, {2, "decode-0", 11, 150, 21}};
  std::vector<ProcessSummary> s = SummarizeProcesses(samples);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].incarnations, 2);
  EXPECT_EQ(s[0].rss_first_kib, 100);
  EXPECT_EQ(s[0].rss_max_kib, 300);
  EXPECT_EQ(s[0].rss_last_kib, 150);
  EXPECT_EQ(s[0].threads_max, 25);
  EXPECT_EQ(s[0].threads_last, 21);
}

TEST(RouterCountersTest, MigrationsPresentOrAbsent) {
  const std::string without =
      "# TYPE tandem_router_retries_total counter\n"
      "tandem_router_retries_total{reason=\"prefill_failed\"} 2\n"
      "tandem_router_retries_total{reason=\"reserve_failed\"} 1\n"
      "tandem_router_requests_total{api=\"grpc\",status=\"ok\"} 40\n"
      "tandem_router_requests_total{api=\"grpc\",status=\"unavailable\"} 3\n"
      "tandem_router_requests_total{api=\"completions\",status=\"ok\"} 9\n";
  absl::StatusOr<RouterCounters> c = ParseRouterCounters(without);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->migrations.has_value());
  EXPECT_EQ(c->retries, 3);
  EXPECT_EQ(c->requests_by_status["ok"], 40);
  EXPECT_EQ(c->requests_by_status["unavailable"], 3);
  c = ParseRouterCounters(without + "tandem_router_migrations_total{reason=\"stream_broken\"} 4\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->migrations, 4);
}

}  // namespace
}  // namespace tandem::chaos
