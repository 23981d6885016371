// The arithmetic the GPU sampler (kernels/sampling.cu) and its CPU reference
// (kernels/sampling_reference.cc) share, host and device alike, so both pick the same token bit for
// bit: the ranking key of a token, its softmax weight (an exp written with explicit fmaf, so no
// compiler contraction or libm difference can change it), the weight as a 64-bit fixed-point mass
// (sums of integers are exact in any order), and the top-p and walk thresholds on those masses.
#ifndef TANDEM_KERNELS_SAMPLING_MATH_H_
#define TANDEM_KERNELS_SAMPLING_MATH_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/sampling_rng.h"  // TANDEM_HOST_DEVICE, SamplingUniform

// Bit-for-bit agreement needs IEEE arithmetic on both sides (no flush to zero, no approximate
// division or reassociation).
#if defined(__FAST_MATH__) || defined(__USE_FAST_MATH__)
#error "kernels/sampling_math.h must not be compiled with fast math"
#endif

namespace tandem::kernels {

TANDEM_HOST_DEVICE inline uint32_t SamplingFloatBits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

TANDEM_HOST_DEVICE inline float SamplingFloatFromBits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

// A token's rank key: larger key = ranked first. The high word orders the logit (as the ordered
// bits of the float, -0 taken as +0), the low word puts the lower index first among equal logits.
// Keys of distinct indices are distinct.
TANDEM_HOST_DEVICE inline uint64_t SamplingKey(float logit, int32_t index) {
  uint32_t bits = SamplingFloatBits(logit == 0.0f ? 0.0f : logit);
  bits = (bits & 0x80000000u) != 0 ? ~bits : (bits | 0x80000000u);
  return (static_cast<uint64_t>(bits) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(index));
}

// exp(x) for x <= 0 (positive x is taken as 0), within a few ulp; 0 for x < -87 (the fixed-point
// mass of such a weight is 0 anyway), -inf and NaN. Every multiply-add is an explicit fmaf and
// every other step one correctly rounded operation, so host and device agree bit for bit.
TANDEM_HOST_DEVICE inline float SamplingExp(float x) {
  if (!(x >= -87.0f)) return 0.0f;
  if (x > 0.0f) x = 0.0f;
  const float n = rintf(x * 1.44269502f);     // round(x / ln 2), in [-126, 0]
  float r = fmaf(n, -0.693145751953125f, x);  // x - n ln2 (Cody-Waite: high part ...
  r = fmaf(n, -1.42860676533018e-06f, r);     // ... then low part), |r| <= 0.35
  // exp(r) by its Taylor series to r^7 (truncation error < 1e-8 for |r| <= 0.35).
  float p = 1.0f / 5040.0f;
  p = fmaf(p, r, 1.0f / 720.0f);
  p = fmaf(p, r, 1.0f / 120.0f);
  p = fmaf(p, r, 1.0f / 24.0f);
  p = fmaf(p, r, 1.0f / 6.0f);
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  const float scale = SamplingFloatFromBits(static_cast<uint32_t>(static_cast<int>(n) + 127) << 23);
  return p * scale;  // p * 2^n
}

// The softmax weight of a logit: exp((logit - max_logit) / temperature), in [0, 1]; 1 for the max.
TANDEM_HOST_DEVICE inline float SamplingWeight(float logit, float max_logit, float temperature) {
  return SamplingExp((logit - max_logit) / temperature);
}

// Bits of the fixed-point masses for a vocabulary: 63 - ceil(log2(vocab)), so a mass is at most
// 2^shift and the sum over the whole vocabulary at most 2^63.
TANDEM_HOST_DEVICE inline int SamplingFixedShift(int vocab) {
  int bits = 0;
  while (bits < 31 && (int64_t{1} << bits) < vocab) ++bits;
  return 63 - bits;
}

// A weight in [0, 1] as an integer mass: floor(weight * 2^shift).
TANDEM_HOST_DEVICE inline uint64_t SamplingFixedMass(float weight, int shift) {
  const float scale = SamplingFloatFromBits(static_cast<uint32_t>(shift + 127) << 23);  // 2^shift
  return static_cast<uint64_t>(weight * scale);
}

// The mass the top-p prefix must reach: floor(top_p * mass_k) (mass_k itself for top_p >= 1, 0 for
// top_p <= 0 or NaN: then only the best token is kept).
TANDEM_HOST_DEVICE inline uint64_t SamplingTopPTarget(float top_p, uint64_t mass_k) {
  if (!(top_p > 0.0f)) return 0;
  if (top_p >= 1.0f) return mass_k;
  const uint64_t target =
      static_cast<uint64_t>(static_cast<double>(top_p) * static_cast<double>(mass_k));
  return target < mass_k ? target : mass_k;
}

// The walk's threshold: the chosen token is the first kept one (in index order) whose running mass
// exceeds floor(u * mass_kept). For u < 1 and mass_kept > 0 it is below mass_kept, so some token
// always does.
TANDEM_HOST_DEVICE inline uint64_t SamplingWalkThreshold(float u, uint64_t mass_kept) {
  return static_cast<uint64_t>(static_cast<double>(u) * static_cast<double>(mass_kept));
}

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_SAMPLING_MATH_H_
