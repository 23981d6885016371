// KV pool elements as RopeKvWrite writes them and the attention kernels read them (.cu only): bf16,
// or FP8 E4M3 codes of value / scale with one scale per (layer, K|V, kv head) (common/kv/
// kv_scales.h; the scales are powers of two, so dividing by one is exact and E4M3's rounding is the
// only error). Every E4M3 value is a bf16 value, so a code widens to bf16 exactly and the tensor-
// core kernels run unchanged on it; the scales multiply the score (K) and the output (V) instead
// of each element.
#ifndef TANDEM_KERNELS_KV_ELEMENT_CUH_
#define TANDEM_KERNELS_KV_ELEMENT_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/bf16_vector.cuh"

namespace tandem::kernels::internal {

// 8 consecutive elements from p as 8 bf16 in one uint4: bf16 loaded as they are (p 16-byte
// aligned), fp8 codes (p 8-byte aligned) widened exactly.
__device__ __forceinline__ uint4 LoadKvAsBf16x8(const __nv_bfloat16* p) {
  return *reinterpret_cast<const uint4*>(p);
}
// 8 E4M3 codes (in memory order) as 8 bf16, exactly.
__device__ __forceinline__ uint4 WidenFp8x8ToBf16(const uint2 raw) {
  const __nv_fp8x2_storage_t* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&raw);
  uint4 out;
  __nv_bfloat162* bf = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2 h = __half2(__nv_cvt_fp8x2_to_halfraw2(pairs[i], __NV_E4M3));
    bf[i] = __float22bfloat162_rn(__half22float2(h));  // exact: E4M3 values are bf16 values
  }
  return out;
}
__device__ __forceinline__ uint4 LoadKvAsBf16x8(const __nv_fp8_e4m3* p) {
  return WidenFp8x8ToBf16(*reinterpret_cast<const uint2*>(p));
}

// out[0..8) = f32 of 8 consecutive elements (the codes' values for fp8, unscaled).
__device__ __forceinline__ void LoadKvF32x8(const __nv_bfloat16* p, float (&out)[8]) {
  LoadBf16x8(p, out);
}
__device__ __forceinline__ void LoadKvF32x8(const __nv_fp8_e4m3* p, float (&out)[8]) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const __nv_fp8x2_storage_t* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pairs[i], __NV_E4M3)));
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// Stores `value` as one element: bf16 rounded to nearest even, or the E4M3 code of
// value * inv_scale (to nearest even, saturating at ±448: common/util/fp8.h's codec).
__device__ __forceinline__ void StoreKv(__nv_bfloat16* p, float value, float /*inv_scale*/) {
  *p = __float2bfloat16_rn(value);
}
__device__ __forceinline__ void StoreKv(__nv_fp8_e4m3* p, float value, float inv_scale) {
  p->__x = __nv_cvt_float_to_fp8(value * inv_scale, __NV_SATFINITE, __NV_E4M3);
}

}  // namespace tandem::kernels::internal

#endif  // TANDEM_KERNELS_KV_ELEMENT_CUH_
