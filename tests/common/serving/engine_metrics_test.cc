// NodeEngineMetrics over a real engine (FakeBackend): step histograms fed by on_step agree with
// the engine's own counters, scrape-time gauges and counters read Stats(), and promtool accepts
// the text.
#include "common/serving/engine_metrics.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/engine/engine.h"
#include "common/metrics/prometheus_text.h"
#include "gtest/gtest.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"
#include "tests/common/serving/metrics_scrape.h"
#include "tests/common/serving/promtool_check.h"

namespace tandem {
namespace {

constexpr char kPrefix[] = "tandem_test";

std::string Name(const std::string& suffix) { return std::string(kPrefix) + "_" + suffix; }

using ::tandem::testing::Scrape;

struct ObservedEngine {
  explicit ObservedEngine(int max_num_batched_tokens = 2048, int num_blocks = 64)
      : backend(kVocab, num_blocks, 4) {
    EngineOptions options;
    options.scheduler.max_num_batched_tokens = max_num_batched_tokens;
    options.scheduler.max_num_seqs = std::min(32, max_num_batched_tokens);
    options.on_step = [this](const EngineStepStats& s) { metrics.ObserveStep(s); };
    auto created = Engine::Create(&backend, options);
    EXPECT_TRUE(created.ok()) << created.status();
    engine = *std::move(created);
    metrics.SetEngine(engine.get());
  }
  FakeBackend backend;
  NodeEngineMetrics metrics{kPrefix};
  std::unique_ptr<Engine> engine;
};

TEST(NodeEngineMetricsTest, StepHistogramsMatchTheEnginesCounters) {
  ObservedEngine e(/*max_num_batched_tokens=*/4);
  // 10 prompt tokens in 3 chunks, then 5 decodes; twice (the second one hits the prefix cache).
  std::vector<GenerationResult> results;
  results.push_back(RunOne(*e.engine, GreedyRequest(MakePrompt(10, 1), 6)));
  results.push_back(RunOne(*e.engine, GreedyRequest(MakePrompt(10, 1), 6)));
  PrometheusText scrape = Scrape(e.metrics);

  const EngineStats stats = e.engine->Stats();
  EXPECT_EQ(scrape.Value(Name("steps_total")), stats.num_steps);
  EXPECT_EQ(scrape.Sum(Name("step_duration_seconds_count")), stats.num_steps);
  EXPECT_EQ(scrape.Sum(Name("step_batch_size_count")), stats.num_steps);
  EXPECT_EQ(scrape.Sum(Name("step_tokens_count")), stats.num_steps);
  EXPECT_EQ(scrape.Sum(Name("step_tokens_sum")), stats.num_batched_tokens);
  EXPECT_EQ(scrape.Value(Name("computed_tokens_total")), stats.num_batched_tokens);
  // First run: 3 prefill steps (4 + 4 + 2 tokens). Second: 8 cached tokens, 1 step of 2.
  EXPECT_EQ(scrape.Value(Name("step_tokens_count"), {{"phase", "prefill"}}), 4);
  EXPECT_EQ(scrape.Value(Name("step_tokens_sum"), {{"phase", "prefill"}}), 12);
  EXPECT_EQ(scrape.Value(Name("step_tokens_count"), {{"phase", "decode"}}), 10);
  EXPECT_EQ(scrape.Value(Name("step_tokens_count"), {{"phase", "mixed"}}), 0);
  EXPECT_EQ(scrape.Value(Name("step_batch_size_sum"), {{"phase", "decode"}}), 10);
  // Batch sizes of 1 fall in the le="1" bucket.
  EXPECT_EQ(scrape.Value(Name("step_batch_size_bucket"), {{"phase", "decode"}, {"le", "1"}}), 10);
  EXPECT_EQ(scrape.Value(Name("step_failures_total")), 0);

  int completion_tokens = 0;
  for (const GenerationResult& r : results) completion_tokens += r.usage.completion_tokens;
  EXPECT_EQ(scrape.Value(Name("generated_tokens_total")), completion_tokens);
  EXPECT_EQ(scrape.Value(Name("prefix_cache_hit_tokens_total")), 8);
  EXPECT_EQ(scrape.Value(Name("prefix_cache_hit_tokens_total")), stats.prefix_cache_hits);
  EXPECT_EQ(scrape.Value(Name("prefix_cache_queried_tokens_total")), stats.prefix_cache_queries);
  EXPECT_EQ(scrape.Value(Name("finished_requests_total")), 2);
  EXPECT_EQ(scrape.Value(Name("preemptions_total")), 0);
  // Idle: nothing runs, no block is held.
  EXPECT_EQ(scrape.Value(Name("running_sequences")), 0);
  EXPECT_EQ(scrape.Value(Name("waiting_sequences")), 0);
  EXPECT_EQ(scrape.Value(Name("kv_blocks")), 64);
  EXPECT_EQ(scrape.Value(Name("kv_blocks_free")), 64);
  EXPECT_EQ(scrape.Value(Name("kv_blocks_used")), 0);
  EXPECT_EQ(scrape.Value(Name("queued_prompt_tokens")), 0);
}

TEST(NodeEngineMetricsTest, GaugesShowBlocksHeldByAReservation) {
  RequestStream stream;  // outlives the engine, which ends the reservation when it stops
  ObservedEngine e(/*max_num_batched_tokens=*/4, /*num_blocks=*/16);
  ASSERT_TRUE(e.engine->Submit(GreedyRequest(MakePrompt(10, 2), 3)).ok());
  ASSERT_TRUE(e.engine->Submit(GreedyRequest(MakePrompt(6, 3), 3)).ok());
  GenerateRequest reserved = GreedyRequest(MakePrompt(9, 4), 3);
  reserved.on_event = stream.Callback();
  ASSERT_TRUE(e.engine->Reserve(std::move(reserved), absl::Seconds(30), nullptr).ok());
  ASSERT_TRUE(e.engine->RunUntilIdle().ok());
  PrometheusText scrape = Scrape(e.metrics);
  // The reservation's 3 blocks stay held while its KV is awaited.
  EXPECT_EQ(scrape.Value(Name("kv_blocks_used")), 3);
  EXPECT_EQ(scrape.Value(Name("kv_blocks_free")), 13);
  EXPECT_EQ(scrape.Value(Name("running_sequences")), 0);
  EXPECT_EQ(scrape.Value(Name("finished_requests_total")), 2);
}

TEST(NodeEngineMetricsTest, FailedStepsAreCountedAndObserved) {
  ObservedEngine e;
  e.backend.FailNextForward(absl::InternalError("injected"));
  ASSERT_TRUE(e.engine->Submit(GreedyRequest(MakePrompt(5, 1), 2)).ok());
  EXPECT_FALSE(e.engine->RunUntilIdle().ok());
  PrometheusText scrape = Scrape(e.metrics);
  EXPECT_EQ(scrape.Value(Name("step_failures_total")), 1);
  EXPECT_EQ(scrape.Value(Name("steps_total")), 1);
  EXPECT_EQ(scrape.Sum(Name("step_duration_seconds_count")), 1);
}

TEST(NodeEngineMetricsTest, PhasesOfMixedSteps) {
  NodeEngineMetrics metrics(kPrefix);
  EngineStepStats mixed;
  mixed.num_prefill_seqs = 2;
  mixed.num_prefill_tokens = 100;
  mixed.num_decode_seqs = 3;
  mixed.num_decode_tokens = 3;
  mixed.duration_nanos = 20'000'000;
  EXPECT_STREQ(StepPhaseName(mixed), "mixed");
  metrics.ObserveStep(mixed);
  PrometheusText scrape = Scrape(metrics);
  EXPECT_EQ(scrape.Value(Name("step_batch_size_sum"), {{"phase", "mixed"}}), 5);
  EXPECT_EQ(scrape.Value(Name("step_tokens_sum"), {{"phase", "mixed"}}), 103);
  EXPECT_DOUBLE_EQ(*scrape.Value(Name("step_duration_seconds_sum"), {{"phase", "mixed"}}), 0.02);
  EXPECT_EQ(
      scrape.Value(Name("step_duration_seconds_bucket"), {{"phase", "mixed"}, {"le", "0.015"}}), 0);
  EXPECT_EQ(
      scrape.Value(Name("step_duration_seconds_bucket"), {{"phase", "mixed"}, {"le", "0.02"}}), 1);
  // Without an engine there are no scrape-time families.
  EXPECT_FALSE(scrape.Has(Name("running_sequences")));
}

TEST(NodeEngineMetricsTest, EveryFamilyHasHelpAndPromtoolAcceptsTheText) {
  ObservedEngine e;
  RunOne(*e.engine, GreedyRequest(MakePrompt(7, 1), 3));
  const std::string text = MetricsText({&e.metrics});
  auto parsed = PrometheusText::Parse(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  for (const char* family :
       {"step_duration_seconds", "step_batch_size", "step_tokens", "step_failures_total",
        "waiting_sequences", "running_sequences", "kv_blocks", "kv_blocks_free", "kv_blocks_used",
        "queued_prompt_tokens", "steps_total", "computed_tokens_total", "generated_tokens_total",
        "prefix_cache_queried_tokens_total", "prefix_cache_hit_tokens_total", "preemptions_total",
        "finished_requests_total"}) {
    EXPECT_NE(parsed->Help(Name(family)), "") << family;
    EXPECT_NE(parsed->Type(Name(family)), "") << family;
  }
  EXPECT_EQ(parsed->Type(Name("steps_total")), "counter");
  EXPECT_EQ(parsed->Type(Name("running_sequences")), "gauge");
  EXPECT_EQ(parsed->Type(Name("step_tokens")), "histogram");
  EXPECT_EQ(testing::PromtoolProblems(text), "");
}

TEST(PrometheusTextTest, ParsesLabelsEscapesAndSpecialValues) {
  auto parsed = PrometheusText::Parse(
      "# HELP a_total Things.\n# TYPE a_total counter\na_total{x=\"1\",y=\"q\\\"uote\"} 3\n"
      "b_bucket{le=\"+Inf\"} 7 1700000000\nc NaN\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Value("a_total", {{"x", "1"}, {"y", "q\"uote"}}), 3);
  EXPECT_EQ(parsed->Sum("a_total", {{"x", "1"}}), 3);
  EXPECT_EQ(parsed->Value("a_total"), std::nullopt);  // labels must match exactly
  EXPECT_EQ(parsed->Value("b_bucket", {{"le", "+Inf"}}), 7);
  EXPECT_TRUE(parsed->Has("c"));
  EXPECT_EQ(parsed->Help("a_total"), "Things.");
  EXPECT_EQ(parsed->Type("a_total"), "counter");
  EXPECT_FALSE(PrometheusText::Parse("broken{x=1} 2\n").ok());
  EXPECT_FALSE(PrometheusText::Parse("name not_a_number\n").ok());
}

}  // namespace
}  // namespace tandem
