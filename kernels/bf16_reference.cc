#include "kernels/bf16_reference.h"

namespace tandem::kernels {

std::vector<Bf16Bits> ToBf16(std::span<const float> values) {
  std::vector<Bf16Bits> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = FloatToBf16(values[i]);
  return out;
}

std::vector<float> FromBf16(std::span<const Bf16Bits> values) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = Bf16ToFloat(values[i]);
  return out;
}

std::vector<float> RandomUniform(size_t n, float lo, float hi, uint64_t seed) {
  std::vector<float> out(n);
  uint64_t state = seed;
  for (size_t i = 0; i < n; ++i) {
    state += 0x9e3779b97f4a7c15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    out[i] = lo + (hi - lo) * u;
  }
  return out;
}

}  // namespace tandem::kernels
