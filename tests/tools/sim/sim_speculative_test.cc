// Speculative decoding in tandem-sim (SimNodeConfig::num_speculative_tokens): a verification step
// is priced with its drafts and yields the accepted ones and one token more, all at its end; the
// acceptance follows the i.i.d. model (position i accepted with probability rate^(i+1)).
#include <cmath>
#include <vector>

#include "bench/serve/arrivals.h"
#include "bench/serve/datasets.h"
#include "gtest/gtest.h"
#include "tests/tools/sim/sim_test_requests.h"
#include "tools/sim/sim_cluster.h"

namespace tandem::sim {
namespace {

SimClusterOptions Speculating(int drafts, double rate) {
  SimClusterOptions o;
  o.router_overhead_us = 0;
  o.hop_latency_us = 0;
  o.num_speculative_tokens = drafts;
  o.spec_acceptance_rate = rate;
  return o;
}

// Every draft right: the prefill step gives token 1, then each step 4 drafts and its own token.
TEST(SimSpeculativeTest, AStepOfRightDraftsYieldsThemAllAndOneMore) {
  const SimClusterOptions options = Speculating(4, 1.0);
  auto model = MakeStepTimeModel(options);
  ASSERT_TRUE(model.ok()) << model.status();
  auto run = RunSimulation(options, {SimTestRequest(100, 11)}, {0.0});
  ASSERT_TRUE(run.ok()) << run.status();
  const bench::RequestResult& r = run->results[0];
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.output_tokens, 11);
  const double prefill = SimStepSeconds(*model, {{100, 0, true}});
  const double verify1 = SimStepSeconds(*model, {{5, 100, true, 5}});
  const double verify2 = SimStepSeconds(*model, {{5, 105, true, 5}});
  EXPECT_NEAR(r.ttft_s, prefill, 1e-9);
  EXPECT_NEAR(r.e2e_s, prefill + verify1 + verify2, 1e-9);
  // One inter-token sample per token: a step's first token waited for the step, the rest none.
  ASSERT_EQ(r.itl_s.size(), 10u);
  EXPECT_NEAR(r.itl_s[0], verify1, 1e-9);
  EXPECT_EQ(r.itl_s[1], 0.0);
  EXPECT_NEAR(r.itl_s[5], verify2, 1e-9);
  EXPECT_EQ(run->stats.steps, 3);
  EXPECT_EQ(run->stats.spec_verifications, 2);
  EXPECT_EQ(run->stats.spec_draft_tokens, 8);
  EXPECT_EQ(run->stats.spec_accepted_tokens, 8);
}

// Every draft wrong: as many steps as without speculation, each dearer by its drafts.
TEST(SimSpeculativeTest, WrongDraftsCostComputeAndYieldNothing) {
  auto plain = RunSimulation(Speculating(0, 0.0), {SimTestRequest(100, 6)}, {0.0});
  auto wrong = RunSimulation(Speculating(3, 0.0), {SimTestRequest(100, 6)}, {0.0});
  ASSERT_TRUE(plain.ok() && wrong.ok());
  ASSERT_TRUE(wrong->results[0].success) << wrong->results[0].error;
  EXPECT_EQ(wrong->results[0].output_tokens, 6);
  EXPECT_EQ(wrong->stats.steps, plain->stats.steps);
  EXPECT_EQ(wrong->stats.spec_accepted_tokens, 0);
  EXPECT_GT(wrong->stats.spec_draft_tokens, 0);
  EXPECT_GT(wrong->results[0].e2e_s, plain->results[0].e2e_s);
}

// Many long requests at a rate of 0.6: tokens per verification 1 + 0.6 + 0.36 + 0.216 with three
// drafts (a little less where max_tokens caps the last steps' drafts); fewer steps (the batch's
// steps: about 300 / 2.2); the same tokens.
TEST(SimSpeculativeTest, AcceptanceFollowsTheRatePerPosition) {
  std::vector<bench::BenchRequest> requests;
  std::vector<double> arrivals;
  for (int i = 0; i < 40; ++i) {
    requests.push_back(SimTestRequest(200, 300, i));
    arrivals.push_back(0.0);  // one batch: its steps are the longest request's
  }
  auto plain = RunSimulation(Speculating(0, 0.6), requests, arrivals);
  auto spec = RunSimulation(Speculating(3, 0.6), requests, arrivals);
  ASSERT_TRUE(plain.ok() && spec.ok());
  int64_t plain_tokens = 0, spec_tokens = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(spec->results[i].success) << spec->results[i].error;
    plain_tokens += plain->results[i].output_tokens;
    spec_tokens += spec->results[i].output_tokens;
  }
  EXPECT_EQ(spec_tokens, plain_tokens);
  const double per_verification = 1.0 + static_cast<double>(spec->stats.spec_accepted_tokens) /
                                            static_cast<double>(spec->stats.spec_verifications);
  EXPECT_NEAR(per_verification, 1 + 0.6 + 0.36 + 0.216, 0.05);
  EXPECT_LT(spec->stats.steps, plain->stats.steps * 2 / 3);
}

// A draft model's passes join each verification step, as the engine's DraftModel runs them: one
// catch-up pass over the context its KV lacks (all of it the first time), then one pass of one
// token per further draft; its KV then holds the context up to the last draft it was fed, cut
// back to the accepted ones.
TEST(SimSpeculativeTest, ADraftModelsPassesAreAddedToEachStep) {
  SimClusterOptions options = Speculating(4, 1.0);
  options.draft_model = "llama-3.2-1b";
  auto model = MakeStepTimeModel(options);
  auto draft = MakeDraftStepTimeModel(options);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(draft.ok()) << draft.status();
  ASSERT_TRUE(draft->has_value());
  const StepTimeModel& d = **draft;
  auto run = RunSimulation(options, {SimTestRequest(100, 11)}, {0.0});
  ASSERT_TRUE(run.ok()) << run.status();
  const bench::RequestResult& r = run->results[0];
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.output_tokens, 11);
  const double prefill = SimStepSeconds(*model, {{100, 0, true}});
  // Step 2: 101 real tokens; the draft catches up on all of them and is fed drafts 1-3.
  const double step2 = SimStepSeconds(*model, {{5, 100, true, 5}}) +
                       SimStepSeconds(d, {{101, 0, true}}) + SimStepSeconds(d, {{1, 101, true}}) +
                       SimStepSeconds(d, {{1, 102, true}}) + SimStepSeconds(d, {{1, 103, true}});
  // All 4 accepted: the draft holds 104 positions; with the step's own token there are 106.
  const double step3 = SimStepSeconds(*model, {{5, 105, true, 5}}) +
                       SimStepSeconds(d, {{2, 104, true}}) + SimStepSeconds(d, {{1, 106, true}}) +
                       SimStepSeconds(d, {{1, 107, true}}) + SimStepSeconds(d, {{1, 108, true}});
  EXPECT_NEAR(r.ttft_s, prefill, 1e-9);
  EXPECT_NEAR(r.e2e_s, prefill + step2 + step3, 1e-8);
  EXPECT_EQ(run->stats.draft_passes, 8);
  EXPECT_NEAR(run->stats.draft_busy_s,
              step2 + step3 - SimStepSeconds(*model, {{5, 100, true, 5}}) -
                  SimStepSeconds(*model, {{5, 105, true, 5}}),
              1e-8);
}

// The draft's weights and KV share the decode GPUs: fewer blocks for the target's KV.
TEST(SimSpeculativeTest, ADraftModelTakesItsWeightsAndKvFromThePool) {
  SimClusterOptions options = Speculating(3, 0.7);
  auto plain = RunSimulation(options, {SimTestRequest(100, 4)}, {0.0});
  options.draft_model = "llama-3.2-1b";
  auto drafted = RunSimulation(options, {SimTestRequest(100, 4)}, {0.0});
  ASSERT_TRUE(plain.ok() && drafted.ok());
  auto model = MakeStepTimeModel(options);
  auto draft = MakeDraftStepTimeModel(options);
  ASSERT_TRUE(model.ok() && draft.ok() && draft->has_value());
  auto kv = model->KvCacheBytes(options.memory_utilization);
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(plain->stats.decode_kv_blocks, *kv / (model->KvBytesPerToken() * 16));
  EXPECT_EQ(drafted->stats.decode_kv_blocks,
            (*kv - (*draft)->WeightBytes()) /
                ((model->KvBytesPerToken() + (*draft)->KvBytesPerToken()) * 16));
  EXPECT_LT(drafted->stats.decode_kv_blocks, plain->stats.decode_kv_blocks * 9 / 10);
  // Without speculation the draft model is not loaded.
  options.num_speculative_tokens = 0;
  auto none = MakeDraftStepTimeModel(options);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  options.num_speculative_tokens = 3;
  options.draft_model = "no-such-model";
  EXPECT_FALSE(RunSimulation(options, {SimTestRequest(10, 2)}, {0.0}).ok());
}

TEST(SimSpeculativeTest, BadSpeculationOptionsAreRefused) {
  auto too_many = RunSimulation(Speculating(17, 0.5), {SimTestRequest(10, 2)}, {0.0});
  EXPECT_FALSE(too_many.ok());
  auto bad_rate = RunSimulation(Speculating(2, 1.5), {SimTestRequest(10, 2)}, {0.0});
  EXPECT_FALSE(bad_rate.ok());
}

}  // namespace
}  // namespace tandem::sim
