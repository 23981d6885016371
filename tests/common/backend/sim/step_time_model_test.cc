#include "common/backend/sim/step_time_model.h"

#include <vector>

#include "common/backend/sim/gpu_spec.h"
#include "common/backend/sim/sim_model_presets.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

StepTimeModel Model(const std::string& gpu, const std::string& model, int tp) {
  auto g = FindGpuSpec(gpu);
  EXPECT_TRUE(g.ok()) << g.status();
  auto m = SimModelPreset(model);
  EXPECT_TRUE(m.ok()) << m.status();
  auto t = StepTimeModel::Create(*g, *m, tp);
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

// H100: 989e12 FLOP/s, 3.35e12 B/s; efficiencies 0.7 (GEMM), 0.5 (attention), 0.85 (bandwidth).
constexpr double kGemmFlops = 989e12 * 0.7;
constexpr double kAttnFlops = 989e12 * 0.5;
constexpr double kBandwidth = 3.35e12 * 0.85;

TEST(StepTimeModelTest, Llama8bSizes) {
  StepTimeModel m = Model("h100", "llama-3.1-8b", 1);
  // 4096*(4096 + 2*1024) + 4096*4096 + 3*4096*14336
  EXPECT_EQ(m.LayerLinearParameters(), 218103808);
  // 2 * 32 layers * 8 heads * 128 * 2 bytes
  EXPECT_EQ(m.KvBytesPerToken(), 131072);
  // 8,030,261,248 parameters (embeddings and LM head untied) in bf16
  EXPECT_EQ(m.WeightBytes(), int64_t{8030261248} * 2);
  // 0.9 * 81559 MiB - 2 GiB reserved - weights
  auto kv = m.KvCacheBytes(0.9);
  ASSERT_TRUE(kv.ok()) << kv.status();
  const double expected = 0.9 * 81559.0 * 1048576.0 - 2147483648.0 - 16060522496.0;
  EXPECT_NEAR(static_cast<double>(*kv), expected, 1.0);
}

TEST(StepTimeModelTest, DecodeStepIsWeightAndKvReads) {
  StepTimeModel m = Model("h100", "llama-3.1-8b", 1);
  // One sequence with 1023 tokens cached decodes its 1024th.
  std::vector<SimStepItem> items = {{1, 1023, true}};
  StepWork c = m.Cost(items);
  const double linear = 32.0 * 218103808;  // per-token linear parameters, all layers
  const double lm_head = 128256.0 * 4096;
  EXPECT_DOUBLE_EQ(c.gemm_flops, 2 * linear + 2 * lm_head);
  EXPECT_DOUBLE_EQ(c.weight_bytes, 2 * (linear + lm_head));
  EXPECT_DOUBLE_EQ(c.attention_flops, 4.0 * 32 * 32 * 128 * 1024);
  EXPECT_DOUBLE_EQ(c.kv_read_bytes, 131072.0 * 1024);
  EXPECT_DOUBLE_EQ(c.kv_write_bytes, 131072.0);
  EXPECT_EQ(c.allreduce_calls, 0);

  StepTime t = m.Time(items);
  EXPECT_DOUBLE_EQ(t.gemm_s, 2 * (linear + lm_head) / kBandwidth);  // memory-bound: ~5.27 ms
  EXPECT_DOUBLE_EQ(t.attention_s, 131072.0 * 1025 / kBandwidth);
  EXPECT_DOUBLE_EQ(t.overhead_s, 0.0005);
  EXPECT_NEAR(t.total_s(), 0.005818, 0.000005);
}

TEST(StepTimeModelTest, PrefillIsComputeBound) {
  StepTimeModel m = Model("h100", "llama-3.1-8b", 1);
  std::vector<SimStepItem> items = {{4096, 0, true}};
  StepWork c = m.Cost(items);
  const double linear = 32.0 * 218103808;
  const double lm_head = 128256.0 * 4096;
  EXPECT_DOUBLE_EQ(c.gemm_flops, 2 * 4096 * linear + 2 * lm_head);
  // Causal: token k (1-based) attends k keys; sum over 1..4096 = 4096 * 4097 / 2.
  EXPECT_DOUBLE_EQ(c.attention_flops, 4.0 * 32 * 32 * 128 * (4096.0 * 4097 / 2));
  StepTime t = m.Time(items);
  EXPECT_DOUBLE_EQ(t.gemm_s, (2 * 4096 * linear + 2 * lm_head) / kGemmFlops);  // ~82.6 ms
  EXPECT_DOUBLE_EQ(t.attention_s, 4.0 * 32 * 32 * 128 * (4096.0 * 4097 / 2) / kAttnFlops);
  EXPECT_NEAR(t.total_s(), 0.09199, 0.0001);
}

TEST(StepTimeModelTest, MixedBatchAddsItemsAndPricesKernelClassesOnce) {
  StepTimeModel m = Model("h100", "llama-3.1-8b", 1);
  // A 512-token prefill chunk after 1024 cached tokens, plus two decodes (no logits for the
  // chunk: it is not the prompt's end).
  std::vector<SimStepItem> items = {{512, 1024, false}, {1, 99, true}, {1, 4095, true}};
  StepWork c = m.Cost(items);
  EXPECT_EQ(c.tokens, 514);
  EXPECT_EQ(c.logits_rows, 2);
  // sum_{k=1025}^{1536} k + 100 + 4096
  const double attended = (1025.0 + 1536) * 512 / 2 + 100 + 4096;
  EXPECT_DOUBLE_EQ(c.attention_flops, 4.0 * 32 * 32 * 128 * attended);
  EXPECT_DOUBLE_EQ(c.kv_read_bytes, 131072.0 * (1536 + 100 + 4096));
  EXPECT_DOUBLE_EQ(c.kv_write_bytes, 131072.0 * 514);
}

TEST(StepTimeModelTest, SlidingWindowCapsAttendedKeys) {
  ModelConfig tiny;
  tiny.vocab_size = 100;
  tiny.hidden_size = 8;
  tiny.intermediate_size = 16;
  tiny.num_layers = 1;
  tiny.num_heads = 1;
  tiny.num_kv_heads = 1;
  tiny.head_dim = 8;
  tiny.sliding_window = 3;
  auto gpu = FindGpuSpec("h100");
  ASSERT_TRUE(gpu.ok());
  auto m = StepTimeModel::Create(*gpu, tiny, 1);
  ASSERT_TRUE(m.ok()) << m.status();
  // Positions 2..5: keys min(3,3), min(4,3), min(5,3), min(6,3) = 12; reads positions 0..5 = 6.
  std::vector<SimStepItem> items = {{4, 2, false}};
  StepWork c = m->Cost(items);
  EXPECT_DOUBLE_EQ(c.attention_flops, 4.0 * 1 * 1 * 8 * 12);
  EXPECT_DOUBLE_EQ(c.kv_read_bytes, m->KvBytesPerToken() * 6.0);
  // Inside the window: 1 + 2 keys.
  items = {{2, 0, false}};
  EXPECT_DOUBLE_EQ(m->Cost(items).attention_flops, 4.0 * 8 * 3);
  // Far past it: a decode at position 100 reads and attends 3.
  items = {{1, 100, false}};
  EXPECT_DOUBLE_EQ(m->Cost(items).attention_flops, 4.0 * 8 * 3);
  EXPECT_DOUBLE_EQ(m->Cost(items).kv_read_bytes, m->KvBytesPerToken() * 3.0);
}

TEST(StepTimeModelTest, TensorParallelSplitsWorkAndAddsAllReduces) {
  StepTimeModel tp4 = Model("h100", "llama-3.1-70b", 4);
  std::vector<SimStepItem> items = {{1, 1023, true}, {1, 2047, true}};
  StepWork c = tp4.Cost(items);
  EXPECT_EQ(c.allreduce_calls, 160);                    // 2 per layer
  EXPECT_DOUBLE_EQ(c.allreduce_bytes, 2.0 * 8192 * 2);  // tokens * hidden * bf16
  StepTime t = tp4.Time(items);
  EXPECT_DOUBLE_EQ(t.gemm_s, c.weight_bytes / (4 * kBandwidth));
  EXPECT_DOUBLE_EQ(t.allreduce_s, 160 * (10e-6 + 2.0 * 3 / 4 * (2.0 * 8192 * 2) / 360e9));
  // 70B's layer: 8192*(8192 + 2*1024) + 8192*8192 + 3*8192*28672
  EXPECT_EQ(tp4.LayerLinearParameters(), 855638016);
  EXPECT_EQ(tp4.KvBytesPerToken(), 2 * 80 * 8 * 128 * 2);
}

TEST(StepTimeModelTest, EmptyStepTakesNoTime) {
  StepTimeModel m = Model("a100", "llama-3.1-8b", 1);
  EXPECT_EQ(m.Time({}).total_s(), 0.0);
}

TEST(StepTimeModelTest, ClearErrors) {
  auto gpu = FindGpuSpec("h100");
  ASSERT_TRUE(gpu.ok());
  auto m70 = SimModelPreset("llama-3.1-70b");
  ASSERT_TRUE(m70.ok());
  EXPECT_EQ(StepTimeModel::Create(*gpu, *m70, 3).status().code(),
            absl::StatusCode::kInvalidArgument);  // 8 KV heads over 3 GPUs
  EXPECT_EQ(StepTimeModel::Create(*gpu, *m70, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto one = StepTimeModel::Create(*gpu, *m70, 1);
  ASSERT_TRUE(one.ok());
  auto kv = one->KvCacheBytes(0.9);  // 141 GB of weights on one 80 GB GPU
  EXPECT_EQ(kv.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(kv.status().message().find("--sim-tp"), std::string::npos);
  EXPECT_EQ(one->KvCacheBytes(1.5).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FindGpuSpec("v100").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(SimModelPreset("gpt-5").status().code(), absl::StatusCode::kNotFound);
}

TEST(GpuSpecTest, NamesAndAliases) {
  for (const std::string& name : GpuSpecNames()) EXPECT_TRUE(FindGpuSpec(name).ok()) << name;
  EXPECT_EQ(FindGpuSpec("h100-sxm")->hbm_bytes_per_s, 3.35e12);
  EXPECT_EQ(FindGpuSpec("h200")->hbm_bytes_per_s, 4.8e12);
  EXPECT_EQ(FindGpuSpec("a100-80gb")->peak_bf16_flops, 312e12);
}

}  // namespace
}  // namespace tandem
