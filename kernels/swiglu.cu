// SwiGLU (kernels/swiglu.h): grid.x walks the rows, grid.y (with a loop past its limit) the
// columns; each thread makes 8 outputs from 16-byte vectors when inter and the pointers allow,
// one output otherwise.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/bf16_vector.cuh"
#include "kernels/swiglu_launch.h"

namespace tandem::kernels::internal {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGridY = 65535;

// silu(g) * u as common/backend/row_ops.h SiluMul computes it (precise expf and division).
__device__ __forceinline__ float SiluMul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

template <bool kVector>
__global__ void SwiGluKernel(const __nv_bfloat16* __restrict__ gate_up, int inter,
                             __nv_bfloat16* __restrict__ out) {
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* gate = gate_up + row * 2 * inter;
  const __nv_bfloat16* up = gate + inter;
  __nv_bfloat16* y = out + row * inter;
  const int stride = gridDim.y * blockDim.x;
  if constexpr (kVector) {
    const int vectors = inter / kBf16PerVector;
    for (int v = blockIdx.y * blockDim.x + threadIdx.x; v < vectors; v += stride) {
      const int base = v * kBf16PerVector;
      float g[kBf16PerVector];
      float u[kBf16PerVector];
      LoadBf16x8(gate + base, g);
      LoadBf16x8(up + base, u);
#pragma unroll
      for (int i = 0; i < kBf16PerVector; ++i) g[i] = SiluMul(g[i], u[i]);
      StoreBf16x8(y + base, g);
    }
  } else {
    for (int j = blockIdx.y * blockDim.x + threadIdx.x; j < inter; j += stride) {
      y[j] = __float2bfloat16_rn(SiluMul(__bfloat162float(gate[j]), __bfloat162float(up[j])));
    }
  }
}

}  // namespace

cudaError_t LaunchSwiGlu(const __nv_bfloat16* gate_up, int n, int inter, __nv_bfloat16* out,
                         cudaStream_t stream) {
  // Rows start 2 * inter (input) and inter (output) elements apart: with inter a multiple of 8
  // every row is 16-byte aligned when the base pointers are.
  const bool vector = inter % kBf16PerVector == 0 && IsAligned16(gate_up) && IsAligned16(out);
  const int64_t items = vector ? inter / kBf16PerVector : inter;
  const int threads = BlockThreadsFor(items, kThreads);
  int64_t blocks_y = (items + threads - 1) / threads;
  if (blocks_y > kMaxGridY) blocks_y = kMaxGridY;
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(blocks_y));
  if (vector) {
    SwiGluKernel<true><<<grid, threads, 0, stream>>>(gate_up, inter, out);
  } else {
    SwiGluKernel<false><<<grid, threads, 0, stream>>>(gate_up, inter, out);
  }
  return cudaGetLastError();
}

}  // namespace tandem::kernels::internal
