#include "common/backend/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "common/backend/kv_row_ops.h"
#include "common/backend/simd.h"

namespace tandem {
namespace {

// A bf16 or fp8 row that several query heads read (GQA) is widened to f32 once, into a buffer
// on the stack, instead of once per head; the arithmetic is the same either way.
constexpr int kMaxWidenedRow = 512;

// The row as f32: `row` itself for f32 pools; else widened into `buffer` when it pays (more than
// one head reads it), or nullptr (the caller reads the stored row directly).
template <typename T>
const float* F32Row(const T* row, int hd, int readers, float* buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return row;
  } else {
    if (readers < 2 || hd > kMaxWidenedRow) return nullptr;
    kvrow::Widen(row, hd, buffer);
    return buffer;
  }
}

template <typename T>
void PagedAttentionOf(const KvLayout& layout, const T* pool, int layer, const AttentionQuery& query,
                      int sliding_window, float scale, float* scores, float* out,
                      KvHeadScales kv_scales) {
  const int hd = layout.head_dim;
  const int bs = layout.block_size;
  const int group = query.group;
  const int first = AttentionStart(query.position, sliding_window);
  const int n = query.position - first + 1;
  const int64_t head_offset = query.kv_head * layout.head_stride();
  const T* k_layer = pool + layout.Offset(layer, 0, 0, 0, 0) + head_offset;
  const T* v_layer = pool + layout.Offset(layer, 1, 0, 0, 0) + head_offset;
  // f32 and bf16 pools have scale 1: the product below is then exactly `scale`.
  const float score_scale = scale * kv_scales.k;
  float widened[kMaxWidenedRow];

  // Pass 1: scores, walking the block table one block at a time.
  for (int pos = first; pos <= query.position;) {
    const int slot = pos % bs;
    const int count = std::min(bs - slot, query.position - pos + 1);
    const T* k = k_layer + query.block_table[pos / bs] * layout.block_stride() + int64_t{slot} * hd;
    for (int s = 0; s < count; ++s, k += hd) {
      const int j = pos - first + s;
      if (const float* kf = F32Row(k, hd, group, widened); kf != nullptr) {
        for (int g = 0; g < group; ++g)
          scores[g * n + j] = simd::Dot(query.q + g * hd, kf, hd) * score_scale;
      } else {
        for (int g = 0; g < group; ++g)
          scores[g * n + j] = kvrow::Dot(query.q + g * hd, k, hd) * score_scale;
      }
    }
    pos += count;
  }

  // Pass 2: softmax per head, in place (V's scale folded into the normalization).
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
    if (kv_scales.v != 1.0f) {
      for (int j = 0; j < n; ++j) s[j] *= kv_scales.v;
    }
  }

  // Pass 3: probability-weighted sum of V rows.
  std::fill(out, out + int64_t{group} * hd, 0.0f);
  for (int pos = first; pos <= query.position;) {
    const int slot = pos % bs;
    const int count = std::min(bs - slot, query.position - pos + 1);
    const T* v = v_layer + query.block_table[pos / bs] * layout.block_stride() + int64_t{slot} * hd;
    for (int s = 0; s < count; ++s, v += hd) {
      const int j = pos - first + s;
      if (const float* vf = F32Row(v, hd, group, widened); vf != nullptr) {
        for (int g = 0; g < group; ++g) simd::Axpy(scores[g * n + j], vf, out + g * hd, hd);
      } else {
        for (int g = 0; g < group; ++g) kvrow::Axpy(scores[g * n + j], v, out + g * hd, hd);
      }
    }
    pos += count;
  }
}

}  // namespace

void PagedAttention(const KvLayout& layout, const void* pool, int layer,
                    const AttentionQuery& query, int sliding_window, float scale, float* scores,
                    float* out, KvHeadScales kv_scales) {
  switch (layout.dtype) {
    case DType::kBF16:
      PagedAttentionOf(layout, static_cast<const kvrow::Bf16*>(pool), layer, query, sliding_window,
                       scale, scores, out, kv_scales);
      return;
    case DType::kFP8E4M3:
      PagedAttentionOf(layout, static_cast<const kvrow::Fp8*>(pool), layer, query, sliding_window,
                       scale, scores, out, kv_scales);
      return;
    case DType::kF32:
    case DType::kF16:  // the cpu backend never makes an f16 pool (CpuBackend::Create)
      PagedAttentionOf(layout, static_cast<const float*>(pool), layer, query, sliding_window, scale,
                       scores, out, kv_scales);
      return;
  }
}

}  // namespace tandem
