// The model's weights on the GPU as the cuda backend computes with them: one bf16 device arena laid
// out by WeightArenaPlan (q/k/v and gate/up fused, [out, in] rows), uploaded once.
#ifndef TANDEM_COMMON_BACKEND_CUDA_CUDA_WEIGHTS_H_
#define TANDEM_COMMON_BACKEND_CUDA_CUDA_WEIGHTS_H_

#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_weights.h"
#include "common/util/thread_pool.h"
#include "kernels/device_buffer.h"

namespace tandem {

struct CudaLayerWeights {
  const __nv_bfloat16* input_norm = nullptr;
  const __nv_bfloat16* wqkv = nullptr;
  const __nv_bfloat16* bqkv = nullptr;    // or null
  const __nv_bfloat16* q_norm = nullptr;  // or null
  const __nv_bfloat16* k_norm = nullptr;  // or null
  const __nv_bfloat16* wo = nullptr;
  const __nv_bfloat16* bo = nullptr;  // or null
  const __nv_bfloat16* post_norm = nullptr;
  const __nv_bfloat16* w_gate_up = nullptr;
  const __nv_bfloat16* w_down = nullptr;
};

struct CudaWeights {
  const __nv_bfloat16* embed = nullptr;
  const __nv_bfloat16* final_norm = nullptr;
  const __nv_bfloat16* lm_head = nullptr;  // == embed when tied
  std::vector<CudaLayerWeights> layers;
  kernels::DeviceBuffer arena;

  size_t bytes() const { return arena.bytes(); }
};

// Checks and converts `weights` to bf16 on the host (threads from `pool`) and copies them to the
// current device.
absl::StatusOr<CudaWeights> UploadCudaWeights(const ModelWeights& weights, ThreadPool& pool);

// Weights of `config`'s shapes filled on the device with pseudo-random values from `seed` (norm
// weights near 1, linear weights uniform in +-1/sqrt(in)): real model sizes for benchmarks without
// a checkpoint or a host copy.
absl::StatusOr<CudaWeights> RandomCudaWeights(const ModelConfig& config, uint64_t seed);

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_CUDA_CUDA_WEIGHTS_H_
