#include "kernels/attention_reference.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/backend/paged_attention.h"
#include "common/util/fp8.h"

namespace tandem::kernels {
namespace {

// Where to find one sequence's K/V: the pool's layer and the sequence's block table.
struct PagedSequence {
  const KvLayout& layout;
  const void* kv_pool;
  const float* kv_scales;  // fp8 pools
  int layer;
  const int32_t* block_table;

  // row[0..head_dim) = the values of (kv, kv_head) at `position`, in f32.
  void Row(int kv, int kv_head, int position, float* row) const {
    const int block = block_table[position / layout.block_size];
    const int64_t offset = layout.Offset(layer, kv, block, kv_head, position % layout.block_size);
    if (layout.dtype == DType::kFP8E4M3) {
      const uint8_t* codes = static_cast<const uint8_t*>(kv_pool) + offset;
      const float scale = kv_scales[(layer * 2 + kv) * layout.num_kv_heads + kv_head];
      const std::array<float, 256>& values = Fp8E4M3Values();
      for (int d = 0; d < layout.head_dim; ++d) row[d] = values[codes[d]] * scale;
    } else {
      const Bf16Bits* bits = static_cast<const Bf16Bits*>(kv_pool) + offset;
      for (int d = 0; d < layout.head_dim; ++d) row[d] = Bf16ToFloat(bits[d]);
    }
  }
};

// out_row[h] = softmax(scale * q_row[h]·K) · V over positions [AttentionStart, position], for every
// query head h; two passes in f32, rounded once to bf16. `scores` is scratch.
void AttendOneRow(const PagedSequence& seq, int num_heads, const Bf16Bits* q_row, int position,
                  int sliding_window, float scale, std::vector<float>& scores, Bf16Bits* out_row) {
  const int hd = seq.layout.head_dim;
  const int group = num_heads / seq.layout.num_kv_heads;
  const int first = AttentionStart(position, sliding_window);
  const int n = position - first + 1;
  scores.resize(n);
  std::vector<float> q(hd);
  std::vector<float> acc(hd);
  std::vector<float> kv_row(hd);
  for (int h = 0; h < num_heads; ++h) {
    const int kv_head = h / group;
    for (int d = 0; d < hd; ++d) q[d] = Bf16ToFloat(q_row[int64_t{h} * hd + d]);
    float max = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < n; ++j) {
      seq.Row(/*kv=*/0, kv_head, first + j, kv_row.data());
      float dot = 0.0f;
      for (int d = 0; d < hd; ++d) dot += q[d] * kv_row[d];
      scores[j] = dot * scale;
      max = std::max(max, scores[j]);
    }
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) {
      scores[j] = std::exp(scores[j] - max);
      sum += scores[j];
    }
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int j = 0; j < n; ++j) {
      seq.Row(/*kv=*/1, kv_head, first + j, kv_row.data());
      for (int d = 0; d < hd; ++d) acc[d] += scores[j] * kv_row[d];
    }
    const float inv = 1.0f / sum;
    for (int d = 0; d < hd; ++d) out_row[int64_t{h} * hd + d] = FloatToBf16(acc[d] * inv);
  }
}

}  // namespace

void PrefillAttentionReference(const PrefillAttentionReferenceArgs& args) {
  const int64_t row_elements = int64_t{args.num_heads} * args.layout.head_dim;
  std::vector<float> scores;
  for (int i = 0; i < args.num_items; ++i) {
    const PagedSequence seq{args.layout, args.kv_pool, args.kv_scales, args.layer,
                            args.block_tables + int64_t{i} * args.max_blocks_per_seq};
    for (int r = 0; r < args.q_lens[i]; ++r) {
      const int64_t row = args.q_starts[i] + r;
      AttendOneRow(seq, args.num_heads, args.q + row * row_elements, args.start_positions[i] + r,
                   args.sliding_window, args.scale, scores, args.out + row * row_elements);
    }
  }
}

void DecodeAttentionReference(const DecodeAttentionReferenceArgs& args) {
  const int64_t row_elements = int64_t{args.num_heads} * args.layout.head_dim;
  std::vector<float> scores;
  for (int s = 0; s < args.num_seqs; ++s) {
    const int64_t row = args.token_rows[s];
    Bf16Bits* out_row = args.out + row * row_elements;
    if (args.context_lens[s] == 0) {
      std::fill(out_row, out_row + row_elements, FloatToBf16(0.0f));
      continue;
    }
    const PagedSequence seq{args.layout, args.kv_pool, args.kv_scales, args.layer,
                            args.block_tables + int64_t{s} * args.max_blocks_per_seq};
    AttendOneRow(seq, args.num_heads, args.q + row * row_elements, args.context_lens[s] - 1,
                 args.sliding_window, args.scale, scores, out_row);
  }
}

}  // namespace tandem::kernels
