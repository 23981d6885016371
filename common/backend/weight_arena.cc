#include "common/backend/weight_arena.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/util/half.h"
#include "common/util/status_macros.h"

namespace tandem {
namespace {

// Every tensor starts on a 64-byte boundary of an f32 arena (32 bytes of a bf16 one).
constexpr size_t kAlignElements = 16;

size_t RoundUp(size_t n) { return (n + kAlignElements - 1) / kAlignElements * kAlignElements; }

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status CheckTensor(const TensorView& t, const std::string& what,
                         const std::vector<int64_t>& shape) {
  const std::string& name = t.name.empty() ? what : t.name;
  if (!t.valid()) return absl::InvalidArgumentError(absl::StrCat("missing tensor ", name));
  if (t.shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", name, " has shape ", ShapeString(t.shape), ", expected ", ShapeString(shape)));
  }
  const size_t expected_bytes = static_cast<size_t>(t.numel()) * DTypeSize(t.dtype);
  if (t.nbytes != expected_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, " holds ", t.nbytes, " bytes, expected ", expected_bytes,
                     " for ", std::string(DTypeName(t.dtype)), ShapeString(shape)));
  }
  return absl::OkStatus();
}

absl::Status CheckConfig(const ModelConfig& c) {
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 ||
      c.num_heads <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0) {
    return absl::InvalidArgumentError(
        "model config needs positive vocab_size, hidden_size, intermediate_size, "
        "num_hidden_layers, num_attention_heads, num_key_value_heads and head_dim");
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_attention_heads ", c.num_heads,
                                                   " is not a multiple of num_key_value_heads ",
                                                   c.num_kv_heads));
  }
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("head_dim ", c.head_dim, " is odd"));
  }
  if (c.rms_norm_eps < 0 || c.sliding_window < 0) {
    return absl::InvalidArgumentError("rms_norm_eps and sliding_window must not be negative");
  }
  const RopeScaling& s = c.rope_scaling;
  if (s.type != RopeScaling::Type::kNone && !(s.factor > 0)) {
    return absl::InvalidArgumentError("rope_scaling factor must be positive");
  }
  if (s.type == RopeScaling::Type::kLlama3 &&
      (!(s.high_freq_factor > s.low_freq_factor) || !(s.low_freq_factor > 0) ||
       s.original_max_position_embeddings <= 0)) {
    return absl::InvalidArgumentError(
        "llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor and a positive "
        "original_max_position_embeddings");
  }
  return absl::OkStatus();
}

// The slice [begin, end) of `t` as a 1-D tensor of its own (threads convert slices).
TensorView Slice(const TensorView& t, int64_t begin, int64_t end) {
  const size_t element_bytes = DTypeSize(t.dtype);
  TensorView slice;
  slice.dtype = t.dtype;
  slice.shape = {end - begin};
  slice.data = t.data + begin * element_bytes;
  slice.nbytes = static_cast<size_t>(end - begin) * element_bytes;
  return slice;
}

void ConvertToBf16(const TensorView& t, uint16_t* dst) {
  const size_t n = static_cast<size_t>(t.numel());
  // Tensors in a safetensors file need not be aligned for their element type: copy bytes.
  if (t.dtype == DType::kBF16) {
    std::memcpy(dst, t.data, n * sizeof(uint16_t));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    float f;
    if (t.dtype == DType::kF32) {
      std::memcpy(&f, t.data + 4 * i, sizeof(f));
    } else {
      uint16_t v;
      std::memcpy(&v, t.data + 2 * i, sizeof(v));
      f = F16ToF32(v);
    }
    dst[i] = F32ToBf16(f);
  }
}

}  // namespace

size_t WeightArenaPlan::AddContiguous(std::initializer_list<const TensorView*> tensors) {
  const size_t start = size_;
  size_t at = size_;
  for (const TensorView* t : tensors) {
    parts_.push_back({t, at});
    at += static_cast<size_t>(t->numel());
  }
  size_ = RoundUp(at);
  return start;
}

absl::StatusOr<LayerArenaOffsets> WeightArenaPlan::PlanLayer(const ModelConfig& c,
                                                             const LayerWeights& w, int index) {
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size;
  const std::string p = absl::StrCat("model.layers.", index, ".");
  RETURN_IF_ERROR(CheckTensor(w.input_layernorm, p + "input_layernorm.weight", {h}));
  RETURN_IF_ERROR(CheckTensor(w.q_proj, p + "self_attn.q_proj.weight", {q, h}));
  RETURN_IF_ERROR(CheckTensor(w.k_proj, p + "self_attn.k_proj.weight", {kv, h}));
  RETURN_IF_ERROR(CheckTensor(w.v_proj, p + "self_attn.v_proj.weight", {kv, h}));
  RETURN_IF_ERROR(CheckTensor(w.o_proj, p + "self_attn.o_proj.weight", {h, q}));
  RETURN_IF_ERROR(
      CheckTensor(w.post_attention_layernorm, p + "post_attention_layernorm.weight", {h}));
  RETURN_IF_ERROR(CheckTensor(w.gate_proj, p + "mlp.gate_proj.weight", {inter, h}));
  RETURN_IF_ERROR(CheckTensor(w.up_proj, p + "mlp.up_proj.weight", {inter, h}));
  RETURN_IF_ERROR(CheckTensor(w.down_proj, p + "mlp.down_proj.weight", {h, inter}));
  LayerArenaOffsets o;
  o.input_norm = Add(w.input_layernorm);
  o.wqkv = AddContiguous({&w.q_proj, &w.k_proj, &w.v_proj});
  if (c.attention_bias) {
    RETURN_IF_ERROR(CheckTensor(w.q_bias, p + "self_attn.q_proj.bias", {q}));
    RETURN_IF_ERROR(CheckTensor(w.k_bias, p + "self_attn.k_proj.bias", {kv}));
    RETURN_IF_ERROR(CheckTensor(w.v_bias, p + "self_attn.v_proj.bias", {kv}));
    o.bqkv = AddContiguous({&w.q_bias, &w.k_bias, &w.v_bias});
    o.has_bias = true;
  }
  if (c.qk_norm) {
    RETURN_IF_ERROR(CheckTensor(w.q_norm, p + "self_attn.q_norm.weight", {c.head_dim}));
    RETURN_IF_ERROR(CheckTensor(w.k_norm, p + "self_attn.k_norm.weight", {c.head_dim}));
    o.q_norm = Add(w.q_norm);
    o.k_norm = Add(w.k_norm);
    o.has_qk_norm = true;
  }
  o.wo = Add(w.o_proj);
  // Llama/Mistral/Qwen3 attention_bias also biases o_proj; Qwen2 hard-wires q/k/v biases only.
  if (c.attention_bias && c.architecture != Architecture::kQwen2) {
    RETURN_IF_ERROR(CheckTensor(w.o_bias, p + "self_attn.o_proj.bias", {h}));
    o.bo = Add(w.o_bias);
    o.has_o_bias = true;
  }
  o.post_norm = Add(w.post_attention_layernorm);
  o.w_gate_up = AddContiguous({&w.gate_proj, &w.up_proj});
  o.w_down = Add(w.down_proj);
  return o;
}

absl::StatusOr<WeightArenaPlan> WeightArenaPlan::Create(const ModelWeights& weights) {
  const ModelConfig& c = weights.config;
  RETURN_IF_ERROR(CheckConfig(c));
  if (static_cast<int>(weights.layers.size()) != c.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", weights.layers.size(), " layers, config says ", c.num_layers));
  }
  const int64_t vocab = c.vocab_size, h = c.hidden_size;
  RETURN_IF_ERROR(CheckTensor(weights.embed_tokens, "model.embed_tokens.weight", {vocab, h}));
  RETURN_IF_ERROR(CheckTensor(weights.norm, "model.norm.weight", {h}));
  const bool tied = c.tie_word_embeddings || !weights.lm_head.valid() ||
                    weights.lm_head.data == weights.embed_tokens.data;
  if (!tied) RETURN_IF_ERROR(CheckTensor(weights.lm_head, "lm_head.weight", {vocab, h}));

  WeightArenaPlan plan;
  plan.embed_ = plan.Add(weights.embed_tokens);
  plan.final_norm_ = plan.Add(weights.norm);
  plan.lm_head_ = tied ? plan.embed_ : plan.Add(weights.lm_head);
  for (int i = 0; i < c.num_layers; ++i) {
    ASSIGN_OR_RETURN(LayerArenaOffsets o, plan.PlanLayer(c, weights.layers[i], i));
    plan.layers_.push_back(o);
  }
  return plan;
}

void WeightArenaPlan::FillF32(float* arena, ThreadPool& pool) const {
  for (const Part& p : parts_) {
    float* dst = arena + p.offset;
    pool.ParallelFor(
        p.tensor->numel(),
        [&](int64_t begin, int64_t end) {
          ConvertToF32(Slice(*p.tensor, begin, end), dst + begin);
        },
        /*grain=*/1 << 16);
  }
}

void WeightArenaPlan::FillBf16(uint16_t* arena, ThreadPool& pool) const {
  for (const Part& p : parts_) {
    uint16_t* dst = arena + p.offset;
    pool.ParallelFor(
        p.tensor->numel(),
        [&](int64_t begin, int64_t end) {
          ConvertToBf16(Slice(*p.tensor, begin, end), dst + begin);
        },
        /*grain=*/1 << 16);
  }
}

}  // namespace tandem
