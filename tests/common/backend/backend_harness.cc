#include "tests/common/backend/backend_harness.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "tests/common/backend/test_model.h"

namespace tandem::testing {

std::vector<ModelCase> AllModelCases() {
  std::vector<ModelCase> cases;
  { cases.push_back({"llama_f32_mha_hd16", TinyLlamaConfig(), DType::kF32}); }
  {
    ModelConfig c = TinyLlamaConfig();
    c.num_kv_heads = 2;
    c.head_dim = 32;
    c.rope_theta = 500000.0f;
    c.rope_scaling.type = RopeScaling::Type::kLlama3;
    c.rope_scaling.factor = 8.0f;
    c.rope_scaling.low_freq_factor = 1.0f;
    c.rope_scaling.high_freq_factor = 4.0f;
    // Small enough that low, medium and high frequencies all occur with head_dim 32.
    c.rope_scaling.original_max_position_embeddings = 32;
    c.tie_word_embeddings = true;
    cases.push_back({"llama31_bf16_gqa2_hd32_tied", c, DType::kBF16});
  }
  {
    ModelConfig c = TinyLlamaConfig();
    c.architecture = Architecture::kQwen2;
    c.num_heads = 8;
    c.num_kv_heads = 2;
    c.attention_bias = true;
    c.rope_theta = 1000000.0f;
    c.rope_scaling.type = RopeScaling::Type::kLinear;
    c.rope_scaling.factor = 2.0f;
    c.rms_norm_eps = 1e-6f;
    cases.push_back({"qwen2_f16_gqa4_hd16_bias_linear", c, DType::kF16});
  }
  {
    ModelConfig c = TinyLlamaConfig();
    c.architecture = Architecture::kQwen3;
    c.num_heads = 4;
    c.num_kv_heads = 1;
    c.head_dim = 64;
    c.qk_norm = true;
    c.tie_word_embeddings = true;
    c.rms_norm_eps = 1e-6f;
    cases.push_back({"qwen3_bf16_gqa4_hd64_qknorm_tied", c, DType::kBF16});
  }
  {
    ModelConfig c = TinyLlamaConfig();
    c.architecture = Architecture::kMistral;
    c.num_kv_heads = 2;
    c.head_dim = 32;
    c.sliding_window = 5;
    cases.push_back({"mistral_f32_gqa2_window5", c, DType::kF32});
  }
  {
    ModelConfig c = TinyLlamaConfig();
    c.vocab_size = 101;
    c.hidden_size = 68;  // not a multiple of the 8-float vector
    c.intermediate_size = 100;
    c.num_heads = 2;
    c.num_kv_heads = 1;
    c.head_dim = 20;
    c.attention_bias = true;  // Llama's: q/k/v and o_proj biases
    cases.push_back({"llama_f32_odd_sizes_attention_bias", c, DType::kF32});
  }
  return cases;
}

std::unique_ptr<CpuBackend> MakeBackend(const ModelWeights& weights, int num_blocks, int block_size,
                                        int threads) {
  CpuBackendOptions options;
  options.num_threads = threads;
  options.block_size = block_size;
  options.num_kv_blocks = num_blocks;
  options.max_batch_tokens = 16;  // small, so tests also exercise growing the scratch
  auto backend = CpuBackend::Create(weights, options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? std::move(backend).value() : nullptr;
}

absl::StatusOr<std::vector<float>> RunForward(CpuBackend& backend,
                                              const std::vector<ForwardItem>& items) {
  const size_t rows =
      std::count_if(items.begin(), items.end(), [](const ForwardItem& i) { return i.want_logits; });
  std::vector<float> logits(rows * backend.config().vocab_size, NAN);
  ForwardBatch batch{items};
  absl::Status status = backend.Forward(batch, LogitsOutput{logits});
  if (!status.ok()) return status;
  return logits;
}

std::vector<TokenId> RandomTokens(int n, int vocab, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int> dist(0, vocab - 1);
  std::vector<TokenId> tokens(n);
  for (TokenId& t : tokens) t = dist(rng);
  return tokens;
}

ForwardItem Sequence::Next(int count, bool want_logits) {
  ForwardItem item;
  item.tokens = std::span<const TokenId>(tokens).subspan(cached, count);
  item.start_pos = cached;
  item.block_table = blocks;
  item.want_logits = want_logits;
  cached += count;
  return item;
}

double RelativeError(const float* got, const std::vector<double>& ref) {
  double max_ref = 1.0, max_diff = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    max_ref = std::max(max_ref, std::abs(ref[i]));
    max_diff = std::max(max_diff, std::abs(got[i] - ref[i]));
  }
  return max_diff / max_ref;
}

}  // namespace tandem::testing
