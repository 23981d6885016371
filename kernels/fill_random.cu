#include "kernels/fill_random_launch.h"
#include "kernels/sampling_rng.h"

namespace tandem::kernels::internal {
namespace {

__global__ void FillRandomBf16Kernel(__nv_bfloat16* dst, size_t n, float lo, float hi,
                                     uint64_t seed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] = __float2bfloat16(lo + (hi - lo) * SamplingUniform(seed, i));
  }
}

}  // namespace

cudaError_t LaunchFillRandomBf16(__nv_bfloat16* dst, size_t n, float lo, float hi, uint64_t seed,
                                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const size_t wanted = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < 65536 ? wanted : 65536);
  FillRandomBf16Kernel<<<blocks, kThreads, 0, stream>>>(dst, n, lo, hi, seed);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::internal
