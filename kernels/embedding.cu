// Row gathers (kernels/embedding.h): one thread block per gathered row, 16-byte vectors when the
// row width and the pointers allow, one element per thread step otherwise.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/bf16_vector.cuh"
#include "kernels/embedding_launch.h"

namespace tandem::kernels::internal {
namespace {

constexpr int kMaxThreads = 256;

template <bool kVector>
__global__ void EmbeddingGatherKernel(const __nv_bfloat16* __restrict__ table, int vocab,
                                      int hidden, const int32_t* __restrict__ ids,
                                      float* __restrict__ x) {
  const int64_t row = blockIdx.x;
  const int32_t id = ids[row];
  const bool valid = id >= 0 && id < vocab;
  // An invalid id never forms a table address: its row is zeros.
  const __nv_bfloat16* src = table + (valid ? int64_t{id} * hidden : int64_t{0});
  float* dst = x + row * hidden;
  if constexpr (kVector) {
    const int vectors = hidden / kBf16PerVector;
    for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
      float values[kBf16PerVector];
      if (valid) {
        LoadBf16x8(src + v * kBf16PerVector, values);
      } else {
#pragma unroll
        for (int i = 0; i < kBf16PerVector; ++i) values[i] = 0.0f;
      }
      StoreF32x8(dst + v * kBf16PerVector, values);
    }
  } else {
    for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
      dst[j] = valid ? __bfloat162float(src[j]) : 0.0f;
    }
  }
}

template <bool kVector>
__global__ void GatherRowsKernel(const __nv_bfloat16* __restrict__ src, int width,
                                 const int32_t* __restrict__ rows,
                                 __nv_bfloat16* __restrict__ dst) {
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* from = src + int64_t{rows[row]} * width;
  __nv_bfloat16* to = dst + row * width;
  if constexpr (kVector) {
    const int vectors = width / kBf16PerVector;
    const uint4* from_vectors = reinterpret_cast<const uint4*>(from);
    uint4* to_vectors = reinterpret_cast<uint4*>(to);
    for (int v = threadIdx.x; v < vectors; v += blockDim.x) to_vectors[v] = from_vectors[v];
  } else {
    for (int j = threadIdx.x; j < width; j += blockDim.x) to[j] = from[j];
  }
}

}  // namespace

cudaError_t LaunchEmbeddingGather(const __nv_bfloat16* table, int vocab, int hidden,
                                  const int32_t* ids, int n, float* x, cudaStream_t stream) {
  const bool vector = hidden % kBf16PerVector == 0 && IsAligned16(table) && IsAligned16(x);
  if (vector) {
    const int threads = BlockThreadsFor(hidden / kBf16PerVector, kMaxThreads);
    EmbeddingGatherKernel<true><<<n, threads, 0, stream>>>(table, vocab, hidden, ids, x);
  } else {
    const int threads = BlockThreadsFor(hidden, kMaxThreads);
    EmbeddingGatherKernel<false><<<n, threads, 0, stream>>>(table, vocab, hidden, ids, x);
  }
  return cudaGetLastError();
}

cudaError_t LaunchGatherRows(const __nv_bfloat16* src, int width, const int32_t* rows, int n,
                             __nv_bfloat16* dst, cudaStream_t stream) {
  const bool vector = width % kBf16PerVector == 0 && IsAligned16(src) && IsAligned16(dst);
  if (vector) {
    const int threads = BlockThreadsFor(width / kBf16PerVector, kMaxThreads);
    GatherRowsKernel<true><<<n, threads, 0, stream>>>(src, width, rows, dst);
  } else {
    const int threads = BlockThreadsFor(width, kMaxThreads);
    GatherRowsKernel<false><<<n, threads, 0, stream>>>(src, width, rows, dst);
  }
  return cudaGetLastError();
}

}  // namespace tandem::kernels::internal
