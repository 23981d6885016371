#include "common/backend/rope.h"

#include <cmath>
#include <numbers>

namespace tandem {

std::vector<float> RopeInvFreq(const ModelConfig& config) {
  const int dim = config.head_dim;
  const int half = dim / 2;
  const float base = config.rope_theta;
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv_freq[i] = 1.0f / std::pow(base, exponent);
  }
  const RopeScaling& s = config.rope_scaling;
  switch (s.type) {
    case RopeScaling::Type::kNone:
      break;
    case RopeScaling::Type::kLinear:
      for (float& f : inv_freq) f /= s.factor;
      break;
    case RopeScaling::Type::kLlama3: {
      const float old_context = static_cast<float>(s.original_max_position_embeddings);
      const float low_freq_wavelen = old_context / s.low_freq_factor;
      const float high_freq_wavelen = old_context / s.high_freq_factor;
      const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
      for (float& f : inv_freq) {
        const float wavelen = two_pi / f;
        // Long wavelengths (low frequencies) are slowed down by `factor`.
        const float scaled = wavelen > low_freq_wavelen ? f / s.factor : f;
        const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
        if (medium) {
          const float smooth = (old_context / wavelen - s.low_freq_factor) /
                               (s.high_freq_factor - s.low_freq_factor);
          f = (1.0f - smooth) * scaled / s.factor + smooth * scaled;
        } else {
          f = scaled;
        }
      }
      break;
    }
  }
  return inv_freq;
}

void RopeCosSin(std::span<const float> inv_freq, int position, float* cos, float* sin) {
  const float pos = static_cast<float>(position);
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float angle = pos * inv_freq[i];
    cos[i] = std::cos(angle);
    sin[i] = std::sin(angle);
  }
}

void ApplyRope(float* head, const float* cos, const float* sin, int half) {
  float* x1 = head;
  float* x2 = head + half;
  for (int i = 0; i < half; ++i) {
    const float a = x1[i];
    const float b = x2[i];
    x1[i] = a * cos[i] - b * sin[i];
    x2[i] = b * cos[i] + a * sin[i];
  }
}

}  // namespace tandem
