#include "common/backend/cuda/cuda_weights.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/backend/weight_arena.h"
#include "common/util/status_macros.h"
#include "kernels/cuda_status.h"
#include "kernels/fill_random.h"

namespace tandem {
namespace {

CudaWeights PointInto(const WeightArenaPlan& plan, kernels::DeviceBuffer arena) {
  CudaWeights out;
  const auto* base = arena.as<const __nv_bfloat16>();
  out.embed = base + plan.embed();
  out.final_norm = base + plan.final_norm();
  out.lm_head = base + plan.lm_head();
  for (const LayerArenaOffsets& o : plan.layers()) {
    CudaLayerWeights l;
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
  out.arena = std::move(arena);
  return out;
}

// Views with the right names, shapes and sizes but no data behind them: enough for
// WeightArenaPlan to place a model that exists only on the device.
class ShapeOnlyWeights {
 public:
  explicit ShapeOnlyWeights(const ModelConfig& c) {
    const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size;
    w_.config = c;
    w_.embed_tokens = View("model.embed_tokens.weight", {c.vocab_size, h});
    w_.norm = View("model.norm.weight", {h});
    if (!c.tie_word_embeddings) w_.lm_head = View("lm_head.weight", {c.vocab_size, h});
    for (int i = 0; i < c.num_layers; ++i) {
      const std::string p = absl::StrCat("model.layers.", i, ".");
      LayerWeights l;
      l.input_layernorm = View(p + "input_layernorm.weight", {h});
      l.q_proj = View(p + "self_attn.q_proj.weight", {q, h});
      l.k_proj = View(p + "self_attn.k_proj.weight", {kv, h});
      l.v_proj = View(p + "self_attn.v_proj.weight", {kv, h});
      if (c.attention_bias) {
        l.q_bias = View(p + "self_attn.q_proj.bias", {q});
        l.k_bias = View(p + "self_attn.k_proj.bias", {kv});
        l.v_bias = View(p + "self_attn.v_proj.bias", {kv});
        if (c.architecture != Architecture::kQwen2)
          l.o_bias = View(p + "self_attn.o_proj.bias", {h});
      }
      if (c.qk_norm) {
        l.q_norm = View(p + "self_attn.q_norm.weight", {c.head_dim});
        l.k_norm = View(p + "self_attn.k_norm.weight", {c.head_dim});
      }
      l.o_proj = View(p + "self_attn.o_proj.weight", {h, q});
      l.post_attention_layernorm = View(p + "post_attention_layernorm.weight", {h});
      l.gate_proj = View(p + "mlp.gate_proj.weight", {inter, h});
      l.up_proj = View(p + "mlp.up_proj.weight", {inter, h});
      l.down_proj = View(p + "mlp.down_proj.weight", {h, inter});
      w_.layers.push_back(std::move(l));
    }
  }
  const ModelWeights& weights() const { return w_; }

 private:
  TensorView View(std::string name, std::vector<int64_t> shape) {
    TensorView t;
    t.name = std::move(name);
    t.dtype = DType::kBF16;
    t.shape = std::move(shape);
    t.data = &kNoData;  // never read
    t.nbytes = static_cast<size_t>(t.numel()) * 2;
    return t;
  }
  static constexpr uint8_t kNoData = 0;
  ModelWeights w_;
};

}  // namespace

absl::StatusOr<CudaWeights> UploadCudaWeights(const ModelWeights& weights, ThreadPool& pool) {
  ASSIGN_OR_RETURN(WeightArenaPlan plan, WeightArenaPlan::Create(weights));
  std::vector<uint16_t> host(plan.elements());
  plan.FillBf16(host.data(), pool);
  ASSIGN_OR_RETURN(kernels::DeviceBuffer arena,
                   kernels::DeviceBuffer::Allocate(host.size() * sizeof(uint16_t)));
  TANDEM_RETURN_IF_CUDA_ERROR(
      cudaMemcpy(arena.data(), host.data(), arena.bytes(), cudaMemcpyHostToDevice),
      "copying the weights to the GPU");
  return PointInto(plan, std::move(arena));
}

absl::StatusOr<CudaWeights> RandomCudaWeights(const ModelConfig& config, uint64_t seed) {
  ShapeOnlyWeights shapes(config);
  ASSIGN_OR_RETURN(WeightArenaPlan plan, WeightArenaPlan::Create(shapes.weights()));
  ASSIGN_OR_RETURN(kernels::DeviceBuffer arena,
                   kernels::DeviceBuffer::Allocate(plan.elements() * sizeof(uint16_t)));
  CudaWeights w = PointInto(plan, std::move(arena));
  auto* base = w.arena.as<__nv_bfloat16>();
  // Everything small and centred first, then the norms near 1.
  const float scale = 1.0f / std::sqrt(static_cast<float>(config.hidden_size));
  RETURN_IF_ERROR(kernels::FillRandomBf16(base, plan.elements(), -scale, scale, seed, nullptr));
  auto fill_norm = [&](const __nv_bfloat16* p, size_t n, uint64_t s) {
    return kernels::FillRandomBf16(const_cast<__nv_bfloat16*>(p), n, 0.9f, 1.1f, s, nullptr);
  };
  RETURN_IF_ERROR(fill_norm(w.final_norm, config.hidden_size, seed + 1));
  for (size_t i = 0; i < w.layers.size(); ++i) {
    RETURN_IF_ERROR(fill_norm(w.layers[i].input_norm, config.hidden_size, seed + 2 + 2 * i));
    RETURN_IF_ERROR(fill_norm(w.layers[i].post_norm, config.hidden_size, seed + 3 + 2 * i));
  }
  TANDEM_RETURN_IF_CUDA_ERROR(cudaDeviceSynchronize(), "filling random weights");
  return w;
}

}  // namespace tandem
