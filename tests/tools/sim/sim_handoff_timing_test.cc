// tandem-sim's nodes do what the engine does between steps only between steps, as the engine
// drains its inbox and publishes its stats only there (common/engine/engine.cc, Loop): a
// disaggregated request's reservation and its KV completion that arrive during a decode step wait
// for the step to end (timing worked out by hand from the step time model), and a load report
// taken during a step shows the node as it was before the step.
#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "common/util/clock.h"
#include "gtest/gtest.h"
#include "tests/tools/sim/sim_test_requests.h"
#include "tools/sim/event_loop.h"
#include "tools/sim/sim_cluster.h"
#include "tools/sim/sim_node.h"

namespace tandem::sim {
namespace {

TEST(SimHandoffTimingTest, ReservationAndCompletionDuringADecodeStepWaitForItsEnd) {
  SimClusterOptions options;
  options.router_overhead_us = 0;
  options.hop_latency_us = 0;
  options.mode = ServingMode::kDisaggregated;
  options.num_prefill = 1;
  options.kv_link_gbps = 400;  // 50 bytes per ns
  options.kv_link_latency_us = 10;
  auto model = MakeStepTimeModel(options);
  ASSERT_TRUE(model.ok()) << model.status();
  // A (100-token prompt) alone: prefill, its 7 blocks over the link, the completion notice; then
  // it decodes on the decode node, step k over a context of 99 + k tokens.
  const double prefill = SimStepSeconds(*model, {{100, 0, true}});
  const int64_t bytes = 7 * model->KvBytesPerToken() * 16;
  const double transfer = std::ceil(static_cast<double>(bytes) / 50.0) * 1e-9 + 20e-6;
  const double a_first_token = prefill + transfer;
  std::vector<double> step_ends;  // A's decode steps' ends
  double t = a_first_token;
  for (int k = 1; k < 60; ++k) {
    t += SimStepSeconds(*model, {{1, 99 + k, true}});
    step_ends.push_back(t);
  }
  // B arrives in the middle of A's first decode step: its reservation waits for that step's end,
  // then B prefills (the prefill node is idle) and its KV crosses; the completion lands during a
  // later decode step of A and waits for its end, when B's first token goes out.
  const double b_arrival = (a_first_token + step_ends[0]) / 2;
  const double completion = step_ends[0] + prefill + transfer;
  double b_first_token = 0;
  for (double end : step_ends) {
    if (end >= completion) {
      b_first_token = end;
      break;
    }
  }
  ASSERT_GT(b_first_token, completion);  // it does land during a step
  auto run = RunSimulation(options, {SimTestRequest(100, 60, 1), SimTestRequest(100, 3, 2)},
                           {0.0, b_arrival});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_TRUE(run->results[0].success && run->results[1].success);
  EXPECT_NEAR(run->results[0].ttft_s, a_first_token, 1e-9);
  EXPECT_NEAR(run->results[1].ttft_s, b_first_token - b_arrival, 1e-9);
}

TEST(SimNodeLoadTest, AReportDuringAStepShowsTheNodeAsItWasBeforeTheStep) {
  auto model = MakeStepTimeModel(SimClusterOptions());
  ASSERT_TRUE(model.ok()) << model.status();
  ManualClock clock;
  EventLoop loop(&clock);
  SimNodeConfig config{.name = "decode-0", .model = &*model, .block_size = 16, .num_blocks = 1000};
  auto node = SimNode::Create(std::move(config), &loop, &clock,
                              SimNodeEvents{.on_token = [](uint64_t, int32_t, int64_t) {},
                                            .on_finished = [](uint64_t, bool) {}});
  ASSERT_TRUE(node.ok()) << node.status();
  (*node)->Submit(1, SimTestRequest(160, 3, 1).prompt_ids, 3);
  const int64_t prefill = std::llround(SimStepSeconds(*model, {{160, 0, true}}) * 1e9);
  loop.Run(prefill / 2);  // the prefill step has started (its 10 blocks taken), not ended
  const SimNodeLoad during = (*node)->Load();
  EXPECT_EQ(during.num_free_kv_blocks, 1000);
  EXPECT_EQ(during.num_waiting, 1);
  EXPECT_EQ(during.num_running, 0);
  EXPECT_EQ(during.num_queued_tokens, 160);
  loop.Run(prefill);  // its end: published before the next step is scheduled
  const SimNodeLoad after = (*node)->Load();
  EXPECT_EQ(after.num_free_kv_blocks, 990);
  EXPECT_EQ(after.num_waiting, 0);
  EXPECT_EQ(after.num_running, 1);
  EXPECT_EQ(after.num_queued_tokens, 0);
}

// A local prompt that needs blocks a reservation holds while its KV arrives waits for them, as
// the engine's queue head does (Engine::QueueHeadMayWaitForHeldBlocks); it used to fail.
TEST(SimNodeHeldBlocksTest, ALocalPromptWaitsForTheBlocksAReservationHolds) {
  auto model = MakeStepTimeModel(SimClusterOptions());
  ASSERT_TRUE(model.ok()) << model.status();
  ManualClock clock;
  EventLoop loop(&clock);
  SimNodeConfig config{.name = "decode-0", .model = &*model, .block_size = 16, .num_blocks = 20};
  std::map<uint64_t, bool> finished;
  bool reserved = false;
  auto node = SimNode::Create(
      std::move(config), &loop, &clock,
      SimNodeEvents{.on_token = [](uint64_t, int32_t, int64_t) {},
                    .on_finished = [&](uint64_t key, bool ok) { finished[key] = ok; },
                    .on_reserved = [&](uint64_t, int32_t) { reserved = true; }});
  ASSERT_TRUE(node.ok()) << node.status();
  (*node)->Reserve(1, SimTestRequest(239, 3, 1).prompt_ids, 3);  // 15 of the 20 blocks
  loop.Run(1'000'000);
  ASSERT_TRUE(reserved);
  (*node)->Submit(2, SimTestRequest(160, 3, 2).prompt_ids, 3);  // 10 blocks: 5 are free
  loop.Run(1'000'000'000);
  EXPECT_FALSE(finished.contains(2));
  EXPECT_EQ((*node)->Load().num_waiting, 1);
  (*node)->CompleteImport(1);
  loop.Run(2'000'000'000);
  EXPECT_TRUE(finished[1]);
  ASSERT_TRUE(finished.contains(2));
  EXPECT_TRUE(finished[2]);
}

}  // namespace
}  // namespace tandem::sim
