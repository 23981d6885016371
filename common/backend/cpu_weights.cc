#include "common/backend/cpu_weights.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/util/status_macros.h"

namespace tandem {
namespace {

// Every tensor starts on a 64-byte boundary.
constexpr size_t kAlignFloats = 16;

size_t RoundUp(size_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Where each source tensor lands in the arena, decided before the arena is allocated.
class ArenaPlan {
 public:
  // Appends tensors back to back (one fused matrix); returns the offset of the first.
  size_t AddContiguous(std::initializer_list<const TensorView*> tensors) {
    size_t start = size_;
    size_t at = size_;
    for (const TensorView* t : tensors) {
      parts_.push_back({t, at});
      at += static_cast<size_t>(t->numel());
    }
    size_ = RoundUp(at);
    return start;
  }
  size_t Add(const TensorView& t) { return AddContiguous({&t}); }

  size_t size() const { return size_; }

  void Fill(float* arena, ThreadPool& pool) const {
    for (const Part& p : parts_) {
      float* dst = arena + p.offset;
      const size_t element_bytes = DTypeSize(p.tensor->dtype);
      pool.ParallelFor(
          p.tensor->numel(),
          [&](int64_t begin, int64_t end) {
            // Each thread converts its slice as a 1-D tensor of its own.
            TensorView slice;
            slice.dtype = p.tensor->dtype;
            slice.shape = {end - begin};
            slice.data = p.tensor->data + begin * element_bytes;
            slice.nbytes = static_cast<size_t>(end - begin) * element_bytes;
            ConvertToF32(slice, dst + begin);
          },
          /*grain=*/1 << 16);
    }
  }

 private:
  struct Part {
    const TensorView* tensor;
    size_t offset;
  };
  std::vector<Part> parts_;
  size_t size_ = 0;
};

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

// Offsets into the arena of one layer's tensors (pointers are taken once it is allocated).
struct LayerOffsets {
  size_t input_norm, wqkv, bqkv, q_norm, k_norm, wo, bo, post_norm, w_gate_up, w_down;
  bool has_bias = false;
  bool has_o_bias = false;
  bool has_qk_norm = false;
};

absl::StatusOr<LayerOffsets> PlanLayer(const ModelConfig& c, const LayerWeights& w, int index,
                                       ArenaPlan& plan) {
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
  LayerOffsets o{};
  o.input_norm = plan.Add(w.input_layernorm);
  o.wqkv = plan.AddContiguous({&w.q_proj, &w.k_proj, &w.v_proj});
  if (c.attention_bias) {
    RETURN_IF_ERROR(CheckTensor(w.q_bias, p + "self_attn.q_proj.bias", {q}));
    RETURN_IF_ERROR(CheckTensor(w.k_bias, p + "self_attn.k_proj.bias", {kv}));
    RETURN_IF_ERROR(CheckTensor(w.v_bias, p + "self_attn.v_proj.bias", {kv}));
    o.bqkv = plan.AddContiguous({&w.q_bias, &w.k_bias, &w.v_bias});
    o.has_bias = true;
  }
  if (c.qk_norm) {
    RETURN_IF_ERROR(CheckTensor(w.q_norm, p + "self_attn.q_norm.weight", {c.head_dim}));
    RETURN_IF_ERROR(CheckTensor(w.k_norm, p + "self_attn.k_norm.weight", {c.head_dim}));
    o.q_norm = plan.Add(w.q_norm);
    o.k_norm = plan.Add(w.k_norm);
    o.has_qk_norm = true;
  }
  o.wo = plan.Add(w.o_proj);
  // Llama/Mistral/Qwen3 attention_bias also biases o_proj; Qwen2 hard-wires q/k/v biases only.
  if (c.attention_bias && c.architecture != Architecture::kQwen2) {
    RETURN_IF_ERROR(CheckTensor(w.o_bias, p + "self_attn.o_proj.bias", {h}));
    o.bo = plan.Add(w.o_bias);
    o.has_o_bias = true;
  }
  o.post_norm = plan.Add(w.post_attention_layernorm);
  o.w_gate_up = plan.AddContiguous({&w.gate_proj, &w.up_proj});
  o.w_down = plan.Add(w.down_proj);
  return o;
}

}  // namespace

absl::StatusOr<CpuWeights> PackCpuWeights(const ModelWeights& weights, ThreadPool& pool) {
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

  ArenaPlan plan;
  const size_t embed = plan.Add(weights.embed_tokens);
  const size_t norm = plan.Add(weights.norm);
  const size_t lm_head = tied ? embed : plan.Add(weights.lm_head);
  std::vector<LayerOffsets> offsets;
  for (int i = 0; i < c.num_layers; ++i) {
    ASSIGN_OR_RETURN(LayerOffsets o, PlanLayer(c, weights.layers[i], i, plan));
    offsets.push_back(o);
  }

  CpuWeights out;
  if (!out.arena.Reset(plan.size())) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", plan.size() * 4, " bytes for the f32 weights"));
  }
  plan.Fill(out.arena.data(), pool);
  const float* base = out.arena.data();
  out.embed = base + embed;
  out.final_norm = base + norm;
  out.lm_head = base + lm_head;
  for (const LayerOffsets& o : offsets) {
    CpuLayerWeights l;
    l.input_norm = base + o.input_norm;
    l.wqkv = base + o.wqkv;
    l.bqkv = o.has_bias ? base + o.bqkv : nullptr;
    l.q_norm = o.has_qk_norm ? base + o.q_norm : nullptr;
    l.k_norm = o.has_qk_norm ? base + o.k_norm : nullptr;
    l.wo = base + o.wo;
    l.bo = o.has_o_bias ? base + o.bo : nullptr;
    l.post_norm = base + o.post_norm;
    l.w_gate_up = base + o.w_gate_up;
    l.w_down = base + o.w_down;
    out.layers.push_back(l);
  }
  return out;
}

}  // namespace tandem
