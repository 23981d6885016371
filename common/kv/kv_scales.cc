#include "common/kv/kv_scales.h"

#include <cmath>
#include <cstring>

namespace tandem {

float Fp8ScaleForAmax(float amax) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 1.0f;
  // amax = m * 2^e with m in [0.5, 1): start from the power of two at or above amax / 112 and
  // step down while the next smaller one still fits.
  int e;
  std::frexp(amax / kFp8CalibratedMax, &e);
  float s = std::ldexp(1.0f, e);
  while (amax / (s * 0.5f) <= kFp8CalibratedMax) s *= 0.5f;
  while (amax / s > kFp8CalibratedMax) s *= 2.0f;
  return s;
}

KvScales Fp8ScalesFromAmax(int32_t num_layers, int32_t num_kv_heads, std::span<const float> amax) {
  KvScales scales;
  scales.num_layers = num_layers;
  scales.num_kv_heads = num_kv_heads;
  scales.values.reserve(amax.size());
  for (float a : amax) scales.values.push_back(Fp8ScaleForAmax(a));
  return scales;
}

uint64_t KvScalesFingerprint(const KvScales& scales) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint32_t word) {
    for (int i = 0; i < 4; ++i) {
      h ^= (word >> (8 * i)) & 0xffu;
      h *= 0x100000001b3ull;
    }
  };
  mix(static_cast<uint32_t>(scales.num_layers));
  mix(static_cast<uint32_t>(scales.num_kv_heads));
  for (float s : scales.values) {
    uint32_t bits;
    std::memcpy(&bits, &s, sizeof(bits));
    mix(bits);
  }
  return h == 0 ? 1 : h;
}

}  // namespace tandem
