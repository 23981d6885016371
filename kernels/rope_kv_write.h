// The step between the QKV GEMM and attention, fused: bias, Qwen3's per-head q/k RMSNorm, rotary
// embeddings (Hugging Face's rotate_half convention; the llama3/linear scaling lives in inv_freq)
// and the write of each token's K and V into its slot of the paged KV pool.
#ifndef TANDEM_KERNELS_ROPE_KV_WRITE_H_
#define TANDEM_KERNELS_ROPE_KV_WRITE_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "common/kv/kv_layout.h"

namespace tandem::kernels {

struct RopeKvWriteArgs {
  // [n, (num_heads + 2 * num_kv_heads) * head_dim] f32: the QKV GEMM's output rows (q heads, then
  // k heads, then v heads).
  const float* qkv = nullptr;
  const __nv_bfloat16* qkv_bias = nullptr;  // [(num_heads + 2 * num_kv_heads) * head_dim] or null
  const __nv_bfloat16* q_norm = nullptr;    // [head_dim] or null (Qwen3); set with k_norm
  const __nv_bfloat16* k_norm = nullptr;    // [head_dim] or null
  float eps = 1e-6f;                        // for q_norm/k_norm
  const float* inv_freq = nullptr;          // [head_dim / 2], device; see common/backend/rope.h
  const int32_t* positions = nullptr;       // [n]
  // [n]: the pool slot of each token, block_id * layout.block_size + slot_in_block; negative: the
  // token's K/V is not written (padding rows of a captured CUDA graph).
  const int64_t* slot_mapping = nullptr;
  int n = 0;
  int num_heads = 0;
  KvLayout layout;  // dtype kBF16 or kFP8E4M3; num_kv_heads and head_dim are the model's
  int layer = 0;
  void* kv_pool = nullptr;  // the whole pool, of layout.dtype elements indexed as `layout` says
  // kFP8E4M3: [num_layers][2 (K, V)][num_kv_heads] scales on the device (common/kv/kv_scales.h);
  // an element stores the E4M3 code of value / scale. Unused for bf16.
  const float* kv_scales = nullptr;
  __nv_bfloat16* q_out = nullptr;  // [n, num_heads * head_dim]: rotated queries
};

// For each token t and head h, in f32: x = qkv[t, head h] (+ bias); for q and k heads, x =
// RMSNorm(x) * norm weight when q_norm/k_norm are set, then x is rotated by angle
// f32(positions[t]) * inv_freq[i] (pairs i, i + head_dim/2). q heads go to q_out, k and v heads to
// the pool at layout.Offset(layer, 0|1, slot / block_size, kv_head, slot % block_size), as bf16
// (to nearest even) or as the E4M3 code of x / scale (to nearest even, saturating; the codec of
// common/util/fp8.h). Checks: pointers (kv_scales too for fp8), n >= 0, layout.dtype kBF16 or
// kFP8E4M3, even head_dim, num_heads a multiple of layout.num_kv_heads, 0 <= layer <
// layout.num_layers. Slots beyond the pool are skipped.
absl::Status RopeKvWrite(const RopeKvWriteArgs& args, cudaStream_t stream);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_ROPE_KV_WRITE_H_
