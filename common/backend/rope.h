// Rotary position embeddings as Hugging Face's Llama/Qwen code computes them: the rotate_half
// convention (dimension i pairs with i + head_dim/2), inv_freq = theta^(-2i/d) in f32, with the
// `linear` and Llama 3.1 `llama3` rope_scaling variants, and angles f32(position) * inv_freq.
#ifndef TANDEM_COMMON_BACKEND_ROPE_H_
#define TANDEM_COMMON_BACKEND_ROPE_H_

#include <span>
#include <vector>

#include "common/model/model_config.h"

namespace tandem {

// inv_freq[i] for i in [0, head_dim/2), after rope_scaling (HF's _compute_*_parameters).
std::vector<float> RopeInvFreq(const ModelConfig& config);

// cos/sin[i] of the angle f32(position) * inv_freq[i]; both arrays hold inv_freq.size() floats.
void RopeCosSin(std::span<const float> inv_freq, int position, float* cos, float* sin);

// Rotates one head of 2*half values in place:
// out[i] = x[i]*cos[i] - x[i+half]*sin[i], out[i+half] = x[i+half]*cos[i] + x[i]*sin[i].
void ApplyRope(float* head, const float* cos, const float* sin, int half);

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_ROPE_H_
