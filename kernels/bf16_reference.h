// Host-side bf16 helpers for the kernels' CPU references and their tests: bf16 values are carried
// as their 16 bits (uint16_t), converted with round-to-nearest-even like __float2bfloat16.
#ifndef TANDEM_KERNELS_BF16_REFERENCE_H_
#define TANDEM_KERNELS_BF16_REFERENCE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "common/util/half.h"

namespace tandem::kernels {

using Bf16Bits = uint16_t;

inline float Bf16ToFloat(Bf16Bits v) { return Bf16ToF32(v); }
inline Bf16Bits FloatToBf16(float f) { return F32ToBf16(f); }
// f rounded through bf16 and back.
inline float RoundToBf16(float f) { return Bf16ToF32(F32ToBf16(f)); }

std::vector<Bf16Bits> ToBf16(std::span<const float> values);
std::vector<float> FromBf16(std::span<const Bf16Bits> values);

// Deterministic uniform values in [lo, hi) from `seed` (splitmix64), for tests and benchmarks.
std::vector<float> RandomUniform(size_t n, float lo, float hi, uint64_t seed);

// The largest relative error a single bf16 rounding can make (2^-8), and the bound tests use for a
// result computed in f32 from bf16 inputs and rounded once to bf16.
inline constexpr float kBf16Epsilon = 1.0f / 256.0f;

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_BF16_REFERENCE_H_
