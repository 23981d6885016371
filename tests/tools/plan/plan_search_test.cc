// The planner's search against a fake evaluator with known answers: the rate search brackets the
// known threshold, names the SLO that breaks, the staged search finds the brute-force best of a
// landscape, stays within the GPU budget, skips TP sizes that do not fit, prunes with one screen,
// and is deterministic.
#include "tools/plan/plan_search.h"

#include <cmath>
#include <map>
#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/plan/fake_evaluator.h"

namespace tandem::plan {
namespace {

using ::testing::HasSubstr;

SloTarget Slo() { return {.ttft_s = 1.0, .tpot_s = 0.05, .percentile = 90}; }

// One colocated TP4 configuration: only the rate is searched.
PlanSearchOptions OneConfig() {
  PlanSearchOptions o;
  o.slo = Slo();
  o.space.gpus = 8;
  o.space.tensor_parallel = {4};
  o.space.disaggregated = false;
  o.space.chunk_sizes = {2048};
  o.space.local_prefill_thresholds = {0};
  o.space.policies = {PlacementPolicy::kLeastLoaded};
  return o;
}

const ConfigResult& Best(const PlanResult& result) {
  return result.configs[result.Ranking().front()];
}

TEST(PlanSearchTest, BisectionBracketsTheRateWhereTheSloBreaks) {
  PlanSearchOptions options = OneConfig();
  options.tolerance = 0.01;
  FakeEvaluator fake(options.slo, [](const PlanConfig&) { return FakeCapacity{13.7, 20}; });
  absl::StatusOr<PlanResult> result = RunPlanSearch(options, fake);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->configs.size(), 1u);
  const ConfigResult& c = result->configs[0];
  EXPECT_EQ(c.config, Colocated(2, 4));
  EXPECT_EQ(c.bound, GoodputBound::kExact);
  ASSERT_TRUE(c.passed.has_value() && c.above.has_value());
  EXPECT_LE(c.goodput, 13.7);
  EXPECT_GT(c.above->rate, 13.7);
  EXPECT_LE(c.above->rate, c.goodput * 1.01);
  EXPECT_DOUBLE_EQ(c.passed->rate, c.goodput);
  EXPECT_EQ(c.breaks_first, SloBreach::kTtft);
  EXPECT_NEAR(c.GoodputPerGpu(), c.goodput / 8, 1e-12);
  EXPECT_EQ(c.probes, static_cast<int>(fake.probes.size()));
}

TEST(PlanSearchTest, NamesTheSloThatBreaksFirstAboveTheGoodput) {
  PlanSearchOptions options = OneConfig();
  FakeEvaluator tpot(options.slo, [](const PlanConfig&) { return FakeCapacity{30, 11}; });
  absl::StatusOr<PlanResult> result = RunPlanSearch(options, tpot);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->configs[0].breaks_first, SloBreach::kTpot);
  EXPECT_LE(result->configs[0].goodput, 11);
  EXPECT_GT(result->configs[0].goodput, 11 / 1.05);

  FakeEvaluator both(options.slo, [](const PlanConfig&) { return FakeCapacity{11, 11}; });
  result = RunPlanSearch(options, both);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->configs[0].breaks_first, SloBreach::kBoth);
}

TEST(PlanSearchTest, GoodputIsZeroWhenEvenTheLowestRateBreaksTheSlo) {
  PlanSearchOptions options = OneConfig();
  options.min_rate = 0.01;
  FakeEvaluator fake(options.slo, [](const PlanConfig&) { return FakeCapacity{0.001, 5}; });
  absl::StatusOr<PlanResult> result = RunPlanSearch(options, fake);
  ASSERT_TRUE(result.ok());
  const ConfigResult& c = result->configs[0];
  EXPECT_EQ(c.bound, GoodputBound::kZero);
  EXPECT_EQ(c.goodput, 0);
  EXPECT_FALSE(c.Ranked());
  ASSERT_TRUE(c.above.has_value());
  EXPECT_DOUBLE_EQ(c.above->rate, 0.01);
  EXPECT_EQ(c.breaks_first, SloBreach::kTtft);
}

// Prefill capacity grows with prefill GPUs, decode capacity with decode GPUs; each knob moves
// them by a known factor. The best configuration per GPU is unique (brute force below).
FakeCapacity Landscape(const PlanConfig& c) {
  const std::map<int, double> prefill_per_gpu = {{2, 2.0}, {4, 2.4}, {8, 2.2}};
  const std::map<int, double> decode_per_gpu = {{2, 1.0}, {4, 0.9}, {8, 0.8}};
  const std::map<int, double> colocated_per_gpu = {{2, 0.50}, {4, 0.55}, {8, 0.45}};
  const std::map<int32_t, double> chunk = {{512, 0.8}, {2048, 1.0}, {8192, 1.1}};
  const std::map<PlacementPolicy, double> policy = {{PlacementPolicy::kCost, 1.01},
                                                    {PlacementPolicy::kLeastLoaded, 1.0},
                                                    {PlacementPolicy::kRoundRobin, 1.03},
                                                    {PlacementPolicy::kPrefixAware, 0.98}};
  // Local prefill moves prompts from the prefill pool to the decode pool.
  const std::map<int64_t, std::pair<double, double>> threshold = {
      {0, {1.0, 1.0}}, {512, {1.1, 0.98}}, {2048, {1.3, 0.85}}};
  const double p = policy.at(c.policy);
  if (c.mode == ServingMode::kColocated) {
    const double cap = c.Gpus() * colocated_per_gpu.at(c.decode_tp) *
                       (c.max_num_batched_tokens == 8192 ? 1.05 : 1.0) * p;
    return {cap, cap * 1.2};
  }
  const auto [to_prefill, to_decode] = threshold.at(c.local_prefill_threshold);
  return {c.num_prefill * c.prefill_tp * prefill_per_gpu.at(c.prefill_tp) *
              chunk.at(c.max_num_batched_tokens) * to_prefill * p,
          c.num_decode * c.decode_tp * decode_per_gpu.at(c.decode_tp) * to_decode * p};
}

PlanSearchOptions Grid() {
  PlanSearchOptions o;
  o.slo = Slo();
  o.space.gpus = 16;
  o.top = 3;
  o.tolerance = 0.002;
  return o;
}

// Every configuration of the search space, the true goodput per GPU of each.
std::vector<std::pair<PlanConfig, double>> BruteForce(const PlanSearchOptions& o,
                                                      const std::set<int>& unfit) {
  std::vector<std::pair<PlanConfig, double>> all;
  auto add_knobs = [&](PlanConfig c) {
    for (int32_t chunk : o.space.chunk_sizes) {
      for (int64_t threshold : c.mode == ServingMode::kColocated
                                   ? std::vector<int64_t>{0}
                                   : o.space.local_prefill_thresholds) {
        for (PlacementPolicy policy : o.space.policies) {
          c.max_num_batched_tokens = chunk;
          c.local_prefill_threshold = threshold;
          c.policy = policy;
          const FakeCapacity cap = Landscape(c);
          all.push_back({c, std::min(cap.ttft_rate, cap.tpot_rate) / c.Gpus()});
        }
      }
    }
  };
  const int g = o.space.gpus;
  for (int tp : o.space.tensor_parallel) {
    if (unfit.count(tp) == 0 && tp <= g) add_knobs(Colocated(g / tp, tp));
  }
  for (int tp_p : o.space.tensor_parallel) {
    for (int tp_d : o.space.tensor_parallel) {
      if (unfit.count(tp_p) > 0 || unfit.count(tp_d) > 0) continue;
      for (int p = 1; p * tp_p + tp_d <= g; ++p) {
        add_knobs(Disaggregated(p, tp_p, (g - p * tp_p) / tp_d, tp_d));
      }
    }
  }
  return all;
}

TEST(PlanSearchTest, FindsTheBruteForceBestConfiguration) {
  const PlanSearchOptions options = Grid();
  FakeEvaluator fake(options.slo, Landscape);
  fake.unfit_tp = {1};
  absl::StatusOr<PlanResult> result = RunPlanSearch(options, fake);
  ASSERT_TRUE(result.ok()) << result.status();

  const auto all = BruteForce(options, fake.unfit_tp);
  const auto truth = std::max_element(
      all.begin(), all.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  for (const auto& [config, per_gpu] : all) {  // the landscape's best is unique
    if (!(config == truth->first)) {
      ASSERT_LT(per_gpu, truth->second * 0.99) << ConfigName(config);
    }
  }
  const ConfigResult& best = Best(*result);
  EXPECT_EQ(ConfigName(best.config), ConfigName(truth->first));
  EXPECT_LE(best.GoodputPerGpu(), truth->second);
  EXPECT_GT(best.GoodputPerGpu(), truth->second / (1 + options.tolerance));
  // Far fewer configurations than the grid, each run at few rates.
  EXPECT_LT(result->configs.size(), all.size() / 3);
  EXPECT_EQ(result->probes, static_cast<int>(fake.probes.size()));
}

TEST(PlanSearchTest, EveryConfigurationFitsTheGpuBudgetWithBothPoolsPresent) {
  PlanSearchOptions options = Grid();
  options.space.gpus = 12;  // not a multiple of 8: pools leave GPUs unused
  FakeEvaluator fake(options.slo, Landscape);
  fake.unfit_tp = {1};
  absl::StatusOr<PlanResult> result = RunPlanSearch(options, fake);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(fake.probes.empty());
  bool colocated = false, disaggregated = false;
  for (const FakeProbe& p : fake.probes) {
    EXPECT_LE(p.config.Gpus(), 12) << ConfigName(p.config);
    EXPECT_GE(p.config.num_decode, 1);
    if (p.config.mode == ServingMode::kDisaggregated) {
      disaggregated = true;
      EXPECT_GE(p.config.num_prefill, 1);
    } else {
      colocated = true;
      EXPECT_EQ(p.config.num_prefill, 0);
    }
  }
  EXPECT_TRUE(colocated && disaggregated);
}

TEST(PlanSearchTest, SkipsTensorParallelSizesTheModelDoesNotFit) {
  const PlanSearchOptions options = Grid();
  FakeEvaluator fake(options.slo, Landscape);
  fake.unfit_tp = {1, 2};
  absl::StatusOr<PlanResult> result = RunPlanSearch(options, fake);
  ASSERT_TRUE(result.ok()) << result.status();
  for (const FakeProbe& p : fake.probes) {
    EXPECT_GE(p.config.decode_tp, 4) << ConfigName(p.config);
    if (p.config.mode == ServingMode::kDisaggregated) {
      EXPECT_GE(p.config.prefill_tp, 4);
    }
  }
  ASSERT_EQ(result->skipped_tp.size(), 2u);
  EXPECT_EQ(result->skipped_tp[0].tp, 1);
  EXPECT_EQ(result->skipped_tp[1].tp, 2);
  EXPECT_THAT(result->skipped_tp[1].reason, HasSubstr("do not fit"));
  EXPECT_TRUE(Best(*result).Ranked());
}

// A mixed-TP split's goodput per GPU as a decode-bound cluster shows it: flat or bumpy while only
// the prefill pool changes, a step where the decode pool gains a node. 64 GPUs, TP 2 prefill and
// TP 8 decode nodes; the best same-TP split puts 3/4 of the GPUs in prefill, so the mixed climb
// starts at 24 TP2 prefill nodes (2 decode) and goes down: 23 is better, 22 worse, so steps alone
// stop at 23; 20 prefill nodes leave room for a third decode node, the best by far.
FakeCapacity DecodeSteps(const PlanConfig& c) {
  double per_gpu = 0.1;
  if (c.mode == ServingMode::kDisaggregated && c.prefill_tp == 2 && c.decode_tp == 8) {
    const std::map<int, double> two_decode = {{24, 0.97}, {23, 1.0}, {22, 0.98}, {21, 0.99}};
    if (c.num_decode == 1) per_gpu = 0.5;
    if (c.num_decode == 2) {
      per_gpu = two_decode.count(c.num_prefill) > 0 ? two_decode.at(c.num_prefill) : 0.9;
    }
    if (c.num_decode == 3) per_gpu = 1.3;
    if (c.num_decode >= 4) per_gpu = 0.8;
  } else if (c.mode == ServingMode::kDisaggregated && c.prefill_tp == 2 && c.decode_tp == 2) {
    per_gpu = c.num_prefill == 24 ? 0.3 : 0.2;
  }
  const double rate = per_gpu * c.Gpus();
  return {rate, rate};
}

TEST(PlanSearchTest, TheMixedClimbLeavesAPlateauForTheNextDecodeNode) {
  PlanSearchOptions options = Grid();
  options.space.gpus = 64;
  options.space.tensor_parallel = {2, 8};
  options.space.chunk_sizes = {2048};
  options.space.local_prefill_thresholds = {0};
  options.space.policies = {PlacementPolicy::kCost};
  FakeEvaluator fake(options.slo, DecodeSteps);
  absl::StatusOr<PlanResult> result = RunPlanSearch(options, fake);
  ASSERT_TRUE(result.ok()) << result.status();
  const ConfigResult& best = Best(*result);
  EXPECT_EQ(best.config.mode, ServingMode::kDisaggregated);
  EXPECT_EQ(best.config.prefill_tp, 2);
  EXPECT_EQ(best.config.decode_tp, 8);
  EXPECT_EQ(best.config.num_decode, 3) << ConfigName(best.config);
  EXPECT_GT(best.GoodputPerGpu(), 1.3 / (1 + options.tolerance));
}

TEST(PlanSearchTest, GivenShapesAreTheOnlyOnesEvaluated) {
  PlanSearchOptions options = Grid();
  options.space.shapes = {Disaggregated(3, 2, 2, 4), Colocated(4, 4)};
  FakeEvaluator fake(options.slo, Landscape);
  fake.unfit_tp = {1};
  absl::StatusOr<PlanResult> result = RunPlanSearch(options, fake);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(fake.probes.empty());
  std::set<std::string> shapes;
  for (const FakeProbe& p : fake.probes) shapes.insert(ShapeName(p.config));
  EXPECT_THAT(shapes,
              ::testing::ElementsAre("colocated 4 x TP4", "disaggregated 3 x TP2 + 2 x TP4"));
  // Their knobs are still searched: the landscape's best chunk and policy win.
  const ConfigResult& best = Best(*result);
  EXPECT_EQ(best.config.max_num_batched_tokens, 8192) << ConfigName(best.config);
  EXPECT_EQ(best.config.policy, PlacementPolicy::kRoundRobin) << ConfigName(best.config);
}

TEST(PlanSearchTest, GivenShapesMustFitTheBudgetAndUseUsableTp) {
  PlanSearchOptions options = Grid();
  options.space.shapes = {Disaggregated(8, 2, 1, 8)};  // 24 GPUs of 16
  FakeEvaluator fake(options.slo, Landscape);
  absl::StatusOr<PlanResult> result = RunPlanSearch(options, fake);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("over the budget of 16"));

  options.space.shapes = {Colocated(16, 1)};
  fake.unfit_tp = {1};
  result = RunPlanSearch(options, fake);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(result.status()));
  EXPECT_THAT(result.status().message(), HasSubstr("TP 1 is not searched or not usable"));
  EXPECT_THAT(result.status().message(), HasSubstr("do not fit"));
  EXPECT_TRUE(fake.probes.empty());
}

TEST(PlanSearchTest, APrunedConfigurationCostsOneFailedScreen) {
  const PlanSearchOptions options = Grid();
  FakeEvaluator fake(options.slo, Landscape);
  fake.unfit_tp = {1};
  absl::StatusOr<PlanResult> result = RunPlanSearch(options, fake);
  ASSERT_TRUE(result.ok());
  int pruned = 0;
  for (const ConfigResult& c : result->configs) {
    if (c.bound != GoodputBound::kBelowBar) continue;
    ++pruned;
    EXPECT_EQ(c.probes, 1) << ConfigName(c.config);
    ASSERT_TRUE(c.above.has_value());
    EXPECT_DOUBLE_EQ(c.above->share, options.screen_share);
    EXPECT_NE(c.breaks_first, SloBreach::kNone);
    // The bar: what the config would need per GPU to enter the top 3; it is truly below it.
    const FakeCapacity cap = Landscape(c.config);
    EXPECT_LT(std::min(cap.ttft_rate, cap.tpot_rate), c.above->rate);
  }
  EXPECT_GT(pruned, 0);
  EXPECT_EQ(result->screens_failed, [&] {
    int failed = 0;
    for (const FakeProbe& p : fake.probes) {
      failed += p.share < 1 &&
                JudgeProbe(*fake.Probe(p.config, p.rate, p.share), options.slo) != SloBreach::kNone;
    }
    return failed;
  }());
}

TEST(PlanSearchTest, AScreenThatPassesIsDecidedByTheFullRun) {
  PlanSearchOptions options = OneConfig();
  options.tolerance = 0.01;
  FakeEvaluator fake(options.slo, [](const PlanConfig&) { return FakeCapacity{10, 50}; });
  fake.screen_latency_factor = 0.5;  // the screen sees half the latency: passes up to 20 req/s
  absl::StatusOr<PlanResult> result = RunPlanSearch(options, fake);
  ASSERT_TRUE(result.ok());
  const ConfigResult& c = result->configs[0];
  EXPECT_LE(c.goodput, 10);
  EXPECT_GT(c.goodput, 10 / 1.01);
  EXPECT_DOUBLE_EQ(c.above->share, 1.0);
}

TEST(PlanSearchTest, RefusedConfigurationsAreSkippedAndOtherErrorsEndTheSearch) {
  PlanSearchOptions options = Grid();
  FakeEvaluator fake(options.slo, Landscape);
  fake.unfit_tp = {1};
  fake.refuse = [](const PlanConfig& c) {
    return c.mode == ServingMode::kColocated && c.decode_tp == 8
               ? absl::InvalidArgumentError("no room for a sequence")
               : absl::OkStatus();
  };
  absl::StatusOr<PlanResult> result = RunPlanSearch(options, fake);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<size_t> ranking = result->Ranking();
  const ConfigResult& last = result->configs[ranking.back()];
  PlanConfig refused = Colocated(2, 8);
  refused.policy = options.space.policies.front();  // a shape is tried with the base knobs
  EXPECT_EQ(last.config, refused);
  EXPECT_EQ(last.skipped, "no room for a sequence");
  EXPECT_FALSE(last.Ranked());

  fake.refuse = [](const PlanConfig&) { return absl::InternalError("the simulator broke"); };
  result = RunPlanSearch(options, fake);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
}

TEST(PlanSearchTest, TheSameAnswersGiveTheSameSearch) {
  const PlanSearchOptions options = Grid();
  FakeEvaluator first(options.slo, Landscape), second(options.slo, Landscape);
  first.unfit_tp = second.unfit_tp = {1};
  ASSERT_TRUE(RunPlanSearch(options, first).ok());
  ASSERT_TRUE(RunPlanSearch(options, second).ok());
  ASSERT_EQ(first.probes.size(), second.probes.size());
  for (size_t i = 0; i < first.probes.size(); ++i) {
    EXPECT_EQ(first.probes[i].config, second.probes[i].config);
    EXPECT_EQ(first.probes[i].rate, second.probes[i].rate);
  }
}

TEST(PlanSearchTest, RejectsUnusableOptions) {
  FakeEvaluator fake(Slo(), Landscape);
  PlanSearchOptions options = Grid();
  options.slo = SloTarget{};  // no limit at all
  EXPECT_EQ(RunPlanSearch(options, fake).status().code(), absl::StatusCode::kInvalidArgument);
  options = Grid();
  options.space.chunk_sizes.clear();
  EXPECT_EQ(RunPlanSearch(options, fake).status().code(), absl::StatusCode::kInvalidArgument);
  options = Grid();
  options.space.speculative_tokens = {0, 17};
  EXPECT_EQ(RunPlanSearch(options, fake).status().code(), absl::StatusCode::kInvalidArgument);
  options.space.speculative_tokens.clear();
  EXPECT_EQ(RunPlanSearch(options, fake).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(fake.probes.empty());
}

}  // namespace
}  // namespace tandem::plan
