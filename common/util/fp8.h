// FP8 E4M3 (the OCP "E4M3FN" format that Hopper, vLLM and TensorRT-LLM store KV caches in):
// 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN, so
// the largest finite magnitude is 448 = 1.75 * 2^8; the smallest normal is 2^-6 and subnormals
// go down to 2^-9.
#ifndef TANDEM_COMMON_UTIL_FP8_H_
#define TANDEM_COMMON_UTIL_FP8_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tandem {

inline constexpr float kFp8E4M3Max = 448.0f;

// The value of one code; NaN for 0x7f and 0xff.
inline float Fp8E4M3ToF32(uint8_t code) {
  const uint32_t exp = (code >> 3) & 0xfu;
  const uint32_t mant = code & 0x7u;
  float magnitude;
  if (exp == 0xf && mant == 0x7) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    magnitude = std::ldexp(static_cast<float>(mant), -9);  // subnormal: mant/8 * 2^-6
  } else {
    magnitude = std::ldexp(static_cast<float>(8 + mant), static_cast<int>(exp) - 10);
  }
  return (code & 0x80u) != 0 ? -magnitude : magnitude;
}

// Fp8E4M3ToF32 of every code (index = code), for readers that widen many.
inline const std::array<float, 256>& Fp8E4M3Values() {
  static const std::array<float, 256> values = [] {
    std::array<float, 256> v{};
    for (int code = 0; code < 256; ++code) v[code] = Fp8E4M3ToF32(static_cast<uint8_t>(code));
    return v;
  }();
  return values;
}

// Rounds to the nearest code, ties to the even code; magnitudes above 448 (infinities included)
// saturate to ±448; NaN becomes the NaN code 0x7f (with its sign). -0 stays -0.
inline uint8_t F32ToFp8E4M3(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7f;          // NaN
  if (abs >= 0x43e00000u) return sign | 0x7e;         // >= 448 (and infinity): saturate
  const int exp = static_cast<int>(abs >> 23) - 127;  // unbiased f32 exponent
  if (exp < -6) {
    // Subnormal range of E4M3 (and f32 denormals): the code's mantissa counts units of 2^-9.
    // abs * 2^9 is exact in f32 here; nearbyint rounds half to even in the default FP mode.
    if (exp < -11) return sign;  // below 2^-11: under half of the smallest subnormal (2^-9)
    float units;
    std::memcpy(&units, &abs, sizeof(units));
    units = std::nearbyint(std::ldexp(units, 9));  // 0..8; 8 is the smallest normal, 0x08
    return sign | static_cast<uint8_t>(units);
  }
  // Normal: keep 3 of f32's 23 mantissa bits, rounding the 20 dropped bits to nearest even; a
  // carry out of the mantissa moves to the next exponent (still below 448 here).
  uint32_t code = (static_cast<uint32_t>(exp + 7) << 3) | ((abs >> 20) & 0x7u);
  const uint32_t rest = abs & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (code & 1u) != 0)) ++code;
  return sign | static_cast<uint8_t>(code);
}

}  // namespace tandem

#endif  // TANDEM_COMMON_UTIL_FP8_H_
