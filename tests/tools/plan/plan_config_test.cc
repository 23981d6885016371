// What one run measures against the SLO: percentiles with failed requests as infinitely late,
// attainment, which limit breaks; and the report built from a search's results.
#include "tools/plan/plan_config.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/plan/plan_report.h"
#include "tools/plan/plan_search.h"

namespace tandem::plan {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kInf = std::numeric_limits<double>::infinity();

bench::RequestResult Ok(double ttft_s, double e2e_s, int32_t output_tokens) {
  return {.success = true, .ttft_s = ttft_s, .e2e_s = e2e_s, .output_tokens = output_tokens};
}

TEST(PlanConfigTest, PercentileInterpolatesAndTurnsInfiniteWhereFailuresReach) {
  EXPECT_EQ(PercentileWithInfinities({}, 90), 0);
  EXPECT_DOUBLE_EQ(PercentileWithInfinities({1, 2, 3, 4, 5}, 50), 3);
  EXPECT_DOUBLE_EQ(PercentileWithInfinities({1, 2, 3, 4, 5}, 90), 4.6);
  // Ranks 0..9: the p80 sits exactly on the 9th value, finite; p90 interpolates toward inf.
  std::vector<double> values = {1, 2, 3, 4, 5, 6, 7, 8, 9, kInf};
  EXPECT_DOUBLE_EQ(PercentileWithInfinities(values, 0), 1);
  EXPECT_NEAR(PercentileWithInfinities(values, 100.0 * 8 / 9), 9, 1e-12);
  EXPECT_TRUE(std::isinf(PercentileWithInfinities(values, 90)));
  EXPECT_TRUE(std::isinf(PercentileWithInfinities(values, 100)));
}

TEST(PlanConfigTest, MeasureProbeCountsFailuresAsLateAndOneTokenRequestsAsTpotZero) {
  const SloTarget slo{.ttft_s = 0.5, .tpot_s = 0.05, .percentile = 50};
  std::vector<bench::RequestResult> results = {
      Ok(0.1, 0.1 + 9 * 0.02, 10),  // TPOT 20 ms, within both
      Ok(0.2, 0.2, 1),              // one token: TPOT 0, within both
      Ok(0.9, 0.9 + 9 * 0.03, 10),  // TTFT over
      Ok(0.3, 0.3 + 9 * 0.06, 10),  // TPOT over
  };
  bench::RequestResult failed;
  failed.error = "never fit";
  results.push_back(failed);
  const ProbeStats p = MeasureProbe(results, slo, 12.5, 0.25);
  EXPECT_EQ(p.rate, 12.5);
  EXPECT_EQ(p.share, 0.25);
  EXPECT_EQ(p.requests, 5);
  EXPECT_EQ(p.failed, 1);
  EXPECT_DOUBLE_EQ(p.ttft_s, 0.3);     // median of 0.1 0.2 0.3 0.9 inf
  EXPECT_NEAR(p.tpot_s, 0.03, 1e-12);  // median of 0 0.02 0.03 0.06 inf
  EXPECT_DOUBLE_EQ(p.attainment, 2.0 / 5);
  EXPECT_EQ(JudgeProbe(p, slo), SloBreach::kNone);

  const ProbeStats p90 =
      MeasureProbe(results, {.ttft_s = 0.5, .tpot_s = 0.05, .percentile = 90}, 12.5);
  EXPECT_TRUE(std::isinf(p90.ttft_s));
  EXPECT_EQ(JudgeProbe(p90, {.ttft_s = 0.5, .tpot_s = 0.05}), SloBreach::kBoth);
}

TEST(PlanConfigTest, JudgeProbeNamesEachLimitItBreaks) {
  const SloTarget slo{.ttft_s = 1, .tpot_s = 0.02};
  EXPECT_EQ(JudgeProbe({.ttft_s = 1, .tpot_s = 0.02}, slo), SloBreach::kNone);
  EXPECT_EQ(JudgeProbe({.ttft_s = 1.01, .tpot_s = 0.02}, slo), SloBreach::kTtft);
  EXPECT_EQ(JudgeProbe({.ttft_s = 0.5, .tpot_s = 0.03}, slo), SloBreach::kTpot);
  // No TPOT limit: an infinite TPOT breaks nothing.
  EXPECT_EQ(JudgeProbe({.ttft_s = 0.5, .tpot_s = kInf}, {.ttft_s = 1}), SloBreach::kNone);
  EXPECT_EQ(SloBreachName(SloBreach::kBoth), "TTFT and TPOT");
}

TEST(PlanConfigTest, NamesSayThePoolsAndTheKnobs) {
  PlanConfig d = Disaggregated(3, 2, 5, 8);
  d.max_num_batched_tokens = 8192;
  d.local_prefill_threshold = 512;
  d.policy = PlacementPolicy::kRoundRobin;
  EXPECT_EQ(d.Gpus(), 46);
  EXPECT_EQ(ConfigName(d),
            "disaggregated 3 x TP2 + 5 x TP8, chunk 8192, threshold 512, round_robin");
  EXPECT_EQ(ConfigName(Colocated(8, 4)), "colocated 8 x TP4, chunk 2048, least_loaded");
  EXPECT_EQ(Colocated(8, 4).Gpus(), 32);
}

ConfigResult Ranked(PlanConfig config, double goodput, double above, double ttft_above,
                    double tpot_above) {
  ConfigResult r{.config = config, .goodput = goodput};
  r.passed = ProbeStats{
      .rate = goodput, .requests = 100, .ttft_s = 0.4, .tpot_s = 0.02, .attainment = 0.97};
  r.above = ProbeStats{.rate = above, .requests = 100, .ttft_s = ttft_above, .tpot_s = tpot_above};
  r.breaks_first = JudgeProbe(*r.above, {.ttft_s = 1, .tpot_s = 0.025});
  return r;
}

TEST(PlanConfigTest, ParseShapeReadsEachModeAndRefusesTheRest) {
  absl::StatusOr<PlanConfig> d = ParseShape("disaggregated:20xTP2+3xTP8");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, Disaggregated(20, 2, 3, 8));
  absl::StatusOr<PlanConfig> c = ParseShape("colocated:8xTP8");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, Colocated(8, 8));
  absl::StatusOr<PlanConfig> a = ParseShape("auto:4xTP2");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, Auto(4, 2));
  for (const char* bad :
       {"", "8xTP8", "colocated:", "colocated:8xTP", "colocated:0xTP8", "colocated:8xTP8+1xTP8",
        "disaggregated:20xTP2", "disaggregated:20xTP2+", "spread:8xTP8", "colocated:8x8"}) {
    absl::StatusOr<PlanConfig> shape = ParseShape(bad);
    EXPECT_FALSE(shape.ok()) << bad;
    EXPECT_THAT(shape.status().message(), HasSubstr("disaggregated:PxTPa+DxTPb")) << bad;
  }
}

TEST(PlanReportTest, TableOfTheBestThenWhyEachOtherLoses) {
  const SloTarget slo{.ttft_s = 1, .tpot_s = 0.025, .percentile = 90};
  PlanResult result;
  result.configs.push_back(Ranked(Colocated(8, 8), 40, 42, 1.5, 0.02));             // 0.625/GPU
  result.configs.push_back(Ranked(Disaggregated(3, 8, 5, 8), 60, 63, 0.8, 0.031));  // 0.9375
  ConfigResult pruned{.config = Disaggregated(1, 8, 7, 8), .bound = GoodputBound::kBelowBar};
  pruned.above = ProbeStats{.rate = 40, .share = 0.25, .ttft_s = 3.2, .tpot_s = 0.01};
  pruned.breaks_first = SloBreach::kTtft;
  result.configs.push_back(pruned);
  result.configs.push_back({.config = Colocated(64, 1), .skipped = "weights do not fit"});
  result.skipped_tp.push_back({1, "134570 MiB of weights do not fit 1 x h100"});

  const std::string report = FormatPlanReport(result, slo, 1);
  EXPECT_THAT(report, HasSubstr("TTFT p90"));
  // #1 is the disaggregated cluster; the colocated one is a loser whose TTFT breaks at 42 req/s.
  const size_t first_row = report.find("\n1  ");
  ASSERT_NE(first_row, std::string::npos) << report;
  EXPECT_EQ(report.find("disaggregated", first_row), first_row + 4) << report;
  EXPECT_THAT(report, Not(HasSubstr("\n2  ")));
  EXPECT_THAT(report, HasSubstr("colocated 8 x TP8, chunk 2048, least_loaded: 40.0 req/s "
                                "(0.625/GPU); TTFT breaks first: at 42.0 req/s TTFT p90 1.500 s "
                                "> 1.000 s"));
  EXPECT_THAT(report, HasSubstr("< 40.0 req/s (< 0.625/GPU); TTFT breaks first: at 40.0 req/s "
                                "TTFT p90 3.200 s > 1.000 s (screen: the first 25.0% of the run)"));
  EXPECT_THAT(report, HasSubstr("colocated 64 x TP1, chunk 2048, least_loaded: skipped: weights "
                                "do not fit"));
  EXPECT_THAT(report, HasSubstr("TP 1 skipped: 134570 MiB"));
  // The winner's own row says which SLO breaks above its goodput.
  EXPECT_THAT(report.substr(first_row, report.find('\n', first_row + 1) - first_row),
              HasSubstr("TPOT"));

  const nlohmann::json j = PlanToJson(result, slo);
  ASSERT_EQ(j["configs"].size(), 4u);
  EXPECT_EQ(j["configs"][0]["mode"], "disaggregated");
  EXPECT_EQ(j["configs"][0]["rank"], 1);
  EXPECT_EQ(j["configs"][0]["goodput_rps"], 60);
  EXPECT_EQ(j["configs"][0]["breaks_first"], "TPOT");
  EXPECT_EQ(j["configs"][2]["bound"], "below_bar");
  EXPECT_EQ(j["configs"][2]["above"]["share"], 0.25);
  EXPECT_EQ(j["configs"][3]["skipped"], "weights do not fit");
  EXPECT_EQ(j["slo"]["percentile"], 90);
  EXPECT_EQ(j["skipped_tp"][0]["tp"], 1);
}

TEST(PlanReportTest, RankingBreaksGoodputTiesByFewerGpusThenHeadroom) {
  PlanResult result;
  result.configs.push_back(Ranked(Colocated(4, 8), 32, 33, 2, 0.01));   // 1.0/GPU, 32 GPUs
  result.configs.push_back(Ranked(Colocated(2, 8), 16, 17, 2, 0.01));   // 1.0/GPU, 16 GPUs
  result.configs.push_back(Ranked(Colocated(16, 1), 16, 17, 2, 0.01));  // 1.0/GPU, 16 GPUs
  result.configs[1].slo_load = 0.9;
  result.configs[2].slo_load = 0.5;
  EXPECT_EQ(result.Ranking(), (std::vector<size_t>{2, 1, 0}));
}

TEST(PlanReportTest, FormatSecondsKeepsFourFigures) {
  EXPECT_EQ(FormatSeconds(41.26), "41.3 s");
  EXPECT_EQ(FormatSeconds(2.3124), "2.312 s");
  EXPECT_EQ(FormatSeconds(0.81243), "812.4 ms");
  EXPECT_EQ(FormatSeconds(0.02345), "23.45 ms");
  EXPECT_EQ(FormatSeconds(kInf), "inf");
}

}  // namespace
}  // namespace tandem::plan
