// Deterministic random weights for a Llama-family config, scaled so the model's next-token
// distributions are peaked (top-1 logit well above top-2) yet still depend on the context.
//
// Small-scale random weights give near-flat logits, where a greedy choice flips on rounding noise
// between two correct implementations. Here every sub-layer is scaled to add about one unit to a
// residual stream whose embedding is also about one unit, attention scores spread over a few
// units (so attention picks positions rather than averaging them), and the LM head turns the
// normalized final state into logits with a standard deviation of `logit_std` (default 12): with a
// 128k vocabulary the median top-1 margin is then about 2 logits.
#ifndef TANDEM_TOOLS_MAKE_MODEL_RANDOM_WEIGHTS_H_
#define TANDEM_TOOLS_MAKE_MODEL_RANDOM_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/model/model_config.h"

namespace tandem {

// splitmix64: a fixed generator, so a seed gives the same weights on every platform and compiler.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// Approximately normal draws from integer arithmetic only (no libm): the sum of four 16-bit
// uniforms (Irwin-Hall), centred and scaled to unit variance, bounded at about ±3.46.
class GaussianSource {
 public:
  explicit GaussianSource(uint64_t seed) : rng_(seed) {}
  // A draw times `stddev`, rounded once to float.
  float Next(float stddev);

 private:
  SplitMix64 rng_;
};

// The knobs of the init; the defaults are what tandem-make-model writes.
struct WeightScales {
  float embed_std = 1.0f;        // untied embedding (the residual stream's scale)
  float logit_std = 12.0f;       // std of the logits over the vocabulary
  float qk_gain = 1.4f;          // q/k projection gain: attention score std ~ qk_gain^2
  float out_gain = 1.0f;         // o_proj adds ~out_gain x (attention output) to the stream
  float mlp_gain = 1.7f;         // down_proj gain (SwiGLU output rms is ~0.6 of its inputs)
  float norm_noise = 0.1f;       // RMSNorm weights are 1 + norm_noise * N(0, 1)
  float bias_std = 0.2f;         // q/k/v/o biases
  float tied_self_logit = 2.0f;  // tied models: the input token's own logit, in logit_stds
  // Layers with index >= extra_layers_from (when >= 0) write extra_layer_gain times as much to
  // the residual stream (o_proj, down_proj and their biases scaled); 0 makes them identities.
  int extra_layers_from = -1;
  float extra_layer_gain = 1.0f;
};

struct GeneratedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// Weights for every tensor ExpectedTensors(config) lists, in that order. Each tensor's values
// depend only on (seed, tensor name, shape), not on the order or on the other tensors.
std::vector<GeneratedTensor> GenerateRandomWeights(const ModelConfig& config, uint64_t seed,
                                                   const WeightScales& scales = {});

}  // namespace tandem

#endif  // TANDEM_TOOLS_MAKE_MODEL_RANDOM_WEIGHTS_H_
