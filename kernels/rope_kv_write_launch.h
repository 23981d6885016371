// Internal to kernels/: the CUDA launch behind kernels/rope_kv_write.h, defined in rope_kv_write.cu
// and called by rope_kv_write.cc once the arguments are checked. Plain C++ and CUDA runtime only:
// the KV layout arrives as the strides the kernel needs.
#ifndef TANDEM_KERNELS_ROPE_KV_WRITE_LAUNCH_H_
#define TANDEM_KERNELS_ROPE_KV_WRITE_LAUNCH_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::kernels::internal {

struct RopeKvWriteLaunchArgs {
  const float* qkv = nullptr;
  const __nv_bfloat16* qkv_bias = nullptr;  // may be null
  const __nv_bfloat16* q_norm = nullptr;    // null, or set together with k_norm
  const __nv_bfloat16* k_norm = nullptr;
  float eps = 0.0f;
  const float* inv_freq = nullptr;
  const int32_t* positions = nullptr;
  const int64_t* slot_mapping = nullptr;
  int n = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // even
  int block_size = 0;
  int64_t pool_slots = 0;    // num_blocks * block_size: slots at or past it are skipped
  int64_t layer_offset = 0;  // KvLayout::Offset(layer, 0, 0, 0, 0)
  int64_t kv_stride = 0;     // KvLayout strides, in elements
  int64_t block_stride = 0;
  int64_t head_stride = 0;
  void* kv_pool = nullptr;  // __nv_bfloat16, or __nv_fp8_e4m3 codes when kv_fp8
  bool kv_fp8 = false;
  const float* layer_scales = nullptr;  // kv_fp8: this layer's [2][num_kv_heads] scales
  __nv_bfloat16* q_out = nullptr;
};

// Preconditions (checked by the caller): n > 0, non-null pointers (bias and norms optional),
// num_heads > 0, num_kv_heads > 0, head_dim > 0 and even, block_size > 0.
cudaError_t LaunchRopeKvWrite(const RopeKvWriteLaunchArgs& args, cudaStream_t stream);

}  // namespace tandem::kernels::internal

#endif  // TANDEM_KERNELS_ROPE_KV_WRITE_LAUNCH_H_
