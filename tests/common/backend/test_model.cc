#include "tests/common/backend/test_model.h"

#include <cmath>
#include <cstring>

#include "common/util/fp8.h"
#include "common/util/half.h"

namespace tandem::testing {

TestModel::TestModel(const ModelConfig& config, DType dtype, uint64_t seed)
    : dtype_(dtype), state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {
  const ModelConfig& c = config;
  weights_.config = config;
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size;
  const float in_h = 1.0f / std::sqrt(static_cast<float>(h));
  weights_.embed_tokens = Make("model.embed_tokens.weight", {c.vocab_size, h}, 1.0f);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights l;
    l.input_layernorm = Make(p + "input_layernorm.weight", {h}, 0.2f, 1.0f);
    l.q_proj = Make(p + "self_attn.q_proj.weight", {q, h}, 2.0f * in_h);
    l.k_proj = Make(p + "self_attn.k_proj.weight", {kv, h}, 2.0f * in_h);
    l.v_proj = Make(p + "self_attn.v_proj.weight", {kv, h}, in_h);
    if (c.attention_bias) {
      l.q_bias = Make(p + "self_attn.q_proj.bias", {q}, 0.2f);
      l.k_bias = Make(p + "self_attn.k_proj.bias", {kv}, 0.2f);
      l.v_bias = Make(p + "self_attn.v_proj.bias", {kv}, 0.2f);
    }
    if (c.qk_norm) {
      l.q_norm = Make(p + "self_attn.q_norm.weight", {c.head_dim}, 0.3f, 1.0f);
      l.k_norm = Make(p + "self_attn.k_norm.weight", {c.head_dim}, 0.3f, 1.0f);
    }
    if (c.attention_bias && c.architecture != Architecture::kQwen2) {
      l.o_bias = Make(p + "self_attn.o_proj.bias", {h}, 0.2f);
    }
    l.o_proj = Make(p + "self_attn.o_proj.weight", {h, q}, 1.0f / std::sqrt(static_cast<float>(q)));
    l.post_attention_layernorm = Make(p + "post_attention_layernorm.weight", {h}, 0.2f, 1.0f);
    l.gate_proj = Make(p + "mlp.gate_proj.weight", {inter, h}, 2.0f * in_h);
    l.up_proj = Make(p + "mlp.up_proj.weight", {inter, h}, 2.0f * in_h);
    l.down_proj =
        Make(p + "mlp.down_proj.weight", {h, inter}, 1.0f / std::sqrt(static_cast<float>(inter)));
    weights_.layers.push_back(l);
  }
  weights_.norm = Make("model.norm.weight", {h}, 0.2f, 1.0f);
  weights_.lm_head = c.tie_word_embeddings ? weights_.embed_tokens
                                           : Make("lm_head.weight", {c.vocab_size, h}, 4.0f * in_h);
}

TensorView TestModel::Make(const std::string& name, std::vector<int64_t> shape, float scale,
                           float offset) {
  TensorView t;
  t.name = name;
  t.dtype = dtype_;
  t.shape = std::move(shape);
  const int64_t n = t.numel();
  std::vector<uint8_t>& bytes = storage_.emplace_back(static_cast<size_t>(n) * DTypeSize(dtype_));
  for (int64_t i = 0; i < n; ++i) {
    // splitmix64: fast enough for the 100M-parameter timing model.
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float unit = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    const float v = offset + scale * (2.0f * unit - 1.0f);
    switch (dtype_) {
      case DType::kF32:
        std::memcpy(bytes.data() + i * 4, &v, 4);
        break;
      case DType::kBF16: {
        const uint16_t b = F32ToBf16(v);
        std::memcpy(bytes.data() + i * 2, &b, 2);
        break;
      }
      case DType::kF16: {
        const uint16_t b = F32ToF16(v);
        std::memcpy(bytes.data() + i * 2, &b, 2);
        break;
      }
      case DType::kFP8E4M3:  // not a weight dtype
        bytes[i] = F32ToFp8E4M3(v);
        break;
    }
  }
  t.data = bytes.data();
  t.nbytes = bytes.size();
  return t;
}

ModelConfig TinyLlamaConfig() {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.vocab_size = 97;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  c.head_dim = 16;
  c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  return c;
}

}  // namespace tandem::testing
