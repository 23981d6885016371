// Causal attention of one query token over K/V in the paged pool (KvLayout), for the group of
// query heads that share one KV head (GQA): the K and V rows are read once for the whole group.
#ifndef TANDEM_COMMON_BACKEND_PAGED_ATTENTION_H_
#define TANDEM_COMMON_BACKEND_PAGED_ATTENTION_H_

#include <cstdint>
#include <span>

#include "common/kv/kv_layout.h"

namespace tandem {

struct AttentionQuery {
  const float* q = nullptr;  // [group, head_dim]: the query heads of kv_head, after RoPE
  int group = 1;             // query heads per KV head
  int kv_head = 0;
  int position = 0;  // the query's position; it attends to positions [first, position]
  std::span<const int32_t> block_table;  // covers position
};

// First position a query at `position` sees: HF/Mistral sliding-window semantics keep the last
// `sliding_window` positions including itself (0: no window).
inline int AttentionStart(int position, int sliding_window) {
  return sliding_window > 0 && position >= sliding_window ? position - sliding_window + 1 : 0;
}

// What one (layer, kv head)'s stored K and V rows must be multiplied by: an fp8 pool's scales
// (common/kv/kv_scales.h); 1 for f32 and bf16 pools.
struct KvHeadScales {
  float k = 1.0f;
  float v = 1.0f;
};

// out[g] = softmax(scale * q[g]·K) · V over the visible positions, f32 softmax with max
// subtraction. `pool` holds layout.dtype elements (f32, bf16 or fp8 E4M3), widened to f32 as they
// are read; K's scale multiplies each score, V's each probability. `scores` must hold
// group * (visible positions) floats; `out` holds group*head_dim.
void PagedAttention(const KvLayout& layout, const void* pool, int layer,
                    const AttentionQuery& query, int sliding_window, float scale, float* scores,
                    float* out, KvHeadScales kv_scales = {});

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_PAGED_ATTENTION_H_
