#include "kernels/attention_reference.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "common/backend/paged_attention.h"
#include "gtest/gtest.h"
#include "tests/kernels/attention_test_util.h"

namespace tandem::kernels {
namespace {

using testing::kPoisonBf16;
using testing::MakePagedKv;
using testing::PagedKv;
using testing::RandomBf16;

// The cpu backend's attention (f32 pool) for one query row: [num_heads * head_dim] floats.
std::vector<float> CpuAttentionRow(const PagedKv& kv, const std::vector<float>& pool_f32, int layer,
                                   int num_heads, const Bf16Bits* q_row, int position,
                                   const int32_t* block_table, int sliding_window, float scale) {
  const int hd = kv.layout.head_dim;
  const int group = num_heads / kv.layout.num_kv_heads;
  const std::vector<float> q = FromBf16({q_row, static_cast<size_t>(num_heads) * hd});
  std::vector<float> out(q.size());
  std::vector<float> scores(static_cast<size_t>(group) * (position + 1));
  // The same geometry over the f32 copy of the bf16 pool.
  KvLayout f32_layout = kv.layout;
  f32_layout.dtype = DType::kF32;
  for (int kv_head = 0; kv_head < kv.layout.num_kv_heads; ++kv_head) {
    const AttentionQuery query{
        .q = q.data() + int64_t{kv_head} * group * hd,
        .group = group,
        .kv_head = kv_head,
        .position = position,
        .block_table = {block_table, static_cast<size_t>(kv.max_blocks_per_seq)}};
    PagedAttention(f32_layout, pool_f32.data(), layer, query, sliding_window, scale, scores.data(),
                   out.data() + int64_t{kv_head} * group * hd);
  }
  return out;
}

// bf16 `got` equals f32 `want` up to one bf16 rounding (and f32 summation-order noise).
void ExpectRowNear(const Bf16Bits* got, const std::vector<float>& want, const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i) {
    const float g = Bf16ToFloat(got[i]);
    ASSERT_LE(std::fabs(g - want[i]), kBf16Epsilon * std::fabs(want[i]) + 1e-5f)
        << what << " element " << i << ": got " << g << " want " << want[i];
  }
}

// (GQA group, head_dim, sliding window, block size)
class PrefillReferenceTest : public ::testing::TestWithParam<std::tuple<int, int, int, int>> {};

TEST_P(PrefillReferenceTest, MatchesCpuPagedAttention) {
  const auto [group, head_dim, window, block_size] = GetParam();
  const int num_kv_heads = 2;
  const int num_heads = num_kv_heads * group;
  const int layer = 1;
  // A fresh prompt, a chunk after a cached prefix, and a chunk starting on a block boundary; the
  // rows between items (37, 51) belong to no item and must stay untouched.
  const std::vector<int32_t> q_starts = {0, 38, 52};
  const std::vector<int32_t> q_lens = {37, 13, 16};
  const std::vector<int32_t> start_positions = {0, 20, 48};
  const int num_rows = 68;
  std::vector<int> capacities;
  for (size_t i = 0; i < q_lens.size(); ++i) capacities.push_back(start_positions[i] + q_lens[i]);
  const PagedKv kv = MakePagedKv(/*num_layers=*/2, num_kv_heads, head_dim, block_size, capacities,
                                 /*seed=*/group * 1000 + head_dim + window);
  const std::vector<float> pool_f32 = kv.PoolAsFloat();
  const int64_t row_elements = int64_t{num_heads} * head_dim;
  const std::vector<Bf16Bits> q = RandomBf16(num_rows * row_elements, 3.0f, 99);
  std::vector<Bf16Bits> out(num_rows * row_elements, kPoisonBf16);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));

  PrefillAttentionReference({.q = q.data(),
                             .out = out.data(),
                             .kv_pool = kv.pool.data(),
                             .layout = kv.layout,
                             .layer = layer,
                             .num_heads = num_heads,
                             .num_items = static_cast<int>(q_lens.size()),
                             .q_starts = q_starts.data(),
                             .q_lens = q_lens.data(),
                             .start_positions = start_positions.data(),
                             .block_tables = kv.block_tables.data(),
                             .max_blocks_per_seq = kv.max_blocks_per_seq,
                             .sliding_window = window,
                             .scale = scale});

  std::vector<bool> covered(num_rows, false);
  for (size_t i = 0; i < q_lens.size(); ++i) {
    for (int r = 0; r < q_lens[i]; ++r) {
      const int row = q_starts[i] + r;
      covered[row] = true;
      const std::vector<float> want =
          CpuAttentionRow(kv, pool_f32, layer, num_heads, q.data() + row * row_elements,
                          start_positions[i] + r, kv.BlockTable(i), window, scale);
      ExpectRowNear(out.data() + row * row_elements, want,
                    "item " + std::to_string(i) + " row " + std::to_string(r));
    }
  }
  for (int row = 0; row < num_rows; ++row) {
    if (covered[row]) continue;
    for (int64_t e = 0; e < row_elements; ++e) {
      ASSERT_EQ(out[row * row_elements + e], kPoisonBf16) << "row " << row << " is no item's";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PrefillReferenceTest,
    ::testing::Values(std::make_tuple(1, 64, 0, 16), std::make_tuple(4, 64, 0, 16),
                      std::make_tuple(8, 128, 0, 16), std::make_tuple(1, 128, 7, 16),
                      std::make_tuple(4, 64, 19, 5), std::make_tuple(8, 64, 1, 3)));

// A prompt prefilled in three chunks (each attending to the earlier chunks through the pool)
// gives exactly the rows of a one-shot prefill.
TEST(AttentionReferenceTest, ChunkedPrefillEqualsOneShot) {
  for (const int window : {0, 10}) {
    const int num_kv_heads = 2, num_heads = 8, head_dim = 64, prompt = 45;
    const PagedKv kv = MakePagedKv(1, num_kv_heads, head_dim, 16, {prompt}, 5);
    const int64_t row_elements = int64_t{num_heads} * head_dim;
    const std::vector<Bf16Bits> q = RandomBf16(prompt * row_elements, 3.0f, 6);
    PrefillAttentionReferenceArgs args{.q = q.data(),
                                       .kv_pool = kv.pool.data(),
                                       .layout = kv.layout,
                                       .layer = 0,
                                       .num_heads = num_heads,
                                       .num_items = 1,
                                       .block_tables = kv.block_tables.data(),
                                       .max_blocks_per_seq = kv.max_blocks_per_seq,
                                       .sliding_window = window,
                                       .scale = 0.125f};

    std::vector<Bf16Bits> one_shot(prompt * row_elements, kPoisonBf16);
    const int32_t zero = 0, full = prompt;
    args.out = one_shot.data();
    args.q_starts = &zero;
    args.q_lens = &full;
    args.start_positions = &zero;
    PrefillAttentionReference(args);

    std::vector<Bf16Bits> chunked(prompt * row_elements, kPoisonBf16);
    args.out = chunked.data();
    const std::vector<int32_t> chunk_starts = {0, 17, 32, prompt};
    for (size_t c = 0; c + 1 < chunk_starts.size(); ++c) {
      const int32_t start = chunk_starts[c], len = chunk_starts[c + 1] - chunk_starts[c];
      args.q_starts = &start;  // rows of q/out are positions here
      args.q_lens = &len;
      args.start_positions = &start;
      PrefillAttentionReference(args);
    }
    EXPECT_EQ(chunked, one_shot) << "window " << window;
  }
}

// Decode of a sequence with context c is a prefill of one row at position c - 1; context 0
// writes zeros.
TEST(AttentionReferenceTest, DecodeEqualsPrefillOfOneRow) {
  for (const int window : {0, 12}) {
    const int num_kv_heads = 2, num_heads = 8, head_dim = 128;
    const std::vector<int32_t> context_lens = {1, 16, 17, 33, 0};
    const std::vector<int32_t> token_rows = {3, 0, 4, 1, 2};
    const int num_seqs = static_cast<int>(context_lens.size());
    const PagedKv kv =
        MakePagedKv(2, num_kv_heads, head_dim, 16, {context_lens.begin(), context_lens.end()}, 17);
    const int64_t row_elements = int64_t{num_heads} * head_dim;
    const std::vector<Bf16Bits> q = RandomBf16(num_seqs * row_elements, 3.0f, 18);
    std::vector<Bf16Bits> decoded(num_seqs * row_elements, kPoisonBf16);
    DecodeAttentionReference({.q = q.data(),
                              .out = decoded.data(),
                              .kv_pool = kv.pool.data(),
                              .layout = kv.layout,
                              .layer = 1,
                              .num_heads = num_heads,
                              .num_seqs = num_seqs,
                              .token_rows = token_rows.data(),
                              .context_lens = context_lens.data(),
                              .block_tables = kv.block_tables.data(),
                              .max_blocks_per_seq = kv.max_blocks_per_seq,
                              .sliding_window = window,
                              .scale = 0.09f});

    for (int s = 0; s < num_seqs; ++s) {
      const Bf16Bits* got = decoded.data() + token_rows[s] * row_elements;
      if (context_lens[s] == 0) {
        for (int64_t e = 0; e < row_elements; ++e) ASSERT_EQ(Bf16ToFloat(got[e]), 0.0f) << e;
        continue;
      }
      std::vector<Bf16Bits> prefilled(num_seqs * row_elements, kPoisonBf16);
      const int32_t one = 1, position = context_lens[s] - 1;
      PrefillAttentionReference({.q = q.data(),
                                 .out = prefilled.data(),
                                 .kv_pool = kv.pool.data(),
                                 .layout = kv.layout,
                                 .layer = 1,
                                 .num_heads = num_heads,
                                 .num_items = 1,
                                 .q_starts = &token_rows[s],
                                 .q_lens = &one,
                                 .start_positions = &position,
                                 .block_tables = kv.BlockTable(s),
                                 .max_blocks_per_seq = kv.max_blocks_per_seq,
                                 .sliding_window = window,
                                 .scale = 0.09f});
      const Bf16Bits* want = prefilled.data() + token_rows[s] * row_elements;
      EXPECT_EQ(std::vector<Bf16Bits>(got, got + row_elements),
                std::vector<Bf16Bits>(want, want + row_elements))
          << "seq " << s << " window " << window;
    }
  }
}

// An fp8 pool reads as the bf16 pool of its values (code times its head's scale, exactly a bf16
// value): both references give the same bits, for decode and prefill, in every layer and head.
TEST(AttentionReferenceTest, Fp8PoolEqualsTheBf16PoolOfItsValues) {
  const int num_kv_heads = 4, num_heads = 8, head_dim = 64;
  const std::vector<int32_t> context_lens = {1, 16, 17, 40};
  const std::vector<int32_t> token_rows = {0, 1, 2, 3};
  const int num_seqs = static_cast<int>(context_lens.size());
  const PagedKv fp8 =
      MakePagedKv(2, num_kv_heads, head_dim, 16, {context_lens.begin(), context_lens.end()}, 23, 3,
                  1, DType::kFP8E4M3);
  // The scales differ by head and by K|V (1/32 .. 1/256), and the codes use E4M3's range.
  ASSERT_NE(fp8.scales[0], fp8.scales[1]);
  int large_codes = 0;
  for (uint8_t code : fp8.pool_fp8) large_codes += (code & 0x7f) >= 0x60 ? 1 : 0;  // >= 32
  EXPECT_GT(large_codes, 0);
  PagedKv bf16 = fp8;
  bf16.layout.dtype = DType::kBF16;
  const std::vector<float> values = fp8.PoolAsFloat();
  bf16.pool = ToBf16(values);
  ASSERT_EQ(FromBf16(bf16.pool), values);  // exact
  const int64_t row_elements = int64_t{num_heads} * head_dim;
  const std::vector<Bf16Bits> q = RandomBf16(num_seqs * row_elements, 3.0f, 24);
  for (int layer = 0; layer < 2; ++layer) {
    std::vector<Bf16Bits> outs[2];
    for (int which = 0; which < 2; ++which) {
      const PagedKv& kv = which == 0 ? fp8 : bf16;
      outs[which].assign(num_seqs * row_elements, kPoisonBf16);
      DecodeAttentionReference({.q = q.data(),
                                .out = outs[which].data(),
                                .kv_pool = kv.PoolData(),
                                .kv_scales = kv.ScalesData(),
                                .layout = kv.layout,
                                .layer = layer,
                                .num_heads = num_heads,
                                .num_seqs = num_seqs,
                                .token_rows = token_rows.data(),
                                .context_lens = context_lens.data(),
                                .block_tables = kv.block_tables.data(),
                                .max_blocks_per_seq = kv.max_blocks_per_seq,
                                .sliding_window = 0,
                                .scale = 0.125f});
    }
    EXPECT_EQ(outs[0], outs[1]) << "decode, layer " << layer;
    const int32_t zero = 0, last = 3;
    const int32_t q_len = context_lens[last];
    const std::vector<Bf16Bits> q_rows = RandomBf16(q_len * row_elements, 3.0f, 25 + layer);
    for (int which = 0; which < 2; ++which) {
      const PagedKv& kv = which == 0 ? fp8 : bf16;
      outs[which].assign(q_len * row_elements, kPoisonBf16);
      PrefillAttentionReference({.q = q_rows.data(),
                                 .out = outs[which].data(),
                                 .kv_pool = kv.PoolData(),
                                 .kv_scales = kv.ScalesData(),
                                 .layout = kv.layout,
                                 .layer = layer,
                                 .num_heads = num_heads,
                                 .num_items = 1,
                                 .q_starts = &zero,
                                 .q_lens = &q_len,
                                 .start_positions = &zero,
                                 .block_tables = kv.BlockTable(last),
                                 .max_blocks_per_seq = kv.max_blocks_per_seq,
                                 .sliding_window = 0,
                                 .scale = 0.125f});
    }
    EXPECT_EQ(outs[0], outs[1]) << "prefill, layer " << layer;
  }
}

// A two-block sequence whose V rows are position + 1 in every dimension, stored in blocks 3 and 1
// of a four-block pool (block size 2).
struct HandPool {
  static constexpr int kHeadDim = 64;
  KvLayout layout{.dtype = DType::kBF16,
                  .num_layers = 1,
                  .num_kv_heads = 1,
                  .head_dim = kHeadDim,
                  .block_size = 2,
                  .num_blocks = 4};
  std::vector<Bf16Bits> pool;
  std::vector<int32_t> block_table = {3, 1};

  HandPool() {
    pool = RandomBf16(layout.total_elements(), 1.0f, 3);  // K stays random
    for (int p = 0; p < 4; ++p) {
      Bf16Bits* v = pool.data() + layout.Offset(0, 1, block_table[p / 2], 0, p % 2);
      for (int d = 0; d < kHeadDim; ++d) v[d] = FloatToBf16(static_cast<float>(p + 1));
    }
  }
};

// q = 0 weighs every visible position equally: row p is the mean of V over its window.
TEST(AttentionReferenceTest, ZeroQueryAveragesVisibleValues) {
  const HandPool hand;
  const std::vector<Bf16Bits> q(4 * HandPool::kHeadDim, FloatToBf16(0.0f));
  const int32_t q_start = 0, q_len = 4, start = 0;
  for (const auto& [window, means] : {std::pair{0, std::vector<float>{1.0f, 1.5f, 2.0f, 2.5f}},
                                      std::pair{2, std::vector<float>{1.0f, 1.5f, 2.5f, 3.5f}}}) {
    std::vector<Bf16Bits> out(q.size(), kPoisonBf16);
    PrefillAttentionReference({.q = q.data(),
                               .out = out.data(),
                               .kv_pool = hand.pool.data(),
                               .layout = hand.layout,
                               .layer = 0,
                               .num_heads = 1,
                               .num_items = 1,
                               .q_starts = &q_start,
                               .q_lens = &q_len,
                               .start_positions = &start,
                               .block_tables = hand.block_table.data(),
                               .max_blocks_per_seq = 2,
                               .sliding_window = window,
                               .scale = 1.0f});
    for (int p = 0; p < 4; ++p) {
      for (int d = 0; d < HandPool::kHeadDim; ++d) {
        ASSERT_EQ(Bf16ToFloat(out[p * HandPool::kHeadDim + d]), means[p])
            << "window " << window << " position " << p << " dim " << d;
      }
    }
  }
}

// One key far above the others takes all the weight: the output is its V row.
TEST(AttentionReferenceTest, DominantKeySelectsItsValue) {
  HandPool hand;
  for (int p = 0; p < 4; ++p) {
    Bf16Bits* k = hand.pool.data() + hand.layout.Offset(0, 0, hand.block_table[p / 2], 0, p % 2);
    for (int d = 0; d < HandPool::kHeadDim; ++d) k[d] = FloatToBf16(d == 0 && p == 2 ? 1.0f : 0.0f);
  }
  std::vector<Bf16Bits> q(HandPool::kHeadDim, FloatToBf16(0.0f));
  q[0] = FloatToBf16(10.0f);
  std::vector<Bf16Bits> out(q.size(), kPoisonBf16);
  const int32_t row = 0, context = 4;
  DecodeAttentionReference({.q = q.data(),
                            .out = out.data(),
                            .kv_pool = hand.pool.data(),
                            .layout = hand.layout,
                            .layer = 0,
                            .num_heads = 1,
                            .num_seqs = 1,
                            .token_rows = &row,
                            .context_lens = &context,
                            .block_tables = hand.block_table.data(),
                            .max_blocks_per_seq = 2,
                            .scale = 10.0f});  // scores 100 at position 2, 0 elsewhere
  for (int d = 0; d < HandPool::kHeadDim; ++d) EXPECT_EQ(Bf16ToFloat(out[d]), 3.0f) << d;
}

}  // namespace
}  // namespace tandem::kernels
