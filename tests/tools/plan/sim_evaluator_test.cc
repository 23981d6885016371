// tandem-plan through the real tandem-sim: the evaluator's probes (run length, screens, a model
// that does not fit) and one small whole search (8 H100s, Llama-3.1-8B, 200 requests).
#include "tools/plan/sim_evaluator.h"

#include <string>

#include "bench/serve/workload_flags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/plan/plan_report.h"
#include "tools/plan/plan_search.h"

namespace tandem::plan {
namespace {

using ::testing::HasSubstr;

const SloTarget kSlo{.ttft_s = 0.3, .tpot_s = 0.025, .percentile = 90};

std::vector<bench::BenchRequest> Dataset(int n) {
  bench::WorkloadFlags w;
  w.num_prompts = n;
  w.random_input_len = 1024;
  w.random_output_len = 64;
  w.random_range_ratio = 0.5;
  absl::StatusOr<std::vector<bench::BenchRequest>> dataset = bench::BuildDataset(w);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  return dataset.ok() ? *dataset : std::vector<bench::BenchRequest>{};
}

std::unique_ptr<SimEvaluator> Evaluator(sim::SimClusterOptions cluster, int n,
                                        double run_duration_s = 0) {
  absl::StatusOr<std::unique_ptr<SimEvaluator>> e = SimEvaluator::Create(
      {.cluster = cluster, .dataset = Dataset(n), .run_duration_s = run_duration_s, .slo = kSlo});
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *std::move(e) : nullptr;
}

TEST(PlanSimEvaluatorTest, ProbesSendTheRunsShareOfRequestsAtTheRate) {
  std::unique_ptr<SimEvaluator> e = Evaluator({}, 300, /*run_duration_s=*/10);
  ASSERT_NE(e, nullptr);
  absl::StatusOr<ProbeStats> full = e->Probe(Colocated(2, 1), 20, 1);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->requests, 200);  // 20 req/s for 10 s
  EXPECT_EQ(full->failed, 0);
  EXPECT_GT(full->ttft_s, 0);
  EXPECT_GT(full->tpot_s, 0);
  absl::StatusOr<ProbeStats> screen = e->Probe(Colocated(2, 1), 20, 0.25);
  ASSERT_TRUE(screen.ok());
  EXPECT_EQ(screen->requests, 50);
  EXPECT_EQ(screen->share, 0.25);
  absl::StatusOr<ProbeStats> more = e->Probe(Colocated(2, 1), 40, 1);  // wants 400 of 300
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->requests, 300);
  const SimEvaluatorStats stats = e->stats();
  EXPECT_EQ(stats.runs, 3);
  EXPECT_EQ(stats.requests, 550);
  EXPECT_EQ(stats.short_runs, 1);
}

TEST(PlanSimEvaluatorTest, AModelThatDoesNotFitIsRefused) {
  sim::SimClusterOptions cluster;
  cluster.model = "llama-3.1-70b";
  std::unique_ptr<SimEvaluator> e = Evaluator(cluster, 10);
  ASSERT_NE(e, nullptr);
  const absl::Status one = e->CheckTensorParallel(1);
  EXPECT_EQ(one.code(), absl::StatusCode::kFailedPrecondition) << one;
  EXPECT_TRUE(e->CheckTensorParallel(4).ok());
  EXPECT_EQ(SimEvaluator::Create({.dataset = {}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PlanSimEvaluatorTest, ClusterOptionsCarryThePoolsAndKnobs) {
  PlanConfig c = Disaggregated(3, 2, 4, 1);
  c.max_num_batched_tokens = 512;
  c.local_prefill_threshold = 256;
  c.policy = PlacementPolicy::kPrefixAware;
  const sim::SimClusterOptions o = SimEvaluator::ClusterOptions({}, c);
  EXPECT_EQ(o.mode, ServingMode::kDisaggregated);
  EXPECT_EQ(o.num_prefill, 3);
  EXPECT_EQ(o.prefill_tensor_parallel, 2);
  EXPECT_EQ(o.num_decode, 4);
  EXPECT_EQ(o.decode_tensor_parallel, 1);
  EXPECT_EQ(o.max_num_batched_tokens, 512);
  EXPECT_EQ(o.local_prefill_threshold, 256);
  EXPECT_EQ(o.policy, PlacementPolicy::kPrefixAware);
  const sim::SimClusterOptions colocated = SimEvaluator::ClusterOptions({}, Colocated(8, 1));
  EXPECT_EQ(colocated.mode, ServingMode::kColocated);
  EXPECT_EQ(colocated.num_prefill, 0);
  EXPECT_EQ(colocated.num_decode, 8);
  PlanConfig a = Auto(4, 2);
  a.local_prefill_threshold = 512;
  const sim::SimClusterOptions auto_mode = SimEvaluator::ClusterOptions({}, a);
  EXPECT_EQ(auto_mode.mode, ServingMode::kAuto);
  EXPECT_EQ(auto_mode.num_prefill, 0);
  EXPECT_EQ(auto_mode.num_decode, 4);
  EXPECT_EQ(auto_mode.decode_tensor_parallel, 2);
  EXPECT_EQ(auto_mode.local_prefill_threshold, 512);
  EXPECT_EQ(ShapeName(a), "auto 4 x TP2");
  EXPECT_EQ(ConfigName(a), "auto 4 x TP2, chunk 2048, threshold 512, least_loaded");
  a.num_speculative_tokens = 4;
  EXPECT_EQ(SimEvaluator::ClusterOptions({}, a).num_speculative_tokens, 4);
  EXPECT_EQ(ConfigName(a), "auto 4 x TP2, chunk 2048, threshold 512, least_loaded, 4 drafts");
}

PlanSearchOptions SmallSearch(int parallelism) {
  PlanSearchOptions o;
  o.slo = kSlo;
  o.space.gpus = 8;
  o.space.tensor_parallel = {1, 2};
  o.space.chunk_sizes = {512, 2048};
  o.space.local_prefill_thresholds = {0, 512};
  o.space.policies = {PlacementPolicy::kLeastLoaded, PlacementPolicy::kRoundRobin};
  o.top = 3;
  o.refine_shapes = 1;
  o.tolerance = 0.1;
  o.parallelism = parallelism;
  return o;
}

TEST(PlanSimEvaluatorTest, SmallSearchEndToEndIsSaneAndDeterministic) {
  std::unique_ptr<SimEvaluator> e = Evaluator({}, 200);
  ASSERT_NE(e, nullptr);
  absl::StatusOr<PlanResult> first = RunPlanSearch(SmallSearch(1), *e);
  ASSERT_TRUE(first.ok()) << first.status();
  bool colocated = false, disaggregated = false;
  for (const ConfigResult& c : first->configs) {
    EXPECT_TRUE(c.skipped.empty()) << ConfigName(c.config) << ": " << c.skipped;
    EXPECT_LE(c.config.Gpus(), 8);
    (c.config.mode == ServingMode::kColocated ? colocated : disaggregated) |= c.Ranked();
  }
  EXPECT_TRUE(colocated && disaggregated);
  const ConfigResult& best = first->configs[first->Ranking().front()];
  ASSERT_TRUE(best.Ranked());
  EXPECT_GT(best.goodput, 0);
  ASSERT_TRUE(best.passed.has_value() && best.above.has_value());
  EXPECT_LE(best.passed->ttft_s, kSlo.ttft_s);
  EXPECT_LE(best.passed->tpot_s, kSlo.tpot_s);
  EXPECT_GE(best.passed->attainment, 0.9 - 1e-9);
  EXPECT_NE(best.breaks_first, SloBreach::kNone);
  EXPECT_LE(best.above->rate, best.goodput * 1.1 + 1e-9);

  // The same search again, and on two threads: the same configurations, rates and report.
  const std::string report = FormatPlanReport(*first, kSlo, 3);
  EXPECT_THAT(report, HasSubstr("breaks first"));
  for (int parallelism : {1, 2}) {
    std::unique_ptr<SimEvaluator> again = Evaluator({}, 200);
    absl::StatusOr<PlanResult> second = RunPlanSearch(SmallSearch(parallelism), *again);
    ASSERT_TRUE(second.ok());
    EXPECT_EQ(PlanToJson(*second, kSlo).dump(), PlanToJson(*first, kSlo).dump());
    EXPECT_EQ(FormatPlanReport(*second, kSlo, 3), report);
  }
}

TEST(PlanSimEvaluatorTest, AutoShapesAreSearchedWhenAsked) {
  std::unique_ptr<SimEvaluator> e = Evaluator({}, 200);
  ASSERT_NE(e, nullptr);
  PlanSearchOptions o = SmallSearch(1);
  o.space.colocated = o.space.disaggregated = false;
  o.space.auto_mode = true;
  absl::StatusOr<PlanResult> result = RunPlanSearch(o, *e);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(result->configs.empty());
  bool threshold_searched = false;
  for (const ConfigResult& c : result->configs) {
    EXPECT_EQ(c.config.mode, ServingMode::kAuto) << ConfigName(c.config);
    EXPECT_EQ(c.config.num_prefill, 0);
    EXPECT_EQ(c.config.Gpus(), 8);
    EXPECT_TRUE(c.skipped.empty()) << ConfigName(c.config) << ": " << c.skipped;
    threshold_searched |= c.config.local_prefill_threshold == 512;
  }
  EXPECT_TRUE(threshold_searched);
  const ConfigResult& best = result->configs[result->Ranking().front()];
  ASSERT_TRUE(best.Ranked());
  EXPECT_GT(best.goodput, 0);
}

}  // namespace
}  // namespace tandem::plan
