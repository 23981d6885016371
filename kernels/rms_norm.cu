// RMSNorm fused with the residual add (kernels/rms_norm.h): one thread block per row. Pass 1 adds
// the delta into the f32 residual and sums the squares; a block reduction gives the row's RMS;
// pass 2 re-reads the row (each thread its own elements, just written) and writes the bf16 output.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/bf16_vector.cuh"
#include "kernels/block_reduce.cuh"
#include "kernels/rms_norm_launch.h"

namespace tandem::kernels::internal {
namespace {

constexpr int kMaxThreads = 1024;

template <bool kVector>
__global__ void RmsNormResidualKernel(float* __restrict__ residual,
                                      const __nv_bfloat16* __restrict__ delta,
                                      const __nv_bfloat16* __restrict__ delta_bias,
                                      const __nv_bfloat16* __restrict__ weight, int hidden,
                                      float eps, __nv_bfloat16* __restrict__ out) {
  const int64_t row = blockIdx.x;
  float* x = residual + row * hidden;
  const __nv_bfloat16* d = delta != nullptr ? delta + row * hidden : nullptr;
  __nv_bfloat16* y = out + row * hidden;

  float sum_squares = 0.0f;
  if constexpr (kVector) {
    const int vectors = hidden / kBf16PerVector;
    for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
      const int base = v * kBf16PerVector;
      float values[kBf16PerVector];
      LoadF32x8(x + base, values);
      if (d != nullptr) {
        float add[kBf16PerVector];
        LoadBf16x8(d + base, add);
        if (delta_bias != nullptr) {
          float bias[kBf16PerVector];
          LoadBf16x8(delta_bias + base, bias);
#pragma unroll
          for (int i = 0; i < kBf16PerVector; ++i) add[i] += bias[i];
        }
#pragma unroll
        for (int i = 0; i < kBf16PerVector; ++i) values[i] += add[i];
        StoreF32x8(x + base, values);
      }
#pragma unroll
      for (int i = 0; i < kBf16PerVector; ++i) sum_squares += values[i] * values[i];
    }
  } else {
    for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
      float value = x[j];
      if (d != nullptr) {
        float add = __bfloat162float(d[j]);
        if (delta_bias != nullptr) add += __bfloat162float(delta_bias[j]);
        value += add;
        x[j] = value;
      }
      sum_squares += value * value;
    }
  }

  sum_squares = BlockSum(sum_squares);
  const float inv_rms = 1.0f / sqrtf(sum_squares / static_cast<float>(hidden) + eps);

  if constexpr (kVector) {
    const int vectors = hidden / kBf16PerVector;
    for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
      const int base = v * kBf16PerVector;
      float values[kBf16PerVector];
      float w[kBf16PerVector];
      LoadF32x8(x + base, values);
      LoadBf16x8(weight + base, w);
#pragma unroll
      for (int i = 0; i < kBf16PerVector; ++i) values[i] = w[i] * (values[i] * inv_rms);
      StoreBf16x8(y + base, values);
    }
  } else {
    for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
      y[j] = __float2bfloat16_rn(__bfloat162float(weight[j]) * (x[j] * inv_rms));
    }
  }
}

}  // namespace

cudaError_t LaunchRmsNormResidual(float* residual, const __nv_bfloat16* delta,
                                  const __nv_bfloat16* delta_bias, const __nv_bfloat16* weight,
                                  int n, int hidden, float eps, __nv_bfloat16* out,
                                  cudaStream_t stream) {
  const bool vector = hidden % kBf16PerVector == 0 && IsAligned16(residual) &&
                      (delta == nullptr || IsAligned16(delta)) &&
                      (delta_bias == nullptr || IsAligned16(delta_bias)) && IsAligned16(weight) &&
                      IsAligned16(out);
  if (vector) {
    const int threads = BlockThreadsFor(hidden / kBf16PerVector, kMaxThreads);
    RmsNormResidualKernel<true>
        <<<n, threads, 0, stream>>>(residual, delta, delta_bias, weight, hidden, eps, out);
  } else {
    const int threads = BlockThreadsFor(hidden, kMaxThreads);
    RmsNormResidualKernel<false>
        <<<n, threads, 0, stream>>>(residual, delta, delta_bias, weight, hidden, eps, out);
  }
  return cudaGetLastError();
}

}  // namespace tandem::kernels::internal
