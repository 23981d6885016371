// tandem-sim --kv-cache-dtype: the step-time model's KV bytes per token follow the dtype, so a
// disaggregated request's KV over the link, and the time it takes there, halve from bf16 to fp8
// (and double for f32), while the prefill itself is priced the same.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tools/sim/sim_cluster.h"

namespace tandem::sim {
namespace {

bench::BenchRequest Request(int32_t prompt_len, int32_t output_len) {
  bench::BenchRequest r;
  for (int32_t i = 0; i < prompt_len; ++i) r.prompt_ids.push_back(1000 + (i * 7919) % 9000);
  r.prompt_len = prompt_len;
  r.output_len = output_len;
  return r;
}

TEST(SimKvCacheDTypeTest, HandoffBytesAndTransferTimeFollowTheDType) {
  std::vector<int64_t> kv_bytes;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kFP8E4M3}) {
    SimClusterOptions options;
    options.router_overhead_us = 0;
    options.hop_latency_us = 0;
    options.mode = ServingMode::kDisaggregated;
    options.num_prefill = 1;
    options.kv_link_gbps = 400;  // 50 bytes per ns
    options.kv_link_latency_us = 10;
    options.kv_dtype = dtype;
    auto model = MakeStepTimeModel(options);
    ASSERT_TRUE(model.ok()) << model.status();
    // Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K, V) elements per token.
    EXPECT_EQ(model->KvBytesPerToken(), 65536 * static_cast<int64_t>(DTypeSize(dtype)));
    // A 100-token prompt: its prefill, its 7 blocks over the link, then the first token.
    const double prefill =
        static_cast<double>(std::llround(model->Time({{{100, 0, true}}}).total_s() * 1e9)) * 1e-9;
    const int64_t bytes = 7 * model->KvBytesPerToken() * 16;
    const double transfer = std::ceil(static_cast<double>(bytes) / 50.0) * 1e-9 + 20e-6;
    auto run = RunSimulation(options, {Request(100, 3)}, {0.0});
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_TRUE(run->results[0].success);
    EXPECT_EQ(run->stats.kv_bytes, bytes);
    EXPECT_NEAR(run->results[0].ttft_s, prefill + transfer, 1e-9);
    kv_bytes.push_back(run->stats.kv_bytes);
  }
  EXPECT_EQ(kv_bytes[0], 2 * kv_bytes[1]);
  EXPECT_EQ(kv_bytes[1], 2 * kv_bytes[2]);
}

}  // namespace
}  // namespace tandem::sim
