// Internal to kernels/: the CUDA launch behind kernels/prefill_attention.h, defined in
// prefill_attention.cu and called by prefill_attention.cc once the arguments are checked. Plain
// C++ and CUDA runtime only: the KV layout arrives as the pointers and strides the kernel needs.
#ifndef TANDEM_KERNELS_PREFILL_ATTENTION_LAUNCH_H_
#define TANDEM_KERNELS_PREFILL_ATTENTION_LAUNCH_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::kernels::internal {

struct PrefillAttentionLaunchArgs {
  const __nv_bfloat16* q = nullptr;
  __nv_bfloat16* out = nullptr;
  // kv_pool + KvLayout::Offset(layer, 0|1, 0, 0, 0): __nv_bfloat16, or __nv_fp8_e4m3 codes when
  // kv_fp8, whose values are the codes' times k_scales / v_scales[kv_head] (this layer's).
  const void* k_layer = nullptr;
  const void* v_layer = nullptr;
  bool kv_fp8 = false;
  const float* k_scales = nullptr;
  const float* v_scales = nullptr;
  int64_t block_stride = 0;  // KvLayout strides, in elements
  int64_t head_stride = 0;
  int block_size = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // 64 or 128
  int num_heads = 0;
  int num_items = 0;
  const int32_t* q_starts = nullptr;
  const int32_t* q_lens = nullptr;
  const int32_t* start_positions = nullptr;
  const int32_t* block_tables = nullptr;
  int max_blocks_per_seq = 0;
  int max_q_len = 0;
  int sliding_window = 0;
  float scale = 0.0f;
};

// Preconditions (checked by the caller): num_items > 0, max_q_len > 0, non-null pointers with q,
// out and the pool 16-byte aligned, head_dim 64 or 128, num_heads a positive multiple of
// num_kv_heads, block_size > 0, sliding_window >= 0.
cudaError_t LaunchPrefillAttention(const PrefillAttentionLaunchArgs& args, cudaStream_t stream);

}  // namespace tandem::kernels::internal

#endif  // TANDEM_KERNELS_PREFILL_ATTENTION_LAUNCH_H_
