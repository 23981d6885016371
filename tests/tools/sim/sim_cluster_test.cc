// tandem-sim end to end on small cases whose timing is worked out by hand from the step time
// model (one request; a second arriving during the first's prefill, which waits for the step to
// end and then shares a mixed step), placement with stale load reports, and determinism.
#include "tools/sim/sim_cluster.h"

#include <cmath>
#include <vector>

#include "bench/serve/arrivals.h"
#include "bench/serve/datasets.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/sim/sim_test_requests.h"

namespace tandem::sim {
namespace {

// Exact step times: no router or network cost.
SimClusterOptions Exact() {
  SimClusterOptions o;
  o.router_overhead_us = 0;
  o.hop_latency_us = 0;
  return o;
}

TEST(SimClusterTest, OneRequestIsAPrefillThenOneDecodeStepPerToken) {
  const SimClusterOptions options = Exact();
  auto model = MakeStepTimeModel(options);
  ASSERT_TRUE(model.ok()) << model.status();
  auto run = RunSimulation(options, {SimTestRequest(100, 3)}, {0.0});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->results.size(), 1u);
  const bench::RequestResult& r = run->results[0];
  ASSERT_TRUE(r.success) << r.error;
  const double prefill = SimStepSeconds(*model, {{100, 0, true}});
  const double decode1 = SimStepSeconds(*model, {{1, 100, true}});
  const double decode2 = SimStepSeconds(*model, {{1, 101, true}});
  EXPECT_NEAR(r.ttft_s, prefill, 1e-9);
  EXPECT_NEAR(r.e2e_s, prefill + decode1 + decode2, 1e-9);
  ASSERT_EQ(r.itl_s.size(), 2u);
  EXPECT_NEAR(r.itl_s[0], decode1, 1e-9);
  EXPECT_NEAR(r.itl_s[1], decode2, 1e-9);
  EXPECT_EQ(r.output_tokens, 3);
  EXPECT_EQ(run->stats.steps, 3);
}

TEST(SimClusterTest, ARequestArrivingDuringAStepWaitsForItThenSharesAMixedStep) {
  const SimClusterOptions options = Exact();
  auto model = MakeStepTimeModel(options);
  ASSERT_TRUE(model.ok());
  const double prefill0 = SimStepSeconds(*model, {{512, 0, true}});
  const double arrival1 = prefill0 / 2;  // during the first prefill
  auto run = RunSimulation(options, {SimTestRequest(512, 2, 1), SimTestRequest(256, 2, 2)},
                           {0.0, arrival1});
  ASSERT_TRUE(run.ok()) << run.status();
  const bench::RequestResult& first = run->results[0];
  const bench::RequestResult& second = run->results[1];
  ASSERT_TRUE(first.success && second.success);
  // Step 2: the first request's decode and the second's whole prefill (decodes come first).
  const double mixed = SimStepSeconds(*model, {{1, 512, true}, {256, 0, true}});
  // Step 3: the first request has its 2 tokens and is gone; the second decodes alone.
  const double alone = SimStepSeconds(*model, {{1, 256, true}});
  EXPECT_NEAR(first.ttft_s, prefill0, 1e-9);
  EXPECT_NEAR(first.e2e_s, prefill0 + mixed, 1e-9);
  EXPECT_NEAR(second.ttft_s, prefill0 - arrival1 + mixed, 1e-9);
  EXPECT_NEAR(second.e2e_s, prefill0 - arrival1 + mixed + alone, 1e-9);
}

TEST(SimClusterTest, RouterAndNetworkCostsAddToEveryToken) {
  SimClusterOptions options;
  options.router_overhead_us = 750;
  options.hop_latency_us = 50;
  auto model = MakeStepTimeModel(options);
  ASSERT_TRUE(model.ok());
  auto run = RunSimulation(options, {SimTestRequest(64, 2)}, {1.0});
  ASSERT_TRUE(run.ok());
  const bench::RequestResult& r = run->results[0];
  // In: client → router (50 µs), the router's half (375 µs), router → node (50 µs); out the same.
  const double prefill = SimStepSeconds(*model, {{64, 0, true}});
  EXPECT_NEAR(r.start_s, 1.0, 1e-12);
  EXPECT_NEAR(r.ttft_s, prefill + 2 * (50e-6 + 375e-6 + 50e-6), 1e-9);
  EXPECT_NEAR(r.itl_s[0], SimStepSeconds(*model, {{1, 64, true}}), 1e-9);
}

TEST(SimClusterTest, RequestsBetweenTwoLoadReportsSpreadOverTheNodes) {
  SimClusterOptions options = Exact();
  options.num_decode = 2;
  options.load_poll_ms = 60'000;  // one report, before everything
  // Four requests at once: the router's own count of what it placed spreads them 2 + 2.
  std::vector<bench::BenchRequest> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(SimTestRequest(1024, 4, i));
  auto run = RunSimulation(options, requests, {0, 0, 0, 0});
  ASSERT_TRUE(run.ok());
  auto model = MakeStepTimeModel(options);
  // Both of a node's requests arrive at once and share its first step (sim_node.cc, WakeSoon):
  // every TTFT is that one step, on each node (2 + 2; 3 + 1 would give a longer step on one).
  const double two = SimStepSeconds(*model, {{1024, 0, true}, {1024, 0, true}});
  for (const auto& r : run->results) EXPECT_NEAR(r.ttft_s, two, 1e-9);
  // Each result names the node it ran on (colocated: no prefill node), two on each.
  int on_first = 0;
  for (const auto& r : run->results) {
    EXPECT_THAT(r.decode_node, ::testing::AnyOf("decode-0", "decode-1"));
    EXPECT_EQ(r.prefill_node, "");
    on_first += r.decode_node == "decode-0";
  }
  EXPECT_EQ(on_first, 2);
}

TEST(SimClusterTest, ADisaggregatedRequestWaitsForItsKvToCrossTheLink) {
  SimClusterOptions options = Exact();
  options.mode = ServingMode::kDisaggregated;
  options.num_prefill = 1;
  options.kv_link_gbps = 400;  // 50 bytes per ns
  options.kv_link_latency_us = 10;
  auto model = MakeStepTimeModel(options);
  ASSERT_TRUE(model.ok());
  auto run = RunSimulation(options, {SimTestRequest(100, 3)}, {0.0});
  ASSERT_TRUE(run.ok()) << run.status();
  const bench::RequestResult& r = run->results[0];
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.prefill_node, "prefill-0");
  EXPECT_EQ(r.decode_node, "decode-0");
  // The prefill node computes the prompt in one step, then its 7 blocks (100 tokens of 16) cross
  // the link in one write (+ 10 µs), then the completion notice (+ 10 µs), then the decode node
  // admits it and sends its first token.
  const double prefill = SimStepSeconds(*model, {{100, 0, true}});
  const int64_t bytes = 7 * model->KvBytesPerToken() * 16;
  EXPECT_EQ(run->stats.kv_bytes, bytes);
  const double transfer = std::ceil(static_cast<double>(bytes) / 50.0) * 1e-9 + 20e-6;
  EXPECT_NEAR(r.ttft_s, prefill + transfer, 1e-9);
  // Then the decode node decodes the second and third tokens.
  EXPECT_NEAR(r.itl_s[0], SimStepSeconds(*model, {{1, 100, true}}), 1e-9);
  EXPECT_NEAR(r.itl_s[1], SimStepSeconds(*model, {{1, 101, true}}), 1e-9);
}

TEST(SimClusterTest, ChunksCrossTheLinkWhileTheNextChunkComputes) {
  SimClusterOptions options = Exact();
  options.mode = ServingMode::kDisaggregated;
  options.num_prefill = 1;
  options.max_num_batched_tokens = 512;  // a 1024-token prompt in two chunks
  options.kv_link_gbps = 400;
  options.kv_link_latency_us = 10;
  auto model = MakeStepTimeModel(options);
  auto run = RunSimulation(options, {SimTestRequest(1024, 2)}, {0.0});
  ASSERT_TRUE(run.ok()) << run.status();
  const double chunk1 = SimStepSeconds(*model, {{512, 0, false}});
  const double chunk2 = SimStepSeconds(*model, {{512, 512, true}});
  const int64_t half = 32 * model->KvBytesPerToken() * 16;  // 32 blocks per chunk
  const double per_write = std::ceil(static_cast<double>(half) / 50.0) * 1e-9;
  // The first chunk's write (shorter than the second chunk's step) is hidden; only the second's
  // is exposed.
  ASSERT_LT(per_write, chunk2);
  EXPECT_NEAR(run->results[0].ttft_s, chunk1 + chunk2 + per_write + 20e-6, 1e-9);
}

TEST(SimClusterTest, PromptsTheDecodeNodeCachesAreNotSentAgain) {
  SimClusterOptions options = Exact();
  options.mode = ServingMode::kDisaggregated;
  options.num_prefill = 1;
  // The same 320-token prompt twice, the second after the first finished: the decode node's
  // prefix cache holds its 20 full blocks, and serves all but the last (a prompt keeps one block
  // to compute, as the BlockManager always leaves it): the second moves one block.
  auto run = RunSimulation(options, {SimTestRequest(320, 2), SimTestRequest(320, 2)}, {0.0, 1.0});
  ASSERT_TRUE(run.ok());
  ASSERT_TRUE(run->results[1].success);
  auto model = MakeStepTimeModel(options);
  EXPECT_EQ(run->stats.kv_bytes, (20 + 1) * model->KvBytesPerToken() * 16);
}

TEST(SimClusterTest, PrefixAwarePlacementSendsAPromptWhereItsPrefixIsCached) {
  SimClusterOptions options = Exact();
  options.mode = ServingMode::kDisaggregated;
  options.num_prefill = 2;
  options.policy = PlacementPolicy::kPrefixAware;
  options.kv_link_latency_us = 10;
  auto model = MakeStepTimeModel(options);
  // B repeats A's 1024 tokens and adds 64, after A is done: the prefill node that computed A holds
  // its 64 blocks, so B computes only its last 64 tokens there; the decode node holds them too,
  // so only B's 4 new blocks cross the link.
  bench::BenchRequest a = SimTestRequest(1024, 2, 5);
  bench::BenchRequest b = a;
  for (int i = 0; i < 64; ++i) b.prompt_ids.push_back(20000 + i);
  b.prompt_len = 1088;
  auto run = RunSimulation(options, {a, b}, {0.0, 1.0});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_TRUE(run->results[1].success);
  const double tail = SimStepSeconds(*model, {{64, 1024, true}});
  const int64_t bytes = 4 * model->KvBytesPerToken() * 16;
  const double write = std::ceil(static_cast<double>(bytes) / 50.0) * 1e-9;
  EXPECT_NEAR(run->results[1].ttft_s, tail + write + 20e-6, 1e-9);
}

TEST(SimClusterTest, TheSameInputsGiveTheSameRun) {
  bench::RandomDatasetOptions dataset;
  dataset.num_prompts = 300;
  dataset.input = {"lognormal", 800, 0, 0.8, 8000};
  dataset.output = {"lognormal", 200, 0, 0.8, 2000};
  dataset.seed = 7;
  auto requests = bench::RandomDataset(dataset);
  ASSERT_TRUE(requests.ok()) << requests.status();
  auto arrivals = bench::ArrivalTimes({.rate = 20, .burstiness = 1, .seed = 7}, 300);
  ASSERT_TRUE(arrivals.ok());
  SimClusterOptions options;
  options.num_decode = 2;
  options.num_kv_blocks = 2000;  // small enough to preempt now and then
  auto a = RunSimulation(options, *requests, *arrivals);
  auto b = RunSimulation(options, *requests, *arrivals);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->results.size(), b->results.size());
  for (size_t i = 0; i < a->results.size(); ++i) {
    EXPECT_TRUE(a->results[i].success) << i << ": " << a->results[i].error;
    EXPECT_EQ(a->results[i].ttft_s, b->results[i].ttft_s) << i;
    EXPECT_EQ(a->results[i].e2e_s, b->results[i].e2e_s) << i;
    EXPECT_EQ(a->results[i].itl_s, b->results[i].itl_s) << i;
  }
  EXPECT_EQ(a->stats.events, b->stats.events);
  EXPECT_EQ(a->stats.steps, b->stats.steps);
}

TEST(SimClusterTest, APromptNoNodeCanHoldFailsWithAClearError) {
  SimClusterOptions options = Exact();
  options.num_kv_blocks = 8;  // 128 tokens
  auto run = RunSimulation(options, {SimTestRequest(200, 2), SimTestRequest(50, 2, 1)}, {0, 0});
  ASSERT_TRUE(run.ok());
  EXPECT_FALSE(run->results[0].success);
  EXPECT_THAT(run->results[0].error, ::testing::HasSubstr("never fit"));
  EXPECT_TRUE(run->results[1].success);
}

TEST(SimClusterTest, BadOptionsAreRefused) {
  SimClusterOptions options;
  options.gpu = "tpu";
  EXPECT_FALSE(RunSimulation(options, {}, {}).ok());
  options = SimClusterOptions();
  options.model = "no-such-model";
  auto run = RunSimulation(options, {}, {});
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(run.status().message(), ::testing::HasSubstr("no-such-model"));
  options = SimClusterOptions();
  options.num_decode = 0;
  EXPECT_FALSE(RunSimulation(options, {}, {}).ok());
}

}  // namespace
}  // namespace tandem::sim
