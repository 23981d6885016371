// Small f32 vector primitives of the CPU backend, written once with AVX2/FMA intrinsics (the build
// targets x86-64-v3) and once portably. Every function accumulates in one fixed order that does
// not depend on how its caller batches work, so results are reproducible bit for bit.
#ifndef TANDEM_COMMON_BACKEND_SIMD_H_
#define TANDEM_COMMON_BACKEND_SIMD_H_

#include <cmath>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define TANDEM_CPU_AVX2 1
#else
#define TANDEM_CPU_AVX2 0
#endif

namespace tandem::simd {

// Lanes of one vector register; dot products keep one accumulator of this many lanes.
inline constexpr int kLanes = 8;

#if TANDEM_CPU_AVX2
using Vec = __m256;
inline Vec VZero() { return _mm256_setzero_ps(); }
inline Vec VLoad(const float* p) { return _mm256_loadu_ps(p); }
inline void VStore(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline Vec VBroadcast(float a) { return _mm256_set1_ps(a); }
// a * b + c, fused.
inline Vec VFma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
// Horizontal sum in a fixed order: (lo128 + hi128), then pairs, then the last two.
inline float Hsum(Vec v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#else
// Portable stand-in for one 8-lane register, with the same arithmetic as the AVX2 path.
struct Vec {
  float v[kLanes];
};
inline Vec VZero() { return Vec{}; }
inline Vec VLoad(const float* p) {
  Vec r;
  for (int l = 0; l < kLanes; ++l) r.v[l] = p[l];
  return r;
}
inline void VStore(float* p, Vec v) {
  for (int l = 0; l < kLanes; ++l) p[l] = v.v[l];
}
inline Vec VBroadcast(float a) {
  Vec r;
  for (int l = 0; l < kLanes; ++l) r.v[l] = a;
  return r;
}
inline Vec VFma(Vec a, Vec b, Vec c) {
  for (int l = 0; l < kLanes; ++l) c.v[l] = std::fma(a.v[l], b.v[l], c.v[l]);
  return c;
}
inline float Hsum(Vec a) {
  float s[4];
  for (int i = 0; i < 4; ++i) s[i] = a.v[i] + a.v[i + 4];
  s[0] += s[2];
  s[1] += s[3];
  return s[0] + s[1];
}
#endif

// sum_i a[i] * b[i]: one 8-lane FMA accumulator over the multiple-of-8 prefix, Hsum, then the
// tail in order with fused multiply-adds. The GEMM micro-kernels follow exactly this order.
inline float Dot(const float* a, const float* b, int n) {
  int i = 0;
  Vec acc = VZero();
  for (; i + kLanes <= n; i += kLanes) acc = VFma(VLoad(a + i), VLoad(b + i), acc);
  float s = Hsum(acc);
  for (; i < n; ++i) s = std::fma(a[i], b[i], s);
  return s;
}

// y[i] += a * x[i].
inline void Axpy(float a, const float* x, float* y, int n) {
  int i = 0;
  Vec av = VBroadcast(a);
  for (; i + kLanes <= n; i += kLanes) VStore(y + i, VFma(av, VLoad(x + i), VLoad(y + i)));
  for (; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

// x[i] *= a.
inline void Scale(float a, float* x, int n) {
  for (int i = 0; i < n; ++i) x[i] *= a;
}

// sum_i x[i]^2, accumulated like Dot(x, x).
inline float SumSquares(const float* x, int n) { return Dot(x, x, n); }

}  // namespace tandem::simd

#endif  // TANDEM_COMMON_BACKEND_SIMD_H_
