// Checks of the test-only reference forward against hand computations, so that tests built on it
// (make-model margins, backend conformance) rest on something verified.
#include "tests/common/model/reference_forward.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/common/model/test_model_dir.h"

namespace tandem::testing {
namespace {

std::map<std::string, std::vector<float>> RandomTensors(const ModelConfig& c) {
  std::map<std::string, std::vector<float>> out;
  uint64_t state = 12345;
  for (const TensorSpec& s : ExpectedTensors(c)) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      x = static_cast<float>(static_cast<int>((state >> 33) % 2001) - 1000) / 1000.0f;
    }
    out[s.name] = std::move(v);
  }
  return out;
}

std::vector<float> NormRow(const float* x, const std::vector<float>& w, float eps) {
  const int n = static_cast<int>(w.size());
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
  std::vector<float> y(n);
  for (int i = 0; i < n; ++i) y[i] = x[i] * inv * w[i];
  return y;
}

std::vector<float> MatVec(const std::vector<float>& w, const std::vector<float>& x, int out) {
  const int in = static_cast<int>(x.size());
  std::vector<float> y(out);
  for (int o = 0; o < out; ++o) {
    double s = 0;
    for (int i = 0; i < in; ++i) s += double(w[size_t(o) * in + i]) * x[i];
    y[o] = static_cast<float>(s);
  }
  return y;
}

void ZeroLayerOutputs(const ModelConfig& c, std::map<std::string, std::vector<float>>& t,
                      bool attention, bool mlp) {
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    if (attention)
      std::fill(t[p + "self_attn.o_proj.weight"].begin(), t[p + "self_attn.o_proj.weight"].end(),
                0.0f);
    if (mlp)
      std::fill(t[p + "mlp.down_proj.weight"].begin(), t[p + "mlp.down_proj.weight"].end(), 0.0f);
  }
}

TEST(ReferenceForwardTest, WithSilentLayersLogitsAreHeadOfNormalizedEmbedding) {
  ModelConfig c = SmallConfig(Architecture::kLlama);
  auto t = RandomTensors(c);
  ZeroLayerOutputs(c, t, true, true);
  ReferenceModel model(c, t);
  const std::vector<TokenId> tokens = {5, 17, 95};
  std::vector<float> logits = model.Forward(tokens);
  ASSERT_EQ(logits.size(), 3u * c.vocab_size);
  for (int p = 0; p < 3; ++p) {
    std::vector<float> x = NormRow(&t["model.embed_tokens.weight"][tokens[p] * c.hidden_size],
                                   t["model.norm.weight"], c.rms_norm_eps);
    std::vector<float> expect = MatVec(t["lm_head.weight"], x, c.vocab_size);
    for (int v = 0; v < c.vocab_size; ++v) {
      EXPECT_NEAR(logits[p * c.vocab_size + v], expect[v], 1e-4) << p << " " << v;
    }
  }
}

TEST(ReferenceForwardTest, SingleTokenAttendsToItsOwnValueWithGqaAndBias) {
  ModelConfig c = SmallConfig(Architecture::kQwen2);  // v bias; 4 heads share 2 kv heads
  c.num_layers = 1;
  auto t = RandomTensors(c);
  ZeroLayerOutputs(c, t, false, true);
  ReferenceModel model(c, t);
  const TokenId token = 42;
  std::vector<float> logits = model.Forward(std::vector<TokenId>{token});
  const float* e = &t["model.embed_tokens.weight"][token * c.hidden_size];
  std::vector<float> xn = NormRow(e, t["model.layers.0.input_layernorm.weight"], c.rms_norm_eps);
  std::vector<float> v = MatVec(t["model.layers.0.self_attn.v_proj.weight"], xn, c.kv_size());
  for (int i = 0; i < c.kv_size(); ++i) v[i] += t["model.layers.0.self_attn.v_proj.bias"][i];
  // One position: softmax is 1, each query head h reads kv head h / (heads / kv_heads).
  std::vector<float> attn(c.q_size());
  const int group = c.num_heads / c.num_kv_heads;
  for (int h = 0; h < c.num_heads; ++h) {
    for (int i = 0; i < c.head_dim; ++i) attn[h * c.head_dim + i] = v[(h / group) * c.head_dim + i];
  }
  std::vector<float> o = MatVec(t["model.layers.0.self_attn.o_proj.weight"], attn, c.hidden_size);
  for (int i = 0; i < c.hidden_size; ++i) o[i] += e[i];
  std::vector<float> expect = MatVec(
      t["lm_head.weight"], NormRow(o.data(), t["model.norm.weight"], c.rms_norm_eps), c.vocab_size);
  for (int k = 0; k < c.vocab_size; ++k) EXPECT_NEAR(logits[k], expect[k], 1e-4) << k;
}

TEST(ReferenceForwardTest, IsCausal) {
  ModelConfig c = SmallConfig(Architecture::kQwen3);
  ReferenceModel model(c, RandomTensors(c));
  std::vector<TokenId> a = {1, 2, 3, 4, 5, 6};
  std::vector<TokenId> b = a;
  b.back() = 77;
  std::vector<float> la = model.Forward(a), lb = model.Forward(b);
  const size_t prefix = 5 * c.vocab_size;
  EXPECT_EQ(std::vector<float>(la.begin(), la.begin() + prefix),
            std::vector<float>(lb.begin(), lb.begin() + prefix));
  EXPECT_NE(std::vector<float>(la.begin() + prefix, la.end()),
            std::vector<float>(lb.begin() + prefix, lb.end()));
}

TEST(ReferenceForwardTest, SlidingWindowLimitsAttention) {
  ModelConfig c = SmallConfig(Architecture::kMistral);
  c.sliding_window = 2;  // each position sees itself and the one before
  ReferenceModel model(c, RandomTensors(c));
  std::vector<TokenId> a = {9, 8, 7, 6, 5};
  std::vector<TokenId> b = a;
  b[0] = 60;  // outside the window of positions >= 2 in every layer (2 layers: reach 2 back)
  std::vector<float> la = model.Forward(a), lb = model.Forward(b);
  const size_t from = 3 * c.vocab_size;
  EXPECT_EQ(std::vector<float>(la.begin() + from, la.end()),
            std::vector<float>(lb.begin() + from, lb.end()));
}

TEST(ReferenceForwardTest, Llama3RopeScalingFrequencies) {
  ModelConfig c = SmallConfig(Architecture::kLlama);
  c.head_dim = 128;
  c.num_heads = 4;
  c.rope_theta = 500000.0f;
  c.rope_scaling.type = RopeScaling::Type::kLlama3;
  c.rope_scaling.factor = 8.0f;
  ReferenceModel model(c, RandomTensors(c));
  const std::vector<double>& f = model.inv_freq();
  ASSERT_EQ(f.size(), 64u);
  auto base = [&](int i) { return 1.0 / std::pow(500000.0, 2.0 * i / 128); };
  EXPECT_DOUBLE_EQ(f[0], 1.0);              // wavelength 2*pi: untouched
  EXPECT_DOUBLE_EQ(f[63], base(63) / 8.0);  // longest wavelengths: divided by the factor
  for (int i = 0; i < 64; ++i) {
    EXPECT_LE(f[i], base(i) * (1 + 1e-12));
    EXPECT_GE(f[i], base(i) / 8.0 * (1 - 1e-12));
  }
}

}  // namespace
}  // namespace tandem::testing
