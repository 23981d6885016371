// RunSweep with a fake client: one run per rate with summaries and goodput, warmup requests sent
// first and left out, a trace run at the trace's own pace, and the failure tally.
#include "bench/serve/bench_sweep.h"

#include <limits>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/bench/serve/fake_bench_client.h"

namespace tandem::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(BenchSweepTest, OneRunPerRateWithGoodput) {
  FakeBenchClient client;
  // TTFT grows with the rate the request was sent at: 1000 req/s misses a 10 ms TTFT limit. The
  // fake cannot see the rate, so it goes by the run (each run sends 6 requests).
  client.result = [&client](const BenchRequest& r) {
    RequestResult out;
    out.success = true;
    const bool last_run = client.calls().size() > 12;
    out.ttft_s = last_run ? 0.050 : 0.002;
    out.e2e_s = out.ttft_s + 0.004;
    out.itl_s = {0.002, 0.002};
    out.prompt_tokens = r.prompt_len;
    out.output_tokens = 3;
    return out;
  };
  std::vector<BenchRequest> dataset = NumberedRequests(6);
  SweepOptions options;
  options.rates = {100, 400, 1000};
  options.slo.ttft_s = 0.010;
  std::vector<double> printed;
  absl::StatusOr<BenchReport> report = RunSweep(
      client, dataset, options, [&printed](const RunRecord& run) { printed.push_back(run.rate); });
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(printed, ElementsAre(100, 400, 1000));
  ASSERT_EQ(report->runs.size(), 3u);
  EXPECT_EQ(client.calls().size(), 18u);
  for (const RunRecord& run : report->runs) {
    EXPECT_EQ(run.summary.completed, 6);
    EXPECT_EQ(run.summary.output_tokens, 18);
    EXPECT_EQ(run.results.size(), 6u);
    EXPECT_EQ(run.summary.offered_rate, run.rate);
  }
  EXPECT_DOUBLE_EQ(report->runs[0].summary.slo_attainment, 1.0);
  EXPECT_DOUBLE_EQ(report->runs[2].summary.slo_attainment, 0.0);
  ASSERT_TRUE(report->goodput.rate.has_value());
  EXPECT_EQ(*report->goodput.rate, 400);
  EXPECT_TRUE(report->goodput.monotonic);
  EXPECT_EQ(report->slo.ttft_s, 0.010);
}

TEST(BenchSweepTest, WarmupGoesFirstWithFreshPromptsAndIsNotCounted) {
  FakeBenchClient client;
  std::vector<BenchRequest> dataset = NumberedRequests(5);
  SweepOptions options;
  options.rates = {std::numeric_limits<double>::infinity()};
  options.warmup = 3;
  options.warmup_ids = {5000, 6000};
  absl::StatusOr<BenchReport> report = RunSweep(client, dataset, options);
  ASSERT_TRUE(report.ok()) << report.status();
  const std::vector<FakeBenchClient::Call> calls = client.calls();
  ASSERT_EQ(calls.size(), 8u);
  std::set<int> warm_lengths;
  for (int i = 0; i < 3; ++i) {
    const BenchRequest& r = calls[i].request;
    warm_lengths.insert(r.output_len);
    ASSERT_EQ(r.prompt_ids.size(), 2u);
    for (int32_t id : r.prompt_ids) {
      EXPECT_GE(id, 5000);
      EXPECT_LT(id, 6000);
    }
  }
  // The first three requests' lengths, not their prompts.
  EXPECT_EQ(warm_lengths, (std::set<int>{1, 2, 3}));
  ASSERT_EQ(report->runs.size(), 1u);
  EXPECT_EQ(report->runs[0].summary.num_requests, 5);
}

TEST(BenchSweepTest, WarmupRequestsCopyLengthsOnly) {
  std::vector<BenchRequest> dataset = NumberedRequests(2);
  dataset[1].prompt_ids.assign(40, 7);
  dataset[1].prompt_len = 40;
  dataset[1].timestamp_s = 3.0;
  std::vector<BenchRequest> warm = WarmupRequests(dataset, 5, {10, 20}, 1);
  ASSERT_EQ(warm.size(), 2u);  // no more than the dataset has
  EXPECT_EQ(warm[1].prompt_len, 40);
  EXPECT_EQ(warm[1].prompt_ids.size(), 40u);
  EXPECT_EQ(warm[1].output_len, 2);
  EXPECT_FALSE(warm[1].timestamp_s.has_value());
  EXPECT_NE(warm[1].prompt_ids, dataset[1].prompt_ids);
  EXPECT_EQ(WarmupRequests(dataset, 2, {10, 20}, 1)[1].prompt_ids, warm[1].prompt_ids);
}

TEST(BenchSweepTest, TraceRunsOnceAtItsOwnPace) {
  FakeBenchClient client;
  std::vector<BenchRequest> dataset = NumberedRequests(4);
  for (int i = 0; i < 4; ++i) dataset[i].timestamp_s = 0.005 * i;
  SweepOptions options;  // no rates: the trace's
  absl::StatusOr<BenchReport> report = RunSweep(client, dataset, options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->runs.size(), 1u);
  EXPECT_DOUBLE_EQ(report->runs[0].rate, 4 / 0.015);
}

TEST(BenchSweepTest, RejectsBadOptions) {
  FakeBenchClient client;
  std::vector<BenchRequest> dataset = NumberedRequests(2);
  SweepOptions options;
  EXPECT_FALSE(RunSweep(client, dataset, options).ok());  // no rate
  options.rates = {10, -1};
  EXPECT_FALSE(RunSweep(client, dataset, options).ok());
  options.rates = {10};
  options.goodput_threshold = 1.5;
  EXPECT_FALSE(RunSweep(client, dataset, options).ok());
  EXPECT_TRUE(client.calls().empty());
}

TEST(BenchSweepTest, FailureCountsMostFrequentFirst) {
  std::vector<RequestResult> results(6);
  results[0].success = true;
  results[1].error = "HTTP 503: busy";
  results[2].error = "connect: refused";
  results[3].error = "HTTP 503: busy";
  results[4].error = "HTTP 503: busy";
  results[5].error = "";
  EXPECT_THAT(FailureCounts(results),
              ElementsAre(Pair("HTTP 503: busy", 3), Pair("(no reason given)", 1),
                          Pair("connect: refused", 1)));
  EXPECT_EQ(FailureCounts(results, 1).size(), 1u);
}

}  // namespace
}  // namespace tandem::bench

namespace tandem::bench {
namespace {

TEST(BenchSweepTest, LaterRunsGetFreshIdsWithTheSameShape) {
  const TokenIdRange ids{1000, 30000};
  std::vector<BenchRequest> dataset(2);
  dataset[0].prompt_ids = {1000, 1001, 29999, 5};  // 5 lies outside the range: left alone
  dataset[1].prompt_ids = {1000, 1001, 7000};      // shares a 2-token prefix with request 0
  for (auto& r : dataset) r.prompt_len = static_cast<int32_t>(r.prompt_ids.size());
  dataset[0].prompt_text = "text stays";

  const auto run0 = PromptsForRun(dataset, 0, ids);
  EXPECT_EQ(run0[0].prompt_ids, dataset[0].prompt_ids);
  const auto run1 = PromptsForRun(dataset, 1, ids);
  const auto run2 = PromptsForRun(dataset, 2, ids);
  for (const auto* run : {&run1, &run2}) {
    ASSERT_EQ(run->size(), 2u);
    EXPECT_EQ((*run)[0].prompt_ids.size(), 4u);
    EXPECT_EQ((*run)[0].prompt_ids[3], 5);
    EXPECT_EQ((*run)[0].prompt_text, "text stays");
    for (int i = 0; i < 3; ++i) {
      EXPECT_GE((*run)[0].prompt_ids[i], ids.min);
      EXPECT_LT((*run)[0].prompt_ids[i], ids.max);
      EXPECT_NE((*run)[0].prompt_ids[i], dataset[0].prompt_ids[i]);
    }
    // The shared prefix stays shared inside the run.
    EXPECT_EQ((*run)[0].prompt_ids[0], (*run)[1].prompt_ids[0]);
    EXPECT_EQ((*run)[0].prompt_ids[1], (*run)[1].prompt_ids[1]);
  }
  EXPECT_NE(run1[0].prompt_ids, run2[0].prompt_ids);
}

TEST(BenchSweepTest, EachRateSendsDifferentIds) {
  FakeBenchClient client;
  std::vector<BenchRequest> dataset = NumberedRequests(3);
  SweepOptions options;
  options.rates = {1e6, 1e6};
  options.warmup_ids = {100, 300};  // the range NumberedRequests' ids lie in
  ASSERT_TRUE(RunSweep(client, dataset, options).ok());
  ASSERT_EQ(client.calls().size(), 6u);
  std::set<std::vector<int32_t>> distinct;
  for (const FakeBenchClient::Call& c : client.calls()) distinct.insert(c.request.prompt_ids);
  EXPECT_EQ(distinct.size(), 6u);
}

}  // namespace
}  // namespace tandem::bench

namespace tandem::bench {
namespace {

TEST(BenchSweepTest, RunDurationSizesEachRun) {
  EXPECT_EQ(RequestsForRun(100, 5, 0), 100);   // off
  EXPECT_EQ(RequestsForRun(100, 5, 4), 20);    // 5/s for 4 s
  EXPECT_EQ(RequestsForRun(100, 2.5, 3), 8);   // ceil(7.5)
  EXPECT_EQ(RequestsForRun(100, 50, 4), 100);  // capped by the dataset
  EXPECT_EQ(RequestsForRun(100, 0.01, 1), 1);  // at least one
  EXPECT_EQ(RequestsForRun(100, std::numeric_limits<double>::infinity(), 4), 100);

  FakeBenchClient client;
  std::vector<BenchRequest> dataset = NumberedRequests(10);
  SweepOptions options;
  options.rates = {1000, 2000};
  options.run_duration_s = 0.003;  // 3 then 6 requests
  auto report = RunSweep(client, dataset, options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->runs.size(), 2u);
  EXPECT_EQ(report->runs[0].summary.num_requests, 3);
  EXPECT_EQ(report->runs[1].summary.num_requests, 6);
  EXPECT_EQ(client.calls().size(), 9u);
}

}  // namespace
}  // namespace tandem::bench
