// Device helpers shared by the memory-bound kernels (.cu only): 16-byte loads and stores of eight
// bf16 or four f32 values, and the alignment test that decides whether a kernel may use them.
#ifndef TANDEM_KERNELS_BF16_VECTOR_CUH_
#define TANDEM_KERNELS_BF16_VECTOR_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::kernels::internal {

// Elements per 16-byte vector.
inline constexpr int kBf16PerVector = 8;

// Whether `p` may be accessed with 16-byte vector loads/stores.
inline bool IsAligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// out[0..8) = f32(p[0..8)); p must be 16-byte aligned.
__device__ __forceinline__ void LoadBf16x8(const __nv_bfloat16* p, float (&out)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// p[0..8) = bf16(in[0..8)) rounded to nearest even; p must be 16-byte aligned.
__device__ __forceinline__ void StoreBf16x8(__nv_bfloat16* p, const float (&in)[8]) {
  uint4 raw;
  __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) pairs[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = raw;
}

// out[0..8) = p[0..8) as two float4 loads; p must be 16-byte aligned.
__device__ __forceinline__ void LoadF32x8(const float* p, float (&out)[8]) {
  const float4 lo = *reinterpret_cast<const float4*>(p);
  const float4 hi = *reinterpret_cast<const float4*>(p + 4);
  out[0] = lo.x;
  out[1] = lo.y;
  out[2] = lo.z;
  out[3] = lo.w;
  out[4] = hi.x;
  out[5] = hi.y;
  out[6] = hi.z;
  out[7] = hi.w;
}

// p[0..8) = in[0..8) as two float4 stores; p must be 16-byte aligned.
__device__ __forceinline__ void StoreF32x8(float* p, const float (&in)[8]) {
  *reinterpret_cast<float4*>(p) = make_float4(in[0], in[1], in[2], in[3]);
  *reinterpret_cast<float4*>(p + 4) = make_float4(in[4], in[5], in[6], in[7]);
}

// Threads for a block that walks `items` work items in a loop: a multiple of the warp size, at
// least one warp, at most `max_threads`.
inline int BlockThreadsFor(int64_t items, int max_threads) {
  int64_t threads = (items + 31) / 32 * 32;
  if (threads < 32) threads = 32;
  if (threads > max_threads) threads = max_threads;
  return static_cast<int>(threads);
}

}  // namespace tandem::kernels::internal

#endif  // TANDEM_KERNELS_BF16_VECTOR_CUH_
