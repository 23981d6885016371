#include "bench/serve/serving_metrics.h"

#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::bench {
namespace {

// Expected values are numpy.percentile's (linear interpolation), worked out by hand:
// position = q / 100 * (n - 1) in the sorted values, interpolated between its neighbours.
TEST(PercentileTest, MatchesNumpyLinear) {
  const std::vector<double> v = {4, 1, 3, 2};  // sorted: 1 2 3 4
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);   // position 1.5
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 3.7);   // position 2.7
  EXPECT_DOUBLE_EQ(Percentile(v, 99), 3.97);  // position 2.97
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
  const std::vector<double> w = {50, 10, 40, 20, 30};
  EXPECT_DOUBLE_EQ(Percentile(w, 25), 20);    // position 1 exactly
  EXPECT_DOUBLE_EQ(Percentile(w, 33), 23.2);  // position 1.32
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
  EXPECT_DOUBLE_EQ(Percentile({0.1, 0.2, 0.3, 0.5, 0.7, 0.9}, 90), 0.8);  // position 4.5
}

TEST(SummarizeTest, AllFieldsAndEmpty) {
  Distribution d = Summarize({3, 1, 2});
  EXPECT_EQ(d.count, 3);
  EXPECT_DOUBLE_EQ(d.mean, 2);
  EXPECT_DOUBLE_EQ(d.median, 2);
  EXPECT_DOUBLE_EQ(d.p90, 2.8);
  EXPECT_DOUBLE_EQ(d.p99, 2.98);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.max, 3);
  Distribution e = Summarize({});
  EXPECT_EQ(e.count, 0);
  EXPECT_EQ(e.mean, 0);
  EXPECT_EQ(e.p99, 0);
  EXPECT_EQ(e.max, 0);
}

RequestResult Ok(double ttft, double e2e, int32_t output_tokens, std::vector<double> itl = {},
                 int32_t prompt_tokens = 10) {
  RequestResult r;
  r.success = true;
  r.ttft_s = ttft;
  r.e2e_s = e2e;
  r.output_tokens = output_tokens;
  r.prompt_tokens = prompt_tokens;
  r.itl_s = std::move(itl);
  return r;
}

RequestResult Failed() {
  RequestResult r;
  r.error = "HTTP 503";
  r.ttft_s = 0.01;
  r.e2e_s = 0.02;
  r.prompt_tokens = 1000;
  r.output_tokens = 3;
  return r;
}

TEST(TpotTest, ExcludesTheFirstToken) {
  EXPECT_DOUBLE_EQ(*Tpot(Ok(0.1, 1.0, 10)), 0.1);  // 0.9 s over 9 tokens
  EXPECT_DOUBLE_EQ(*Tpot(Ok(0.2, 0.5, 2)), 0.3);
  EXPECT_FALSE(Tpot(Ok(0.1, 0.1, 1)).has_value());
  EXPECT_FALSE(Tpot(Ok(0.1, 0.1, 0)).has_value());
  EXPECT_FALSE(Tpot(Failed()).has_value());
}

TEST(MeetsSloTest, BothLimitsAndNoLimits) {
  SloLimits none;
  SloLimits both{.ttft_s = 0.5, .tpot_s = 0.05};
  SloLimits ttft_only{.ttft_s = 0.5};
  EXPECT_TRUE(MeetsSlo(Ok(2.0, 10.0, 3), none));
  EXPECT_FALSE(MeetsSlo(Failed(), none));
  EXPECT_TRUE(MeetsSlo(Ok(0.5, 0.95, 10), both));   // TTFT at the limit, TPOT 0.05
  EXPECT_FALSE(MeetsSlo(Ok(0.51, 0.6, 10), both));  // TTFT over
  EXPECT_FALSE(MeetsSlo(Ok(0.1, 1.0, 10), both));   // TPOT 0.1 over
  EXPECT_TRUE(MeetsSlo(Ok(0.1, 1.0, 10), ttft_only));
  EXPECT_TRUE(MeetsSlo(Ok(0.1, 0.1, 1), both));  // one token: no TPOT, meets it
  EXPECT_FALSE(MeetsSlo(Failed(), both));
}

TEST(SummarizeRunTest, ThroughputsDistributionsAndAttainment) {
  const std::vector<RequestResult> results = {
      Ok(0.1, 1.0, 10, {0.1, 0.1, 0.2}, 100),  // TPOT 0.1
      Ok(0.3, 0.7, 5, {0.05, 0.15}, 200),      // TPOT 0.1
      Ok(0.2, 0.2, 1, {}, 50),                 // no TPOT
      Failed(),
  };
  SloLimits slo{.ttft_s = 0.25, .tpot_s = 0.2};
  RunSummary s = SummarizeRun(results, 2.0, 4.0, slo);
  EXPECT_EQ(s.offered_rate, 4.0);
  EXPECT_EQ(s.duration_s, 2.0);
  EXPECT_EQ(s.num_requests, 4);
  EXPECT_EQ(s.completed, 3);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.input_tokens, 350);  // the failed request's 1000 is not counted
  EXPECT_EQ(s.output_tokens, 16);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(s.input_throughput, 175);
  EXPECT_DOUBLE_EQ(s.output_throughput, 8);
  EXPECT_EQ(s.ttft_s.count, 3);
  EXPECT_DOUBLE_EQ(s.ttft_s.mean, 0.2);
  EXPECT_DOUBLE_EQ(s.ttft_s.max, 0.3);
  EXPECT_EQ(s.tpot_s.count, 2);
  EXPECT_DOUBLE_EQ(s.tpot_s.mean, 0.1);
  EXPECT_EQ(s.itl_s.count, 5);  // every gap of every completed request
  EXPECT_DOUBLE_EQ(s.itl_s.median, 0.1);
  EXPECT_DOUBLE_EQ(s.itl_s.max, 0.2);
  EXPECT_EQ(s.e2e_s.count, 3);
  EXPECT_DOUBLE_EQ(s.e2e_s.median, 0.7);
  // Requests 0 and 2 meet it; 1 misses TTFT, 3 failed: 2 of 4.
  EXPECT_DOUBLE_EQ(s.slo_attainment, 0.5);
  EXPECT_DOUBLE_EQ(s.good_request_rate, 1.0);

  // Without limits every success meets the SLO; the failure still misses.
  RunSummary plain = SummarizeRun(results, 2.0, 4.0, {});
  EXPECT_DOUBLE_EQ(plain.slo_attainment, 0.75);
  EXPECT_DOUBLE_EQ(plain.good_request_rate, 1.5);
}

TEST(SummarizeRunTest, EmptyAndZeroDuration) {
  RunSummary s = SummarizeRun({}, 0.0, std::numeric_limits<double>::infinity(), {});
  EXPECT_EQ(s.num_requests, 0);
  EXPECT_EQ(s.request_throughput, 0);
  EXPECT_EQ(s.ttft_s.count, 0);
  EXPECT_EQ(s.slo_attainment, 1.0);
  RunSummary z = SummarizeRun({Ok(0.1, 0.2, 2)}, 0.0, 1.0, {});
  EXPECT_EQ(z.completed, 1);
  EXPECT_EQ(z.request_throughput, 0);  // no division by zero
  EXPECT_EQ(z.output_throughput, 0);
}

SweepPoint Point(double rate, double attainment) {
  SweepPoint p;
  p.rate = rate;
  p.summary.slo_attainment = attainment;
  return p;
}

TEST(GoodputTest, HighestPassingRate) {
  Goodput g = ComputeGoodput({Point(1, 1.0), Point(2, 0.95), Point(4, 0.9), Point(8, 0.5)});
  ASSERT_TRUE(g.rate.has_value());
  EXPECT_EQ(*g.rate, 4);  // 0.9 passes (>= threshold)
  EXPECT_TRUE(g.monotonic);
  EXPECT_EQ(g.threshold, 0.9);
}

TEST(GoodputTest, NonMonotonicAndUnsortedInput) {
  Goodput g = ComputeGoodput({Point(4, 0.7), Point(2, 0.95), Point(1, 0.85)});
  ASSERT_TRUE(g.rate.has_value());
  EXPECT_EQ(*g.rate, 2);
  EXPECT_FALSE(g.monotonic);  // rate 1 missed while rate 2 passed
  // A miss above the goodput rate is expected and keeps the curve monotonic.
  Goodput h = ComputeGoodput({Point(4, 0.7), Point(2, 0.95), Point(1, 0.99)});
  EXPECT_EQ(*h.rate, 2);
  EXPECT_TRUE(h.monotonic);
}

TEST(GoodputTest, NonePassAndCustomThreshold) {
  Goodput g = ComputeGoodput({Point(1, 0.8), Point(2, 0.5)});
  EXPECT_FALSE(g.rate.has_value());
  EXPECT_TRUE(g.monotonic);
  EXPECT_FALSE(ComputeGoodput({}).rate.has_value());
  Goodput low = ComputeGoodput({Point(1, 0.8), Point(2, 0.5)}, 0.75);
  EXPECT_EQ(*low.rate, 1);
  EXPECT_EQ(low.threshold, 0.75);
}

}  // namespace
}  // namespace tandem::bench
