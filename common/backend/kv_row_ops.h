// The cpu backend's reads and writes of one KV row (head_dim values of one token and KV head) in
// a pool of f32, bf16 or fp8 E4M3 elements. Reads widen to f32 and compute in f32 with the same
// accumulation order as simd::Dot / simd::Axpy, so an f32 pool gives exactly what those give.
// fp8 rows hold value / scale (common/kv/kv_scales.h); the caller multiplies the scale back in
// (into the score, or into the probability weighting V), never per element.
#ifndef TANDEM_COMMON_BACKEND_KV_ROW_OPS_H_
#define TANDEM_COMMON_BACKEND_KV_ROW_OPS_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/backend/simd.h"
#include "common/types/dtype.h"
#include "common/util/fp8.h"
#include "common/util/half.h"

namespace tandem::kvrow {

using Bf16 = uint16_t;
using Fp8 = uint8_t;

// The f32 value of one element.
inline float ToF32(float v) { return v; }
inline float ToF32(Bf16 v) { return Bf16ToF32(v); }
inline float ToF32(Fp8 v) { return Fp8E4M3ToF32(v); }

#if TANDEM_CPU_AVX2
// Eight consecutive elements widened to f32.
inline simd::Vec Load8(const float* p) { return simd::VLoad(p); }
inline simd::Vec Load8(const Bf16* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
// E4M3's seven low bits placed at bits 13..7 of an IEEE half are a half of value/2^8 (subnormals
// included, as F16C converts them exactly); the sign goes to bit 15. Exact for every code but
// the two NaN codes, which the cpu backend never writes (F32ToFp8E4M3 saturates).
inline simd::Vec Load8(const Fp8* p) {
  const __m128i bytes = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m128i sign = _mm_slli_epi16(_mm_and_si128(bytes, _mm_set1_epi16(0x80)), 8);
  const __m128i mag = _mm_slli_epi16(_mm_and_si128(bytes, _mm_set1_epi16(0x7f)), 7);
  return _mm256_mul_ps(_mm256_cvtph_ps(_mm_or_si128(sign, mag)), _mm256_set1_ps(256.0f));
}
#else
template <typename T>
inline simd::Vec Load8(const T* p) {
  simd::Vec r;
  for (int l = 0; l < simd::kLanes; ++l) r.v[l] = ToF32(p[l]);
  return r;
}
#endif

// sum_i a[i] * b[i], in simd::Dot's order.
template <typename T>
inline float Dot(const float* a, const T* b, int n) {
  int i = 0;
  simd::Vec acc = simd::VZero();
  for (; i + simd::kLanes <= n; i += simd::kLanes) {
    acc = simd::VFma(simd::VLoad(a + i), Load8(b + i), acc);
  }
  float s = simd::Hsum(acc);
  for (; i < n; ++i) s = std::fma(a[i], ToF32(b[i]), s);
  return s;
}

// out[i] = the f32 value of x[i].
template <typename T>
inline void Widen(const T* x, int n, float* out) {
  int i = 0;
  for (; i + simd::kLanes <= n; i += simd::kLanes) simd::VStore(out + i, Load8(x + i));
  for (; i < n; ++i) out[i] = ToF32(x[i]);
}

// y[i] += a * x[i], in simd::Axpy's order.
template <typename T>
inline void Axpy(float a, const T* x, float* y, int n) {
  int i = 0;
  const simd::Vec av = simd::VBroadcast(a);
  for (; i + simd::kLanes <= n; i += simd::kLanes) {
    simd::VStore(y + i, simd::VFma(av, Load8(x + i), simd::VLoad(y + i)));
  }
  for (; i < n; ++i) y[i] = std::fma(a, ToF32(x[i]), y[i]);
}

// Stores n values: f32 as they are, bf16 rounded to nearest even, fp8 as E4M3(x * inv_scale)
// (inv_scale = 1 / the head's scale, a power of two, so the product is exact).
inline void Store(const float* x, int n, float* dst, float /*inv_scale*/) {
  std::memcpy(dst, x, sizeof(float) * n);
}
inline void Store(const float* x, int n, Bf16* dst, float /*inv_scale*/) {
  for (int i = 0; i < n; ++i) dst[i] = F32ToBf16(x[i]);
}
inline void Store(const float* x, int n, Fp8* dst, float inv_scale) {
  for (int i = 0; i < n; ++i) dst[i] = F32ToFp8E4M3(x[i] * inv_scale);
}

}  // namespace tandem::kvrow

#endif  // TANDEM_COMMON_BACKEND_KV_ROW_OPS_H_
