// Prefill attention: causal, GQA, flash-style (tiles of queries against tiles of keys with an
// online softmax, nothing quadratic in memory), reading K and V from the paged pool. The chunk's
// own K/V is written to the pool first (kernels/rope_kv_write.h), so a chunk after a cached prefix
// or an earlier chunk attends to everything through the block table: chunked prefill and prefix
// caching need nothing else.
#ifndef TANDEM_KERNELS_PREFILL_ATTENTION_H_
#define TANDEM_KERNELS_PREFILL_ATTENTION_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "common/kv/kv_layout.h"

namespace tandem::kernels {

struct PrefillAttentionArgs {
  const __nv_bfloat16* q = nullptr;  // [tokens, num_heads * head_dim], rotated
  __nv_bfloat16* out = nullptr;      // [tokens, num_heads * head_dim]
  const void* kv_pool = nullptr;     // layout.dtype elements: bf16, or fp8 E4M3 codes
  KvLayout layout;                   // dtype kBF16 or kFP8E4M3
  // kFP8E4M3: [num_layers][2 (K, V)][num_kv_heads] scales on the device (common/kv/kv_scales.h).
  const float* kv_scales = nullptr;
  int layer = 0;
  int num_heads = 0;  // a multiple of layout.num_kv_heads
  // Item i's queries are rows [q_starts[i], q_starts[i] + q_lens[i]) at positions
  // [start_positions[i], start_positions[i] + q_lens[i]); its keys are positions
  // [0, start_positions[i] + q_lens[i]) through block_tables[i * max_blocks_per_seq +
  // p/block_size].
  int num_items = 0;
  const int32_t* q_starts = nullptr;         // [num_items], device
  const int32_t* q_lens = nullptr;           // [num_items], device
  const int32_t* start_positions = nullptr;  // [num_items], device
  const int32_t* block_tables = nullptr;     // [num_items, max_blocks_per_seq], device
  int max_blocks_per_seq = 0;
  int max_q_len = 0;       // >= every q_lens[i]: sizes the grid
  int sliding_window = 0;  // 0: none; else a query at p sees [max(0, p - window + 1), p]
  float scale = 0.0f;      // usually 1/sqrt(head_dim)
};

// out[row, head] = softmax(scale * q·K^T over the visible positions) · V, f32 accumulation, bf16
// out. Checks: pointers (kv_scales for fp8), counts >= 0, layout.dtype kBF16 or kFP8E4M3, head_dim
// 64 or 128, num_heads a multiple of num_kv_heads, layer in range, max_q_len >= 0. num_items == 0
// is a no-op.
absl::Status PrefillAttention(const PrefillAttentionArgs& args, cudaStream_t stream);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_PREFILL_ATTENTION_H_
