// Runs of decode steps stepped over in one jump: the plan prices each step exactly as the step's
// chunks would be priced and stops where the batch changes; and whole simulations with jumps give
// the very same results as with every step its own event (colocated, with preemptions, and
// disaggregated with local prefill and prefix-aware placement).
#include "tools/sim/decode_run.h"

#include <memory>
#include <random>
#include <vector>

#include "common/backend/sim/gpu_spec.h"
#include "common/backend/sim/sim_model_presets.h"
#include "common/sampling/sampling_params.h"
#include "gtest/gtest.h"
#include "tools/sim/sim_cluster.h"

namespace tandem::sim {
namespace {

StepTimeModel Llama8bOnH100() {
  absl::StatusOr<GpuSpec> gpu = FindGpuSpec("h100");
  absl::StatusOr<ModelConfig> model = SimModelPreset("llama-3.1-8b");
  EXPECT_TRUE(gpu.ok() && model.ok());
  absl::StatusOr<StepTimeModel> m = StepTimeModel::Create(*gpu, *model, 1);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

// A sequence that has produced `output` of `max_tokens` tokens and decodes next: its blocks hold
// every token but the last, whose KV the next step computes.
std::unique_ptr<Sequence> Decoding(RequestId id, int32_t prompt_len, int32_t output,
                                   int32_t max_tokens, BlockManager* blocks) {
  SamplingParams params;
  params.max_tokens = max_tokens;
  std::vector<TokenId> prompt;
  for (int32_t i = 0; i < prompt_len; ++i)
    prompt.push_back(1000 + static_cast<TokenId>(id) * 100 + i);
  auto seq = std::make_unique<Sequence>(id, prompt, params, 0, prompt_len + max_tokens);
  for (int32_t i = 0; i < output; ++i) seq->tokens.push_back(5000 + i);
  std::vector<TokenId> computed(seq->tokens.begin(), seq->tokens.end() - 1);
  EXPECT_TRUE(blocks->Allocate(computed, &seq->block_table).has_value());
  seq->num_computed_tokens = seq->num_tokens() - 1;
  return seq;
}

TEST(DecodeRunTest, StepsUntilTheFirstSequenceEndsEachPricedAsItsChunks) {
  const StepTimeModel model = Llama8bOnH100();
  BlockManager blocks(1000, 16, true);
  auto a = Decoding(1, 100, 1, 10, &blocks);  // 9 more tokens
  auto b = Decoding(2, 37, 3, 8, &blocks);    // 5 more
  std::vector<Sequence*> running = {a.get(), b.get()};
  const DecodeRunPlan plan = PlanDecodeRun(running, blocks, model, 100000, 1000);
  ASSERT_EQ(plan.step_nanos.size(), 5u);
  for (int k = 0; k < 5; ++k) {
    const std::vector<SimStepItem> items = {{1, a->num_computed_tokens + k, true},
                                            {1, b->num_computed_tokens + k, true}};
    EXPECT_EQ(plan.step_nanos[k], StepNanos(model.Time(items))) << "step " << k;
  }
  // The context limit ends a run too, and so does the cap.
  EXPECT_EQ(PlanDecodeRun(running, blocks, model, a->num_tokens() + 2, 1000).step_nanos.size(), 2u);
  EXPECT_EQ(PlanDecodeRun(running, blocks, model, 100000, 3).step_nanos.size(), 3u);
}

TEST(DecodeRunTest, RunStopsBeforeTheFreeBlocksRunOut) {
  const StepTimeModel model = Llama8bOnH100();
  BlockManager blocks(4, 16, true);
  // 16 computed tokens fill block 0; the next token needs a slot in a new block, and every 16
  // after that another.
  auto a = Decoding(1, 16, 1, 1000, &blocks);
  ASSERT_EQ(blocks.num_free_blocks(), 3);
  std::vector<Sequence*> running = {a.get()};
  // Three free blocks hold slots for positions 16..63: 48 steps.
  EXPECT_EQ(PlanDecodeRun(running, blocks, model, 100000, 1000).step_nanos.size(), 48u);
  BlockManager full(1, 16, true);
  auto b = Decoding(2, 16, 1, 1000, &full);
  std::vector<Sequence*> stuck = {b.get()};
  EXPECT_TRUE(PlanDecodeRun(stuck, full, model, 100000, 1000).step_nanos.empty());
}

// Requests with random lengths arriving as a Poisson process; prompts share prefixes in groups.
struct DecodeWorkload {
  std::vector<bench::BenchRequest> requests;
  std::vector<double> arrivals;
};

DecodeWorkload RandomWorkload(int n, double rate, uint32_t seed) {
  DecodeWorkload w;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> prompt_len(40, 700), output_len(1, 300);
  std::exponential_distribution<double> gap(rate);
  double t = 0;
  for (int i = 0; i < n; ++i) {
    bench::BenchRequest r;
    const int group = i % 5;
    r.prompt_len = prompt_len(rng);
    for (int32_t j = 0; j < r.prompt_len; ++j) {
      r.prompt_ids.push_back(j < 64 ? 2000 + group * 64 + j : 1000 + (i * 7919 + j * 31) % 9000);
    }
    r.output_len = output_len(rng);
    w.requests.push_back(std::move(r));
    w.arrivals.push_back(t += gap(rng));
  }
  return w;
}

// `min_jumped`: the least share of steps the jumps must hold (a run that never jumps tests
// nothing).
void ExpectSameRunWithAndWithoutJumps(SimClusterOptions options, const DecodeWorkload& w,
                                      double min_jumped = 0.25) {
  options.step_jumps = false;
  absl::StatusOr<SimRun> stepwise = RunSimulation(options, w.requests, w.arrivals);
  options.step_jumps = true;
  absl::StatusOr<SimRun> jumped = RunSimulation(options, w.requests, w.arrivals);
  ASSERT_TRUE(stepwise.ok()) << stepwise.status();
  ASSERT_TRUE(jumped.ok()) << jumped.status();
  EXPECT_EQ(stepwise->stats.jumped_steps, 0);
  EXPECT_GT(jumped->stats.jumped_steps, min_jumped * stepwise->stats.steps);
  EXPECT_LT(jumped->stats.events, stepwise->stats.events);
  EXPECT_EQ(jumped->stats.steps, stepwise->stats.steps);
  EXPECT_EQ(jumped->stats.preemptions, stepwise->stats.preemptions);
  EXPECT_EQ(jumped->stats.kv_bytes, stepwise->stats.kv_bytes);
  ASSERT_EQ(jumped->results.size(), stepwise->results.size());
  for (size_t i = 0; i < jumped->results.size(); ++i) {
    const bench::RequestResult& a = stepwise->results[i];
    const bench::RequestResult& b = jumped->results[i];
    ASSERT_EQ(a.success, b.success) << "request " << i;
    ASSERT_EQ(a.error, b.error) << "request " << i;
    ASSERT_EQ(a.output_tokens, b.output_tokens) << "request " << i;
    // Bit for bit: every time is a whole number of nanoseconds on both sides.
    ASSERT_EQ(a.ttft_s, b.ttft_s) << "request " << i;
    ASSERT_EQ(a.e2e_s, b.e2e_s) << "request " << i;
    ASSERT_EQ(a.itl_s, b.itl_s) << "request " << i;
  }
}

TEST(DecodeRunTest, ColocatedRunIsTheSameWithJumps) {
  SimClusterOptions options;
  options.num_decode = 3;
  options.load_poll_ms = 50;
  ExpectSameRunWithAndWithoutJumps(options, RandomWorkload(400, 40, 1));
}

TEST(DecodeRunTest, RunWithPreemptionsIsTheSameWithJumps) {
  SimClusterOptions options;
  options.num_decode = 2;
  options.num_kv_blocks = 120;  // 1,920 tokens a node: sequences are preempted
  options.policy = PlacementPolicy::kRoundRobin;
  const DecodeWorkload w = RandomWorkload(150, 20, 2);
  options.step_jumps = false;
  absl::StatusOr<SimRun> run = RunSimulation(options, w.requests, w.arrivals);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_GT(run->stats.preemptions, 0);
  // The preempted wait, and while anything waits nothing jumps.
  ExpectSameRunWithAndWithoutJumps(options, w, 0.03);
}

TEST(DecodeRunTest, DisaggregatedRunIsTheSameWithJumps) {
  SimClusterOptions options;
  options.mode = ServingMode::kDisaggregated;
  options.num_prefill = 1;
  options.num_decode = 2;
  options.local_prefill_threshold = 128;
  options.policy = PlacementPolicy::kPrefixAware;
  options.load_poll_ms = 20;
  options.kv_link_gbps = 25;
  ExpectSameRunWithAndWithoutJumps(options, RandomWorkload(400, 30, 3));
}

TEST(DecodeRunTest, RunWithNodesKilledIsTheSameWithJumps) {
  SimClusterOptions options;
  options.mode = ServingMode::kDisaggregated;
  options.num_prefill = 1;
  options.num_decode = 3;
  options.load_poll_ms = 30;
  options.faults.kill_random_node_every_s = 1.5;
  options.faults.node_restart_s = 1;
  ExpectSameRunWithAndWithoutJumps(options, RandomWorkload(400, 40, 4));
}

}  // namespace
}  // namespace tandem::sim
