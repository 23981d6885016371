// Device helper for kernels that reduce over a thread block (.cu only): the f32 sum of one value
// per thread, by warp shuffles and a shared-memory pass over the warps' partial sums.
#ifndef TANDEM_KERNELS_BLOCK_REDUCE_CUH_
#define TANDEM_KERNELS_BLOCK_REDUCE_CUH_

#include <cuda_runtime.h>

namespace tandem::kernels::internal {

// Sum over the 32 lanes of a warp; every lane gets the result. All lanes must call it.
__device__ __forceinline__ float WarpSum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// Sum over the block; every thread gets the result. blockDim.x must be a multiple of 32 (at most
// 1024) and every thread of the block must call it. Synchronizes the block.
__device__ __forceinline__ float BlockSum(float value) {
  __shared__ float warp_sums[32];
  __shared__ float block_sum;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  value = WarpSum(value);
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x / 32;
    float sum = lane < warps ? warp_sums[lane] : 0.0f;
    sum = WarpSum(sum);
    if (lane == 0) block_sum = sum;
  }
  __syncthreads();
  return block_sum;
}

}  // namespace tandem::kernels::internal

#endif  // TANDEM_KERNELS_BLOCK_REDUCE_CUH_
