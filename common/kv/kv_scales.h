// The scales of an fp8 (E4M3) KV pool: one per (layer, K|V, kv head). A value x is stored as the
// E4M3 code of x / scale and read back as value(code) * scale.
//
// How they are chosen (the cpu backend's calibration, cpu_kv_calibration.cc): at load, one
// prefill of a fixed token sequence runs with an f32 pool, and each (layer, K|V, head) gets the
// smallest power of two s with amax / s <= kFp8CalibratedMax, where amax is the largest |value|
// that head stored. So the calibrated range lands in (56, 112] of E4M3's ±448: values up to 4-8x
// beyond what calibration saw still fit before saturating, at no cost in precision (E4M3's
// relative step is the same 1/16 from 2^-6 to 448, and the calibrated values sit far above 2^-6).
//
// Why powers of two: dividing by one is exact, so the only error is E4M3's own rounding; two
// calibrations whose amax differ in their last bits (another thread count, another CPU) agree on
// the scale; and it folds into the attention score at no cost. Why per head and from the model
// (vLLM: one scale per layer, 1.0 unless a checkpoint or its first batch sets it): heads differ by
// orders of magnitude, and scales taken from whatever batch came first would differ between a
// prefill node and a decode node. Both nodes derive the same scales from the same model, and
// the handoff still compares their fingerprints (KvLayout::scale_fingerprint) before any KV moves.
#ifndef TANDEM_COMMON_KV_KV_SCALES_H_
#define TANDEM_COMMON_KV_KV_SCALES_H_

#include <cstdint>
#include <span>
#include <vector>

namespace tandem {

// Where a calibrated amax is placed in E4M3's range (kFp8E4M3Max / 4).
inline constexpr float kFp8CalibratedMax = 112.0f;

struct KvScales {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  std::vector<float> values;  // [layer][kv][head]; empty for dtypes without scales

  bool empty() const { return values.empty(); }
  float at(int layer, int kv, int head) const {
    return values[(static_cast<size_t>(layer) * 2 + kv) * num_kv_heads + head];
  }
};

// The smallest power of two s with amax / s <= kFp8CalibratedMax; 1 when amax is 0 or not finite.
float Fp8ScaleForAmax(float amax);

// Scales for amax[(layer * 2 + kv) * num_kv_heads + head].
KvScales Fp8ScalesFromAmax(int32_t num_layers, int32_t num_kv_heads, std::span<const float> amax);

// FNV-1a over the scales' bit patterns and shape; never 0 (0 means "no scales" in a KvLayout).
uint64_t KvScalesFingerprint(const KvScales& scales);

}  // namespace tandem

#endif  // TANDEM_COMMON_KV_KV_SCALES_H_
