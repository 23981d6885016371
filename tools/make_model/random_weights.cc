#include "tools/make_model/random_weights.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "common/model/model_weights.h"

namespace tandem {
namespace {

// FNV-1a: mixes a tensor's name into its seed.
uint64_t HashName(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// What a tensor is initialised as: value = center + stddev * N(0, 1).
struct Init {
  float center = 0.0f;
  float stddev = 0.0f;
};

Init InitFor(const std::string& name, const std::vector<int64_t>& shape, const ModelConfig& c,
             const WeightScales& s) {
  const float h = static_cast<float>(c.hidden_size);
  const float q_size = static_cast<float>(c.q_size());
  const float inter = static_cast<float>(c.intermediate_size);
  // Norms, including Qwen3's per-head q/k norms: those set the attention score scale directly
  // (scores of unit-rms q and k have std ~ w_q * w_k), so they centre on qk_gain instead of 1.
  if (absl::EndsWith(name, "q_norm.weight") || absl::EndsWith(name, "k_norm.weight")) {
    return {s.qk_gain, s.norm_noise};
  }
  if (absl::EndsWith(name, "norm.weight") || absl::EndsWith(name, "layernorm.weight")) {
    return {1.0f, s.norm_noise};
  }
  if (absl::EndsWith(name, ".bias")) return {0.0f, s.bias_std};
  const float head_std = s.logit_std / std::sqrt(h);
  if (name == "lm_head.weight") return {0.0f, head_std};
  if (name == "model.embed_tokens.weight") {
    // Tied: the embedding is the LM head, so it takes the head's scale.
    return {0.0f, c.tie_word_embeddings ? head_std : s.embed_std};
  }
  // Projections read RMS-normalized (unit-rms) inputs.
  const float unit = 1.0f / std::sqrt(h);
  // The sub-layers write to the residual stream in units of the embedding's scale. A tied
  // embedding is also the LM head, so the current token's own row would dominate the logits
  // (its logit grows like sqrt(hidden) * logit_std / |stream|) and the model would mostly repeat
  // its input; the sub-layers then write more, so that this self-logit stays near
  // tied_self_logit * logit_std.
  float stream = s.embed_std;
  if (c.tie_word_embeddings) {
    const float r = s.tied_self_logit;
    const float needed = (h / (r * r) - 1.0f) / (2.0f * static_cast<float>(c.num_layers));
    stream = head_std * std::max(1.0f, std::sqrt(std::max(needed, 0.0f)));
  }
  if (absl::EndsWith(name, "q_proj.weight") || absl::EndsWith(name, "k_proj.weight")) {
    // With q/k norms the projection scale cancels out; keep it unit.
    return {0.0f, c.qk_norm ? unit : s.qk_gain * unit};
  }
  if (absl::EndsWith(name, "v_proj.weight")) return {0.0f, unit};
  if (absl::EndsWith(name, "o_proj.weight")) {
    return {0.0f, stream * s.out_gain / std::sqrt(q_size)};
  }
  if (absl::EndsWith(name, "gate_proj.weight") || absl::EndsWith(name, "up_proj.weight")) {
    return {0.0f, unit};
  }
  if (absl::EndsWith(name, "down_proj.weight")) {
    return {0.0f, stream * s.mlp_gain / std::sqrt(inter)};
  }
  // Any tensor not named above: a unit-variance fan-in init.
  return {0.0f, shape.empty() ? 1.0f : 1.0f / std::sqrt(static_cast<float>(shape.back()))};
}

// The layer index in "model.layers.<i>.…", or -1.
int LayerIndex(const std::string& name) {
  constexpr absl::string_view kPrefix = "model.layers.";
  if (!absl::StartsWith(name, kPrefix)) return -1;
  int index = 0;
  size_t i = kPrefix.size();
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i)
    index = index * 10 + (name[i] - '0');
  return index;
}

// InitFor, with the output projections of the extra layers scaled (WeightScales).
Init ScaledInitFor(const std::string& name, const std::vector<int64_t>& shape, const ModelConfig& c,
                   const WeightScales& s) {
  Init init = InitFor(name, shape, c, s);
  if (s.extra_layers_from >= 0 && LayerIndex(name) >= s.extra_layers_from &&
      (absl::StrContains(name, ".o_proj.") || absl::StrContains(name, ".down_proj."))) {
    init.center *= s.extra_layer_gain;
    init.stddev *= s.extra_layer_gain;
  }
  return init;
}

}  // namespace

float GaussianSource::Next(float stddev) {
  const uint64_t r = rng_.Next();
  // Four 16-bit uniforms (k + 1/2) / 2^16 summed, minus their mean 2, have variance 4/12; in
  // integer units of 2^-17 the sum is (2 * sum_k + 4) - 2^18, exact in float.
  int64_t sum = 0;
  for (int i = 0; i < 4; ++i) sum += static_cast<int64_t>((r >> (16 * i)) & 0xffff);
  const float centred = static_cast<float>(2 * sum + 4 - (int64_t{1} << 18));
  // unit variance: divide by 2^17 * sqrt(1/3)
  const float scale = static_cast<float>(static_cast<double>(stddev) * std::sqrt(3.0) / 131072.0);
  return centred * scale;
}

std::vector<GeneratedTensor> GenerateRandomWeights(const ModelConfig& config, uint64_t seed,
                                                   const WeightScales& scales) {
  std::vector<GeneratedTensor> out;
  for (TensorSpec& spec : ExpectedTensors(config)) {
    GeneratedTensor t;
    t.name = std::move(spec.name);
    t.shape = std::move(spec.shape);
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    const Init init = ScaledInitFor(t.name, t.shape, config, scales);
    GaussianSource gauss(SplitMix64(seed ^ HashName(t.name)).Next());
    t.values.resize(static_cast<size_t>(numel));
    for (float& v : t.values) v = init.center + gauss.Next(init.stddev);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace tandem
