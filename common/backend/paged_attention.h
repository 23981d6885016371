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

// out[g] = softmax(scale * q[g]·K) · V over the visible positions, f32 softmax with max
// subtraction. `scores` must hold group * (visible positions) floats; `out` holds group*head_dim.
void PagedAttention(const KvLayout& layout, const float* pool, int layer,
                    const AttentionQuery& query, int sliding_window, float scale, float* scores,
                    float* out);

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_PAGED_ATTENTION_H_
