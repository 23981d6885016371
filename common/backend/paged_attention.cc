#include "common/backend/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/backend/simd.h"

namespace tandem {

void PagedAttention(const KvLayout& layout, const float* pool, int layer,
                    const AttentionQuery& query, int sliding_window, float scale, float* scores,
                    float* out) {
  const int hd = layout.head_dim;
  const int bs = layout.block_size;
  const int group = query.group;
  const int first = AttentionStart(query.position, sliding_window);
  const int n = query.position - first + 1;
  const int64_t head_offset = query.kv_head * layout.head_stride();
  const float* k_layer = pool + layout.Offset(layer, 0, 0, 0, 0) + head_offset;
  const float* v_layer = pool + layout.Offset(layer, 1, 0, 0, 0) + head_offset;

  // Pass 1: scores, walking the block table one block at a time.
  for (int pos = first; pos <= query.position;) {
    const int slot = pos % bs;
    const int count = std::min(bs - slot, query.position - pos + 1);
    const float* k =
        k_layer + query.block_table[pos / bs] * layout.block_stride() + int64_t{slot} * hd;
    for (int s = 0; s < count; ++s, k += hd) {
      const int j = pos - first + s;
      for (int g = 0; g < group; ++g)
        scores[g * n + j] = simd::Dot(query.q + g * hd, k, hd) * scale;
    }
    pos += count;
  }

  // Pass 2: softmax per head, in place.
  for (int g = 0; g < group; ++g) {
    float* s = scores + g * n;
    float max = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < n; ++j) max = std::max(max, s[j]);
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) {
      s[j] = std::exp(s[j] - max);
      sum += s[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < n; ++j) s[j] *= inv;
  }

  // Pass 3: probability-weighted sum of V rows.
  std::fill(out, out + int64_t{group} * hd, 0.0f);
  for (int pos = first; pos <= query.position;) {
    const int slot = pos % bs;
    const int count = std::min(bs - slot, query.position - pos + 1);
    const float* v =
        v_layer + query.block_table[pos / bs] * layout.block_stride() + int64_t{slot} * hd;
    for (int s = 0; s < count; ++s, v += hd) {
      const int j = pos - first + s;
      for (int g = 0; g < group; ++g) simd::Axpy(scores[g * n + j], v, out + g * hd, hd);
    }
    pos += count;
  }
}

}  // namespace tandem
